// A kernel called more than once in an iteration: one entry per call, statistics on the right
// file, nothing dropped.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "graphdump/analysis/dump_index.h"
#include "graphdump/analysis/watch.h"
#include "testing/testing.h"

namespace graphdump::analysis {
namespace {

TensorEntry File(bool is_input, uint32_t slot, uint64_t timestamp, const std::string& path) {
  TensorEntry t;
  t.is_input = is_input;
  t.slot = slot;
  t.timestamp = timestamp;
  t.path = path;
  return t;
}

StatisticRow Row(bool is_input, uint32_t slot, uint64_t timestamp, const std::string& nan_count) {
  StatisticRow row;
  row.is_input = is_input;
  row.slot = slot;
  row.timestamp = timestamp;
  row.dtype = "float32";
  row.values["NaN Count"] = nan_count;
  return row;
}

TEST(SplitCallsTest, RowsAttachToTheFileOfTheirTimestamp) {
  KernelEntry k;
  k.op_type = "Sqrt";
  k.op_name = "Default_Sqrt-op0";
  // Files listed out of order, inputs and outputs with their own timestamps.
  k.tensors = {File(false, 0, 300, "second_out"), File(true, 0, 100, "first_in"),
               File(false, 0, 101, "first_out"), File(true, 0, 299, "second_in")};
  // The second call's row first: rows follow the file they name, not their place.
  std::vector<KernelEntry> calls = SplitCalls(k, {Row(false, 0, 300, "0"), Row(false, 0, 101, "8"),
                                                  Row(true, 0, 100, "0"), Row(true, 0, 299, "0")});
  ASSERT_EQ(calls.size(), 2u);
  for (uint32_t c = 0; c < 2; ++c) {
    EXPECT_EQ(calls[c].call, c);
    EXPECT_EQ(calls[c].calls, 2u);
    EXPECT_EQ(calls[c].op_name, "Default_Sqrt-op0");
    ASSERT_EQ(calls[c].tensors.size(), 2u);
    EXPECT_TRUE(calls[c].tensors[0].is_input);
    ASSERT_TRUE(calls[c].tensors[1].stats.has_value());
  }
  EXPECT_EQ(calls[0].tensors[1].path, "first_out");
  EXPECT_EQ(calls[0].tensors[1].stats->values.at("NaN Count"), "8");
  EXPECT_EQ(calls[0].first_timestamp, 100u);
  EXPECT_EQ(calls[1].tensors[0].path, "second_in");
  EXPECT_EQ(calls[1].tensors[1].path, "second_out");
  EXPECT_EQ(calls[1].tensors[1].stats->values.at("NaN Count"), "0");
  EXPECT_EQ(calls[1].first_timestamp, 299u);
}

TEST(SplitCallsTest, StatisticOnlyRowsAreCallsAndUntimedRowsFollowTheFiles) {
  KernelEntry stats_only;
  std::vector<KernelEntry> calls =
      SplitCalls(stats_only, {Row(false, 0, 20, "0"), Row(false, 0, 10, "8")});
  ASSERT_EQ(calls.size(), 2u);
  ASSERT_EQ(calls[0].tensors.size(), 1u);
  EXPECT_TRUE(calls[0].tensors[0].path.empty());
  EXPECT_EQ(calls[0].tensors[0].timestamp, 10u);
  EXPECT_EQ(calls[0].tensors[0].stats->values.at("NaN Count"), "8");
  EXPECT_EQ(calls[1].tensors[0].stats->values.at("NaN Count"), "0");

  // Rows whose timestamp names no file (a writer's own clock) pair with the files in order;
  // one row more than files is a statistic-only call of its own.
  KernelEntry k;
  k.tensors = {File(false, 0, 7, "b"), File(false, 0, 5, "a")};
  calls = SplitCalls(k, {Row(false, 0, 1, "1"), Row(false, 0, 1, "2"), Row(false, 0, 0, "3")});
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].tensors[0].path, "a");
  EXPECT_EQ(calls[0].tensors[0].stats->values.at("NaN Count"), "1");
  EXPECT_EQ(calls[1].tensors[0].path, "b");
  EXPECT_EQ(calls[1].tensors[0].stats->values.at("NaN Count"), "2");
  EXPECT_TRUE(calls[2].tensors[0].path.empty());
  EXPECT_EQ(calls[2].tensors[0].stats->values.at("NaN Count"), "3");
}

