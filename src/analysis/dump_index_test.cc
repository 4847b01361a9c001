#include "graphdump/analysis/dump_index.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "graphdump/analysis/trace.h"
#include "graphdump/analysis/watch.h"
#include "testing/testing.h"

namespace graphdump::analysis {
namespace {

TEST(DumpFileNameTest, ParsesGraphdumpAndMindSporeNames) {
  std::string op_type, op_name;
  TensorEntry t;
  ASSERT_TRUE(ParseDumpFileName(
      "Conv2D.Default_net-Net_conv-Conv2d_Conv2D-op12.0.0.1700000000000001.output.1."
      "DefaultFormat.float32.npy",
      &op_type, &op_name, &t));
  EXPECT_EQ(op_type, "Conv2D");
  EXPECT_EQ(op_name, "Default_net-Net_conv-Conv2d_Conv2D-op12");
  EXPECT_FALSE(t.is_input);
  EXPECT_EQ(t.slot, 1u);
  EXPECT_EQ(t.format, "DefaultFormat");
  EXPECT_EQ(t.dtype_name, "float32");
  EXPECT_EQ(t.timestamp, 1700000000000001u);

  ASSERT_TRUE(ParseDumpFileName("Add.Default_Add-op3.0.0.17.input.0.DefaultFormat.Float32.npy",
                                &op_type, &op_name, &t));
  EXPECT_TRUE(t.is_input);
  ASSERT_TRUE(t.dtype.has_value());
  EXPECT_EQ(*t.dtype, DType::kFloat32);  // MindSpore CPU spelling

  ASSERT_TRUE(ParseDumpFileName("Parameter.fc_weight.0.0.17.output.0.DefaultFormat.bfloat16.npy",
                                &op_type, &op_name, &t));
  EXPECT_EQ(op_type, "Parameter");
  EXPECT_EQ(op_name, "fc_weight");
  EXPECT_EQ(*t.dtype, DType::kBFloat16);

  // Old Ascend async npy names carry no dtype.
  ASSERT_TRUE(ParseDumpFileName("MatMul.Default_MatMul-op1.3.2.17.output.0.NC1HWC0.npy", &op_type,
                                &op_name, &t));
  EXPECT_EQ(t.format, "NC1HWC0");
  EXPECT_TRUE(t.dtype_name.empty());

  EXPECT_FALSE(ParseDumpFileName("random.npy", &op_type, &op_name, &t));
  EXPECT_FALSE(ParseDumpFileName("Add.x.0.0.17.sideways.0.DefaultFormat.float32.npy", &op_type,
                                 &op_name, &t));
  EXPECT_FALSE(
      ParseDumpFileName("Add.x.0.0.17.output.0.DefaultFormat.float32.txt", &op_type, &op_name, &t));
}

TEST(DumpFileNameTest, FileKernelNameReplacesSeparators) {
  EXPECT_EQ(FileKernelName("Default/a.b\\c d-op1"), "Default_a_b_c_d-op1");
}

TEST(IrTraceTest, ReadsBothLineSpellingsAndAttachesToKernels) {
  const std::string ir =
      "# IR entry\n"
      "  %1(x) = Conv2D(%0)\n"
      "      # Fullname with scope: (Default/conv-Conv2d/Conv2D-op1)\n"
      "      # In file /home/u/model.py(58)/        x = self.conv(x)/\n"
      "      # In file /usr/lib/torch/module.py:1190/        return forward_call(x)/\n"
      "  %2(y) = ReLU(%1)\n"
      "      # In file /home/u/model.py(99)/ not attached: no name yet/\n"
      "  Default/act-ReLU/ReLU-op2 = relu(%1)\n"
      "      # In file /home/u/model.py:59~60, 8~20/        y = self.act(x)/\n";
  auto traces = ParseIrSourceTraces(ir, {"Default/act-ReLU/ReLU-op2"});
  ASSERT_EQ(traces.size(), 2u);
  const auto& conv = traces.at("Default/conv-Conv2d/Conv2D-op1");
  ASSERT_EQ(conv.size(), 2u);
  EXPECT_EQ(conv[0].file, "/home/u/model.py");
  EXPECT_EQ(conv[0].line, 58);
  EXPECT_EQ(conv[0].code, "x = self.conv(x)");
  EXPECT_EQ(conv[1].file, "/usr/lib/torch/module.py");
  EXPECT_EQ(conv[1].line, 1190);
  const auto& relu = traces.at("Default/act-ReLU/ReLU-op2");
  ASSERT_EQ(relu.size(), 1u);
  EXPECT_EQ(relu[0].line, 59);
  EXPECT_EQ(relu[0].code, "y = self.act(x)");
}

// Found by fuzz_ir: a line number beyond int threw std::out_of_range out of the parser, which
// ended ls, trace and compare on any dump holding such an .ir. It is not a location now.
TEST(IrTraceTest, LineNumbersBeyondIntAreNotLocations) {
  const std::string ir =
      "      # Fullname with scope: (Default/Conv2D-op1)\n"
      "      # In file /home/u/model.py(99999999999999999999)/        x = 1/\n"
      "      # In file /home/u/model.py:2147483648/ x = 2/\n"
      "      # In file /home/u/model.py(2147483647)/ x = 3/\n";
  auto traces = ParseIrSourceTraces(ir, {});
  ASSERT_EQ(traces.size(), 1u);
  const auto& conv = traces.at("Default/Conv2D-op1");
  ASSERT_EQ(conv.size(), 1u);
  EXPECT_EQ(conv[0].line, 2147483647);
  EXPECT_EQ(conv[0].code, "x = 3");
}

TEST(StatisticCsvTest, ParsesRowsWithQuotedShapesAndTrailingCommas) {
  testing::TempDir dir;
  testing::WriteFile(dir.Sub("statistic.csv"),
                     "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,"
                     "Shape,Max Value,Min Value,L2Norm Value\n"
                     "Conv2D,Default_Conv2D-op1,0,0,17,input,0,24,float32,\"(2,3)\",1.5,-2,nan,\n"
                     "Conv2D,Default_Conv2D-op1,0,0,17,output,0,4,float32,\"()\",1e+06,0,1,\n");
  auto rows = ParseStatisticCsv(dir.Sub("statistic.csv"));
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_TRUE((*rows)[0].is_input);
  EXPECT_EQ((*rows)[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ((*rows)[0].data_size, 24u);
  EXPECT_EQ((*rows)[0].values.at("Max Value"), "1.5");
  EXPECT_EQ((*rows)[0].values.at("L2Norm Value"), "nan");
  EXPECT_TRUE((*rows)[1].shape.empty());
  // The rows share one string of cells: each row reads its own, and Set copies only its row.
  EXPECT_EQ((*rows)[1].values.at("Max Value"), "1e+06");
  EXPECT_EQ((*rows)[1].values.at("L2Norm Value"), "1");
  StatisticValues changed = (*rows)[1].values;
  changed["Max Value"] = "7";
  changed["NaN Count"] = "0";
  EXPECT_EQ(changed.at("Max Value"), "7");
  EXPECT_EQ(changed.at("NaN Count"), "0");
  EXPECT_EQ(changed.size(), 4u);
  EXPECT_EQ((*rows)[1].values.at("Max Value"), "1e+06");
  EXPECT_FALSE((*rows)[1].values.Find("NaN Count"));
  // A header alone, without its newline, is a file of no rows.
  auto header_only = ParseStatisticCsvText("Op Type,Op Name,IO,Slot", "h.csv");
  ASSERT_TRUE(header_only.ok()) << header_only.status().message();
  EXPECT_TRUE(header_only->empty());

  testing::WriteFile(dir.Sub("bad.csv"), "Op Type,Op Name,IO,Slot\nAdd,x,output,zero,\n");
  auto bad = ParseStatisticCsv(dir.Sub("bad.csv"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(bad.status().message(),
            dir.Sub("bad.csv") + ":2: Slot is 'zero' (expected an integer)");
  testing::WriteFile(dir.Sub("short.csv"), "Op Type,Op Name,IO,Slot\nAdd,x,output\n");
  auto short_row = ParseStatisticCsv(dir.Sub("short.csv"));
  ASSERT_FALSE(short_row.ok());
  EXPECT_NE(short_row.status().message().find(":2: malformed statistic.csv row: 3 fields, the "
                                              "header has 4"),
            std::string::npos);
}

TEST(StatisticCsvTest, ColumnsAreLimitedAndTitlesGivenTwiceKeepTheirLastCell) {
  // 1,024 columns, the limit: two statistic titles given 510 times each; each keeps its last
  // cell (the scan for later equal titles is linear: a quadratic one took 80 s on a hostile
  // header of 200,000 columns).
  std::string header = "Op Type,Op Name,IO,Slot", row = "Add,x,output,0";
  for (int i = 4; i < 1024; ++i) {
    header += i % 2 ? ",Max Value" : ",Min Value";
    row += "," + std::to_string(i);
  }
  auto rows = ParseStatisticCsvText(header + "\n" + row + "\n", "wide.csv");
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].values.size(), 2u);
  EXPECT_EQ((*rows)[0].values.at("Max Value"), "1023");
  EXPECT_EQ((*rows)[0].values.at("Min Value"), "1022");
  // One more is refused by name, before any row is read; so is a header of 200,000.
  auto wider = ParseStatisticCsvText(header + ",NaN Count\n" + row + ",0\n", "wider.csv");
  ASSERT_FALSE(wider.ok());
  EXPECT_EQ(wider.status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(wider.status().message(),
            "wider.csv:1: statistic.csv header has 1025 columns; at most 1024 are read "
            "(docs/file-format.md)");
  std::string hostile = "Op Type,Op Name,IO,Slot";
  for (int i = 0; i < 200000; ++i) hostile += ",Value " + std::to_string(i);
  auto refused = ParseStatisticCsvText(hostile + "\n", "hostile.csv");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "hostile.csv:1: statistic.csv header has 200004 columns; at most 1024 are read "
            "(docs/file-format.md)");
}

TEST(StatisticCsvTest, ShapesOfAnyRankAndTheirElementCountLimit) {
  const std::string header = "Op Type,Op Name,IO,Slot,Shape\n";
  auto shape_of = [&](const std::string& shape) {
    return ParseStatisticCsvText(header + "Add,x,output,0,\"" + shape + "\"\n", "s.csv");
  };
  // Up to five dimensions are held in place, more on the heap: both read back whole.
  for (const std::vector<int64_t>& dims :
       {std::vector<int64_t>{7}, std::vector<int64_t>{1, 2, 3, 4, 5},
        std::vector<int64_t>{1, 2, 3, 4, 5, 6}, std::vector<int64_t>{2, 1, 2, 1, 2, 1, 2, 1, 2}}) {
    std::string text = "(";
    for (size_t i = 0; i < dims.size(); ++i) text += (i ? "," : "") + std::to_string(dims[i]);
    auto rows = shape_of(text + ")");
    ASSERT_TRUE(rows.ok()) << text << ": " << rows.status().message();
    EXPECT_EQ((*rows)[0].shape.ToVector(), dims) << text;
    // Copies and moves keep the dimensions.
    RowShape copy = (*rows)[0].shape;
    RowShape moved = std::move(copy);
    copy = moved;
    EXPECT_EQ(moved.ToVector(), dims) << text;
    EXPECT_EQ(copy.ToVector(), dims) << text;
    EXPECT_TRUE(copy == moved);
  }
  auto spaced = shape_of("( 2 , 3 )");
  ASSERT_TRUE(spaced.ok()) << spaced.status().message();
  EXPECT_EQ((*spaced)[0].shape.ToVector(), (std::vector<int64_t>{2, 3}));
  // 2^32 x 2^32 elements do not fit int64_t; with a 0 dimension the tensor holds nothing.
  auto wide = shape_of("(4294967296,4294967296)");
  ASSERT_FALSE(wide.ok());
  EXPECT_EQ(wide.status().message(),
            "s.csv:2: Shape is '(4294967296,4294967296)' (expected \"(d0,d1,...)\" of "
            "non-negative integers whose product fits int64)");
  auto empty = shape_of("(0,4294967296,4294967296)");
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_EQ((*empty)[0].shape.size(), 3u);
  EXPECT_FALSE(shape_of("(2,-3)").ok());
  EXPECT_FALSE(shape_of("(2,3").ok());
  // A Slot beyond uint64_t is no integer.
  auto slot =
      ParseStatisticCsvText(header + "Add,x,output,18446744073709551616,\"()\"\n", "s.csv");
  ASSERT_FALSE(slot.ok());
  EXPECT_EQ(slot.status().message(),
            "s.csv:2: Slot is '18446744073709551616' (expected an integer)");
}

TEST(StatisticCsvTest, QuotesAnywhereInAFieldAreRemovedAndProtectCommas) {
  // A field quoted whole, one with quotes inside it (`Op"x,y"` is one field `Opx,y`), a doubled
  // quote (read as two quote characters: nothing left), and a quoted last field.
  auto rows = ParseStatisticCsvText(
      "Op Type,Op Name,IO,Slot,Shape,Note\n"
      "Add,\"a,b\",output,0,\"(4,5)\",\"last, with comma\"\n"
      "Mul,Op\"x,y\"z,input,1,\"(2)\",\"\"\n"
      "Sub,\"q\"\"r\",output,2,(),plain\n",
      "q.csv");
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].op_name, "a,b");
  EXPECT_EQ((*rows)[0].shape, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ((*rows)[0].values.at("Note"), "last, with comma");
  EXPECT_EQ((*rows)[1].op_name, "Opx,yz");
  EXPECT_TRUE((*rows)[1].is_input);
  EXPECT_EQ((*rows)[1].slot, 1u);
  EXPECT_EQ((*rows)[1].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ((*rows)[1].values.at("Note"), "");
  EXPECT_EQ((*rows)[2].op_name, "qr");
  EXPECT_EQ((*rows)[2].slot, 2u);
  EXPECT_EQ((*rows)[2].values.at("Note"), "plain");
}

// Fields end at their comma whatever their length: names of every length from 0 to 40 (with
// bytes above 0x7f, as UTF-8 names have), and quoted parts at every offset of a long field.
TEST(StatisticCsvTest, FieldsOfEveryLengthEndAtTheirComma) {
  std::string text = "Op Type,Op Name,IO,Slot,Note\n";
  std::vector<std::string> names, notes;
  for (size_t length = 0; length <= 40; ++length) {
    std::string name;
    for (size_t i = 0; i < length; ++i) {
      name += i % 7 == 3 ? '\xc3' : static_cast<char>('a' + i % 26);
    }
    names.push_back(name);
    const std::string prefix(length % 20, 'p');
    notes.push_back(prefix + "q,r" + name);
    text += "Add," + name + ",output," + std::to_string(length) + "," + prefix + "\"q,r\"" + name +
            "\n";
  }
  auto rows = ParseStatisticCsvText(text, "lengths.csv");
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ((*rows)[i].op_type, "Add");
    EXPECT_EQ((*rows)[i].op_name, names[i]) << "length " << i;
    EXPECT_EQ((*rows)[i].slot, i);
    EXPECT_EQ((*rows)[i].values.at("Note"), notes[i]) << "length " << i;
  }
}

TEST(IndexDumpTest, MissingAndNonDumpDirectories) {
  testing::TempDir dir;
  auto missing = IndexDump(dir.Sub("nope"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto empty = IndexDump(dir.path());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("not a dump directory"), std::string::npos);
  std::filesystem::create_directories(dir.Sub("rank_0/Net/0/0"));
  auto bare = IndexDump(dir.path());
  ASSERT_TRUE(bare.ok()) << bare.status().message();
  EXPECT_EQ(bare->ranks.size(), 1u);
  EXPECT_EQ(bare->ranks[0].graphs[0].iterations.size(), 1u);
}

TEST(WatchChecksTest, ParsesThresholdsAndRejectsUnknown) {
  auto checks = ParseWatchChecks("nan, large:5,grad-vanish,weight-change:0.25");
  ASSERT_TRUE(checks.ok()) << checks.status().message();
  ASSERT_EQ(checks->size(), 4u);
  EXPECT_EQ((*checks)[1].kind, WatchKind::kLarge);
  EXPECT_EQ((*checks)[1].threshold, 5);
  EXPECT_EQ((*checks)[2].threshold, 1e-7);
  EXPECT_EQ((*checks)[2].text, "grad-vanish:1e-07");
  EXPECT_EQ((*checks)[3].threshold, 0.25);
  for (const char* bad : {"nan,", "bogus", "large:x", "nan:1", "large:-1", ""}) {
    auto r = ParseWatchChecks(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(TraceTest, ParseFileLine) {
  std::string file;
  int line = 0;
  ASSERT_TRUE(ParseFileLine("dir/model.py:58", &file, &line).ok());
  EXPECT_EQ(file, "dir/model.py");
  EXPECT_EQ(line, 58);
  EXPECT_FALSE(ParseFileLine("model.py", &file, &line).ok());
  EXPECT_FALSE(ParseFileLine("model.py:x", &file, &line).ok());
  EXPECT_FALSE(ParseFileLine(":3", &file, &line).ok());
}

// trace lists a line's kernels in the execution order, then the traced kernels the order does
// not list (in name order).
TEST(TraceTest, KernelsInExecutionOrderThenTracedKernelsTheOrderLacks) {
  DumpIndex index;
  GraphEntry& g = index.ranks.emplace_back().graphs.emplace_back();
  g.execution_order = {"Default/Mul-op2", "Default/Add-op1", "Default/Sub-op3"};
  std::string ir;
  for (const char* name : {"Default/Add-op1", "Default/Div-op4", "Default/Mul-op2",
                           "Default/Abs-op0", "Default/Sub-op3"}) {
    ir += std::string("  %1(x) = Op(%0)\n      # Fullname with scope: (") + name +
          ")\n      # In file /home/u/model.py(7)/        x = f(x)/\n";
  }
  g.SetIrText(ir);
  // Each match lists its kernel's files, iteration by iteration.
  for (int64_t i : {3, 4}) {
    IterationEntry& it = g.iterations.emplace_back();
    it.iteration = i;
    for (const char* name : {"Default/Abs-op0", "Default/Mul-op2"}) {
      KernelEntry& k = it.kernels.emplace_back();
      k.full_name = name;
      for (uint32_t slot : {0u, 1u}) {
        TensorEntry& t = k.tensors.emplace_back();
        t.slot = slot;
        t.path = std::string(name).substr(8) + "." + std::to_string(i) + "." + std::to_string(slot);
      }
    }
  }
  std::vector<std::string> names;
  std::map<std::string, std::vector<std::string>> files;
  for (const TraceMatch& m : TraceLine(index, "model.py", 7)) {
    names.push_back(m.full_name);
    for (const TraceFile& f : m.files) files[m.full_name].push_back(f.path);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"Default/Mul-op2", "Default/Add-op1",
                                             "Default/Sub-op3", "Default/Abs-op0",
                                             "Default/Div-op4"}));
  EXPECT_EQ(files["Default/Mul-op2"], (std::vector<std::string>{"Mul-op2.3.0", "Mul-op2.3.1",
                                                                "Mul-op2.4.0", "Mul-op2.4.1"}));
  EXPECT_EQ(files["Default/Abs-op0"].size(), 4u);
  EXPECT_TRUE(files["Default/Add-op1"].empty());
  EXPECT_TRUE(TraceLine(index, "model.py", 8).empty());
}

}  // namespace
}  // namespace graphdump::analysis
