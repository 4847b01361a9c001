#include "graphdump/analysis/ascend_index.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "graphdump/analysis/ascend_convert.h"
#include "graphdump/analysis/dump_index.h"
#include "graphdump/analysis/watch.h"
#include "graphdump/internal/ascend_writer.h"
#include "testing/testing.h"

namespace graphdump {
namespace {

TEST(AscendIndex, ParsesNames) {
  AscendIndexEntry e;
  ASSERT_TRUE(ParseConvertedNpyName("Conv2D.Default_a_Conv2D-op1.2.7.1700.output.1.2x3x4.npy", &e));
  EXPECT_EQ(e.op_type, "Conv2D");
  EXPECT_EQ(e.op_name, "Default_a_Conv2D-op1");
  EXPECT_EQ(e.task_id, 2u);
  EXPECT_EQ(e.stream_id, 7u);
  EXPECT_EQ(e.timestamp, 1700u);
  EXPECT_FALSE(e.is_input);
  EXPECT_EQ(e.slot, 1u);
  EXPECT_EQ(e.shape, (std::vector<int64_t>{2, 3, 4}));
  ASSERT_TRUE(ParseConvertedNpyName("Add.x.0.0.5.input.3.npy", &e));
  EXPECT_TRUE(e.is_input);
  EXPECT_EQ(e.slot, 3u);
  EXPECT_TRUE(e.shape.empty());
  ASSERT_TRUE(ParseConvertedNpyName("Add.x.0.0.5.output.0..npy", &e));  // a scalar
  EXPECT_FALSE(ParseConvertedNpyName("Add.x.0.0.5.output.0.DefaultFormat.float32.npy", &e));
  EXPECT_FALSE(ParseConvertedNpyName("notes.npy", &e));
}

TEST(AscendIndex, IndexesGeLayoutAndConvertedDirectories) {
  testing::TempDir dir;
  auto fs = NewPosixFileSystem();
  const std::string step = dir.Sub("ge/20261122010203/3/net/1/5");
  ASSERT_TRUE(fs->CreateDirectories(step).ok());
  std::vector<float> x(2 * 3 * 2 * 2, 1.5f);
  TensorView in;
  in.shape = {2, 3, 2, 2};
  in.data = x.data();
  TensorView out = in;
  out.shape = {24};
  const std::string long_op(230, 'k');
  for (const std::string& op : {std::string("Default_Conv2D-op1"), long_op}) {
    StatusOr<uint64_t> st =
        WriteAscendDumpFile(*fs, step + "/Conv2D." + op + ".0.0.1700", op, 1700, {in}, {out});
    ASSERT_TRUE(st.ok()) << st.status().message();
  }
  testing::WriteFile(step + "/Bad.bad.0.0.1", "junk");

  StatusOr<AscendIndex> ge = IndexAscendDump(dir.Sub("ge"));
  ASSERT_TRUE(ge.ok()) << ge.status().message();
  ASSERT_EQ(ge->entries.size(), 4u);
  ASSERT_EQ(ge->problems.size(), 1u);
  EXPECT_NE(ge->problems[0].find("Bad.bad.0.0.1"), std::string::npos);
  const AscendIndexEntry& first = ge->entries[0];
  EXPECT_TRUE(first.in_dump_file);
  EXPECT_TRUE(first.ge_layout);
  EXPECT_EQ(first.session, "20261122010203");
  EXPECT_EQ(first.device_id, 3u);
  EXPECT_EQ(first.model_name, "net");
  EXPECT_EQ(first.model_id, 1u);
  EXPECT_EQ(first.data_index, 5u);
  EXPECT_EQ(first.op_name, "Default_Conv2D-op1");
  EXPECT_TRUE(first.is_input);
  EXPECT_EQ(first.shape, in.shape);
  EXPECT_FALSE(ge->entries[1].is_input);

  // convert keeps the GE directories; long converted names come back through mapping.csv.
  StatusOr<std::vector<AscendConvertJob>> jobs = CollectAscendDumpFiles({dir.Sub("ge")});
  ASSERT_TRUE(jobs.ok());
  AscendConvertOptions options;
  options.output_dir = dir.Sub("npy");
  options.target_format = "NCHW";
  AscendConvertSummary summary = ConvertAscendDumps(*jobs, options);
  EXPECT_EQ(summary.errors.size(), 1u);  // Bad.bad.0.0.1
  StatusOr<AscendIndex> converted = IndexAscendDump(dir.Sub("npy"));
  ASSERT_TRUE(converted.ok());
  ASSERT_EQ(converted->entries.size(), 4u);
  int long_names = 0;
  for (const AscendIndexEntry& e : converted->entries) {
    EXPECT_FALSE(e.in_dump_file);
    EXPECT_TRUE(e.ge_layout);
    EXPECT_EQ(e.data_index, 5u);
    EXPECT_EQ(e.shape, e.is_input ? in.shape : out.shape);
    long_names += e.op_name == long_op;
  }
  EXPECT_EQ(long_names, 2);
  EXPECT_TRUE(std::filesystem::exists(dir.Sub("npy/20261122010203/3/net/1/5/mapping.csv")));
}

// watch took quadratic time over the tensors of one dump file (2,000: 0.8 s; 20,000: > 20 s):
// every tensor parsed the file's whole header again. The index now records where each tensor
// is, and reading one reads only its bytes: with the header destroyed after indexing, every
// tensor still reads (a second parse would fail), with its own values.
TEST(AscendIndex, TensorsOfADumpFileReadWithoutParsingItsHeaderAgain) {
  testing::TempDir dir;
  auto fs = NewPosixFileSystem();
  const std::string step = dir.Sub("ge/20261122010203/0/net/0/0");
  ASSERT_TRUE(fs->CreateDirectories(step).ok());
  constexpr int kTensors = 2000;
  std::vector<std::vector<float>> values(kTensors);
  std::vector<TensorView> outputs(kTensors);
  for (int i = 0; i < kTensors; ++i) {
    values[i] = {float(i), i % 7 == 0 ? 0.0f / 0.0f : -float(i)};
    outputs[i].shape = {2};
    outputs[i].data = values[i].data();
  }
  const std::string file = step + "/Fused.Default_Fused-op1.0.0.1700";
  ASSERT_TRUE(WriteAscendDumpFile(*fs, file, "Default/Fused-op1", 1700, {}, outputs).ok());
  StatusOr<analysis::DumpIndex> index = analysis::IndexDump(dir.Sub("ge"));
  ASSERT_TRUE(index.ok()) << index.status().message();
  const std::vector<analysis::TensorEntry>& tensors =
      index->ranks.at(0).graphs.at(0).iterations.at(0).kernels.at(0).tensors;
  ASSERT_EQ(tensors.size(), static_cast<size_t>(kTensors));

  ::chmod(file.c_str(), 0600);
  {
    std::fstream clobber(file, std::ios::in | std::ios::out | std::ios::binary);
    clobber.write("\xff\xff\xff\xff\xff\xff\xff\x7f", 8);  // header length: absurd
  }
  EXPECT_FALSE(LoadAscendTensor(file, false, 0).ok());  // a parse of the header now fails
  for (int i = 0; i < kTensors; i += 97) {
    StatusOr<std::unique_ptr<analysis::MappedNpy>> npy = analysis::OpenTensor(tensors[i]);
    ASSERT_TRUE(npy.ok()) << i << ": " << npy.status().message();
    const float* data = reinterpret_cast<const float*>((*npy)->data());
    EXPECT_EQ(data[0], float(i));
    EXPECT_EQ(std::isnan(data[1]), i % 7 == 0);
  }
  auto checks = analysis::ParseWatchChecks("nan");
  ASSERT_TRUE(checks.ok());
  analysis::WatchResult watched = analysis::RunWatch(*index, *checks, {});
  EXPECT_EQ(watched.tensors_checked, kTensors);
  EXPECT_TRUE(watched.skipped.empty());
  EXPECT_EQ(watched.hits.size(), static_cast<size_t>((kTensors + 6) / 7));
}

}  // namespace
}  // namespace graphdump