// Files of one timestamp take its rows in file order, a row more of that timestamp pairs with a
// file left without one; and each of many calls (rows in reverse order) gets its own file's row.
TEST(SplitCallsTest, RowsOfOneTimestampTakeItsFilesInOrder) {
  KernelEntry k;
  k.tensors = {File(false, 0, 5, "a"), File(false, 0, 5, "b"), File(false, 0, 9, "c")};
  std::vector<KernelEntry> calls =
      SplitCalls(k, {Row(false, 0, 5, "1"), Row(false, 0, 5, "2"), Row(false, 0, 5, "3")});
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].tensors[0].path, "a");
  EXPECT_EQ(calls[0].tensors[0].stats->values.at("NaN Count"), "1");
  EXPECT_EQ(calls[1].tensors[0].path, "b");
  EXPECT_EQ(calls[1].tensors[0].stats->values.at("NaN Count"), "2");
  EXPECT_EQ(calls[2].tensors[0].path, "c");
  EXPECT_EQ(calls[2].tensors[0].stats->values.at("NaN Count"), "3");

  KernelEntry loop;
  std::vector<StatisticRow> rows;
  const uint64_t n = 5000;
  for (uint64_t i = 0; i < n; ++i) {
    loop.tensors.push_back(File(false, 0, 1000 + i, "f" + std::to_string(i)));
    rows.push_back(Row(false, 0, 1000 + (n - 1 - i), std::to_string(n - 1 - i)));
  }
  calls = SplitCalls(loop, std::move(rows));
  ASSERT_EQ(calls.size(), n);
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_EQ(calls[i].tensors.size(), 1u);
    EXPECT_EQ(calls[i].tensors[0].path, "f" + std::to_string(i));
    EXPECT_EQ(calls[i].tensors[0].stats->values.at("NaN Count"), std::to_string(i));
  }
}

// A graphdump statistic dump of a module called twice in the step, the first call making NaN:
// every row is indexed, as its own call, and watch finds the NaN.
TEST(SplitCallsTest, IndexAndWatchSeeEveryCall) {
  testing::TempDir dir;
  const std::string rank = dir.Sub("rank_0");
  std::filesystem::create_directories(rank + "/Net/0/0");
  std::filesystem::create_directories(rank + "/.dump_metadata");
  testing::WriteFile(rank + "/.dump_metadata/config.json", "{\"graphdump_version\": \"0.1.0\"}\n");
  testing::WriteFile(
      rank + "/Net/0/0/statistic.csv",
      "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,"
      "Min Value,NaN Count\n"
      "Sqrt,Default_Sqrt-op0,0,0,1700000000000010,output,0,32,float32,\"(8)\",nan,nan,8\n"
      "Relu,Default_Relu-op1,0,0,1700000000000011,output,0,32,float32,\"(8)\",0,0,0\n"
      "Sqrt,Default_Sqrt-op0,0,0,1700000000000020,output,0,32,float32,\"(8)\",2,1,0\n"
      "Relu,Default_Relu-op1,0,0,1700000000000021,output,0,32,float32,\"(8)\",2,1,0\n");
  auto index = IndexDump(dir.path());
  ASSERT_TRUE(index.ok()) << index.status().message();
  EXPECT_TRUE(index->warnings.empty()) << index->warnings[0];  // one run, two calls
  const IterationEntry& it = index->ranks[0].graphs[0].iterations[0];
  ASSERT_EQ(it.kernels.size(), 4u);
  std::vector<std::pair<std::string, uint32_t>> order;
  for (const KernelEntry& k : it.kernels) {
    order.push_back({k.op_name, k.call});
    EXPECT_EQ(k.calls, 2u);
  }
  // No execution order: by call, then by time.
  EXPECT_EQ(order, (std::vector<std::pair<std::string, uint32_t>>{{"Default_Sqrt-op0", 0},
                                                                  {"Default_Relu-op1", 0},
                                                                  {"Default_Sqrt-op0", 1},
                                                                  {"Default_Relu-op1", 1}}));
  auto checks = ParseWatchChecks("nan,inf");
  ASSERT_TRUE(checks.ok());
  WatchOptions options;
  options.progress = false;
  const WatchResult result = RunWatch(*index, *checks, options);
  EXPECT_EQ(result.tensors_checked, 4);
  ASSERT_EQ(result.hits.size(), 1u);
  EXPECT_EQ(result.hits[0].kernel, "Default_Sqrt-op0");
  EXPECT_EQ(result.hits[0].call, 0u);
  EXPECT_EQ(result.hits[0].detail, "8 NaN of 8 elements");
}

// The index finds each statistic.csv row's kernel in the execution order: rows in that order
// (the common case, read without hashing names) and the same rows shuffled give the same
// kernels, full names, positions and calls, including a name the order lists twice, a kernel it
// lacks, a second call and a second operator under one name.
TEST(SplitCallsTest, RowsInAnyOrderFindTheirExecutionOrderPosition) {
  const std::vector<std::string> rows = {
      "Parameter,Parameter_w,0,0,1700000000000009,output,0,32,float32,\"(8)\",1,0\n",
      "Sqrt,Default_Sqrt-op0,0,0,1700000000000010,output,0,32,float32,\"(8)\",1,0\n",
      "Relu,Default_Relu-op1,0,0,1700000000000011,output,0,32,float32,\"(8)\",1,0\n",
      "Add,Default_Add-op3,0,0,1700000000000012,output,0,32,float32,\"(8)\",1,0\n",
      "Cast,Default_Cast-op9,0,0,1700000000000013,output,0,32,float32,\"(8)\",1,0\n",
      "Mul,Default_Mul-op4,0,0,1700000000000014,output,0,32,float32,\"(8)\",1,0\n",
      "Sqrt,Default_Sqrt-op0,0,0,1700000000000015,output,0,32,float32,\"(8)\",1,0\n",
      "Gelu,Default_Relu-op1,0,0,1700000000000016,output,0,32,float32,\"(8)\",1,0\n",
  };
  struct Seen {
    std::string op_type, op_name, full_name;
    int64_t order;
    uint32_t call, calls;
    bool operator==(const Seen&) const = default;
  };
  auto index_rows = [&](const std::vector<size_t>& order) {
    testing::TempDir dir;
    const std::string rank = dir.Sub("rank_0");
    std::filesystem::create_directories(rank + "/Net/0/0");
    std::filesystem::create_directories(rank + "/execution_order");
    std::filesystem::create_directories(rank + "/.dump_metadata");
    testing::WriteFile(rank + "/.dump_metadata/config.json",
                       "{\"graphdump_version\": \"0.1.0\"}\n");
    testing::WriteFile(rank + "/execution_order/ms_execution_order_graph_0.csv",
                       "NodeExecutionOrder-FullNameWithScope\nDefault/Sqrt-op0\nDefault/Relu-op1\n"
                       "Default/Sqrt-op0\nDefault/Add-op3\nDefault/Mul-op4\n");
    std::string csv =
        "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,"
        "Min Value\n";
    for (size_t i : order) csv += rows[i];
    testing::WriteFile(rank + "/Net/0/0/statistic.csv", csv);
    auto index = IndexDump(dir.path());
    EXPECT_TRUE(index.ok()) << index.status().message();
    std::vector<Seen> seen;
    if (!index.ok()) return seen;
    EXPECT_TRUE(index->skipped.empty());
    for (const KernelEntry& k : index->ranks[0].graphs[0].iterations[0].kernels) {
      seen.push_back({k.op_type, k.op_name, k.full_name, k.order, k.call, k.calls});
    }
    return seen;
  };
  const std::vector<Seen> expected = {
      {"Parameter", "Parameter_w", "Parameter_w", -1, 0, 1},
      {"Sqrt", "Default_Sqrt-op0", "Default/Sqrt-op0", 0, 0, 2},
      {"Relu", "Default_Relu-op1", "Default/Relu-op1", 1, 0, 1},
      {"Gelu", "Default_Relu-op1", "Default/Relu-op1", 1, 0, 1},
      {"Add", "Default_Add-op3", "Default/Add-op3", 3, 0, 1},
      {"Mul", "Default_Mul-op4", "Default/Mul-op4", 4, 0, 1},
      {"Cast", "Default_Cast-op9", "Default_Cast-op9", -1, 0, 1},
      {"Sqrt", "Default_Sqrt-op0", "Default/Sqrt-op0", 0, 1, 2},
  };
  auto describe = [](const std::vector<Seen>& v) {
    std::string text;
    for (const Seen& s : v) {
      text += s.op_type + " " + s.op_name + " " + s.full_name + " " + std::to_string(s.order) +
              " " + std::to_string(s.call) + "/" + std::to_string(s.calls) + "\n";
    }
    return text;
  };
  for (const std::vector<size_t>& order :
       {std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7}, std::vector<size_t>{5, 3, 7, 1, 4, 0, 6, 2},
        std::vector<size_t>{7, 6, 5, 4, 3, 2, 1, 0}}) {
    EXPECT_EQ(describe(index_rows(order)), describe(expected));
  }
}

}  // namespace
}  // namespace graphdump::analysis
