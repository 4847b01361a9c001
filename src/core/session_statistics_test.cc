// The session's statistic rows: statistic-only dumps, statistics found again by origin, read
// on the session's worker thread, kept across steps.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "graphdump/session.h"
#include "session_test_util.h"

namespace graphdump {
namespace {

using testing::ListFilesRecursive;
using testing::ReadFile;
using testing::TempDir;

// The rows of a statistic.csv of 65536-float tensors with max and min, as
// "OP_TYPE IO MAX/MIN", in file order.
std::vector<std::string> MaxMinRows(const std::string& csv) {
  std::vector<std::string> rows;
  std::regex row(R"re(\n(\w+),[^,]+,0,0,\d+,(\w+),0,262144,float32,"\(65536\)",([^,]+),([^,]+),)re");
  for (auto m = std::sregex_iterator(csv.begin(), csv.end(), row); m != std::sregex_iterator();
       ++m) {
    rows.push_back((*m)[1].str() + " " + (*m)[2].str() + " " + (*m)[3].str() + "/" +
                   (*m)[4].str());
  }
  return rows;
}

// A statistic dump (max and min) whose statistics are read on the session's worker
// (reads_in_background), which sleeps `worker_delay_us` before each batch so that it lags
// behind the host; `host_take_delay_us`: SessionOptions' own.
std::unique_ptr<DumpSession> StatisticsInBackground(const TempDir& dir, uint32_t worker_delay_us,
                                                    uint32_t host_take_delay_us = 0) {
  SessionOptions options;
  options.config = Parse(ConfigJson(dir.path(), R"(, "saved_data": "statistic",
      "statistic_category": ["max", "min"])"));
  options.reads_in_background = true;
  options.deferred_read_delay_us = worker_delay_us;
  options.host_take_delay_us = host_take_delay_us;
  return std::move(DumpSession::Open(std::move(options))).value();
}

// Writes `value` into `t` in place as the host does (BeforeWrite first); returns the view a
// kernel reading the new bytes gets.
TensorView WriteInPlace(DumpSession& session, const HostTensor& t, float value) {
  session.BeforeWrite(t.data.get());
  std::fill(t.data->begin(), t.data->end(), value);
  TensorView written = t.View();
  written.origin.version = 1;
  return written;
}

// Statistics read on the session's worker (reads_in_background), which a delay keeps behind
// the host: BeforeWrite returns once the queued tensor is read, a row reusing queued statistics
// gets them once they are filled, and the rows keep the kernels' order.
TEST(SessionTest, StatisticsReadInBackgroundWaitForWritesAndKeepTheirOrder) {
  TempDir dir;
  auto session = StatisticsInBackground(dir, 20000);
  GraphInfo graph = NamedKernels({"Default/a-op0", "Default/b-op1", "Default/c-op2"});
  ASSERT_TRUE(session->OnGraphCompiled(graph).ok());
  HostTensor t{std::make_shared<std::vector<float>>(size_t{1} << 16, 1.5f)};
  session->BeginStep(0);
  session->OnKernelDone(graph.kernels[0], {}, {t.View()});
  session->OnKernelDone(graph.kernels[1], {WriteInPlace(*session, t, -7.0f)}, {});
  // The first bytes again (same origin and version): their queued statistics are reused.
  session->OnKernelDone(graph.kernels[2], {t.View()}, {});
  session->EndStep(0);
  ASSERT_TRUE(session->Close().ok());
  const std::string csv = ReadFile(dir.Sub("rank_0/Net/0/0/statistic.csv"));
  const std::vector<std::string> rows = MaxMinRows(csv);
  EXPECT_EQ(rows, (std::vector<std::string>{"a output 1.5/1.5", "b input -7/-7",
                                            "c input 1.5/1.5"}))
      << csv;
}

// A write of a tensor whose reduction is still queued does not wait for the worker to get there
// through the batches before it: the host's thread reduces that tensor itself, from its bytes
// before the write, and the worker skips its row.
TEST(SessionTest, AWriteReducesItsQueuedTensorOnTheHostWithoutWaitingForEarlierBatches) {
  TempDir dir;
  auto session = StatisticsInBackground(dir, 300000);
  GraphInfo graph = NamedKernels({"Default/a-op0", "Default/b-op1", "Default/c-op2"});
  ASSERT_TRUE(session->OnGraphCompiled(graph).ok());
  // 256 KiB each: a batch of its own.
  HostTensor t{std::make_shared<std::vector<float>>(size_t{1} << 16, 1.5f)};
  HostTensor u{std::make_shared<std::vector<float>>(size_t{1} << 16, 2.5f)};
  session->BeginStep(0);
  session->OnKernelDone(graph.kernels[0], {}, {t.View()});
  session->OnKernelDone(graph.kernels[1], {}, {u.View()});
  const TensorView written = WriteInPlace(*session, u, -7.0f);
  // The worker still sleeps before t's batch: u was reduced here.
  EXPECT_TRUE(session->ReadsQueued());
  session->OnKernelDone(graph.kernels[2], {written}, {});
  session->EndStep(0);
  ASSERT_TRUE(session->Close().ok());
  const std::string csv = ReadFile(dir.Sub("rank_0/Net/0/0/statistic.csv"));
  const std::vector<std::string> rows = MaxMinRows(csv);
  EXPECT_EQ(rows, (std::vector<std::string>{"a output 1.5/1.5", "b output 2.5/2.5",
                                            "c input -7/-7"}))
      << csv;
}

// A write in the next step of a tensor whose reduction is still queued with the ended step's
// rows: the host's thread takes that row and is still adding it when the worker reaches its
// batch; the worker waits for it before it writes the step's files (and frees the step's rows),
// so the row is in them. (Before it waited, it wrote them without the row, then the host added
// the row to memory the worker had freed: a crash 3 times in ~18 long trainings.)
TEST(SessionTest, AWriteTakingALastStepsRowFinishesItBeforeThatStepsFilesAreWritten) {
  TempDir dir;
  // The host takes the row while the worker sleeps (200 ms); the worker reaches the row while
  // the host sleeps (600 ms).
  auto session = StatisticsInBackground(dir, 200000, 600000);
  GraphInfo graph = NamedKernels({"Default/a-op0", "Default/b-op1"});
  ASSERT_TRUE(session->OnGraphCompiled(graph).ok());
  HostTensor t{std::make_shared<std::vector<float>>(size_t{1} << 16, 1.5f)};
  session->BeginStep(0);
  session->OnKernelDone(graph.kernels[0], {}, {t.View()});
  session->EndStep(0);
  session->BeginStep(0);
  session->OnKernelDone(graph.kernels[1], {WriteInPlace(*session, t, -7.0f)}, {});
  session->EndStep(0);
  ASSERT_TRUE(session->Close().ok());
  const std::string first = ReadFile(dir.Sub("rank_0/Net/0/0/statistic.csv"));
  EXPECT_EQ(MaxMinRows(first), (std::vector<std::string>{"a output 1.5/1.5"})) << first;
  const std::string second = ReadFile(dir.Sub("rank_0/Net/0/1/statistic.csv"));
  EXPECT_EQ(MaxMinRows(second), (std::vector<std::string>{"b input -7/-7"})) << second;
}

// With reads on the worker, the mapping.csv of a step's long names is written with its
// statistic.csv: numbered in the kernels' order, in the step's own directory, none before it.
TEST(SessionTest, StatisticMappingOfLongNamesIsWrittenWithTheStepsRows) {
  TempDir dir;
  SessionOptions options;
  options.config = Parse(ConfigJson(dir.path(), R"(, "saved_data": "statistic")"));
  options.reads_in_background = true;
  auto session = std::move(DumpSession::Open(std::move(options))).value();
  const std::string a = "Default/" + std::string(300, 'a') + "/MatMul-op0";
  const std::string b = "Default/" + std::string(300, 'b') + "/Add-op1";
  GraphInfo graph = NamedKernels({a, b, "Default/c-op2"});
  ASSERT_TRUE(session->OnGraphCompiled(graph).ok());
  HostTensor t{std::make_shared<std::vector<float>>(size_t{8}, 2.0f)};
  for (int step = 0; step < 2; ++step) {
    session->BeginStep(0);
    for (const KernelInfo& k : graph.kernels) session->OnKernelDone(k, {}, {t.View()});
    session->EndStep(0);
  }
  ASSERT_TRUE(session->Close().ok());
  for (const char* it : {"0", "1"}) {
    const std::string step_dir = dir.Sub(std::string("rank_0/Net/0/") + it);
    EXPECT_TRUE(std::regex_match(
        ReadFile(step_dir + "/mapping.csv"),
        std::regex(R"(0\.npy,MatMul\.Default_a{300}_MatMul-op0\.0\.0\.\d{16}\.output\.0\.DefaultFormat\.float32\.npy\n)"
                   R"(1\.npy,Add\.Default_b{300}_Add-op1\.0\.0\.\d{16}\.output\.0\.DefaultFormat\.float32\.npy\n)")))
        << it;
    const std::string csv = ReadFile(step_dir + "/statistic.csv");
    EXPECT_NE(csv.find("\nMatMul,Default_" + std::string(300, 'a') + "_MatMul-op0,0,0,"),
              std::string::npos)
        << csv;
    EXPECT_NE(csv.find("\nc,Default_c-op2,0,0,"), std::string::npos) << csv;
  }
}

TEST(SessionTest, StatisticOnlyWritesCsvRowsWithoutTensors) {
  TempDir dir;
  RunSynthetic(Parse(ConfigJson(dir.path(), R"(, "iteration": "0", "saved_data": "statistic",
      "statistic_category": ["max", "count", "md5"])")));
  const std::string it = dir.Sub("rank_0/Net/0/0");
  auto files = ListFilesRecursive(it);
  EXPECT_EQ(files, std::vector<std::string>{"statistic.csv"});
  const std::string csv = ReadFile(it + "/statistic.csv");
  EXPECT_EQ(csv.rfind("Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,"
                      "Shape,Max Value,Count,MD5\n",
                      0),
            0u);
  // 4 parameters + 9 kernels' 16 inputs and 9 outputs.
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 4 + 16 + 9);
  EXPECT_TRUE(std::regex_search(
      csv,
      std::regex(
          R"re(\nCast,Default_Cast-op5,0,0,\d{16},output,0,32,float16,"\(4,4\)",[^,]+,16,[0-9a-f]{32},\n)re")))
      << csv;
}

// Statistic-only rows for bytes already reduced in the step come from the first reduction:
// shown here by handing the second kernel different bytes under the same origin, which a host
// must never do (it would bump the version), so the row can only come from the cache.
TEST(SessionTest, StatisticsOfTheSameOriginAreReusedWithinAStep) {
  TempDir dir;
  auto session = OpenSession(Parse(ConfigJson(dir.path(), R"(, "saved_data": "statistic",
      "input_output": 0, "statistic_category": ["max", "min"])")));
  GraphInfo graph = SyntheticGraph({});
  ASSERT_TRUE(session->OnGraphCompiled(graph).ok());
  std::vector<float> first = {1, 2, 3, 4}, second = {10, 20, 30, 40};
  auto storage = std::make_shared<int>(0);
  KernelInfo k0 = graph.kernels[0], k1 = graph.kernels[1], k2 = graph.kernels[2];
  for (int step = 0; step < 2; ++step) {
    session->BeginStep(0);
    session->OnKernelDone(k0, {}, {FloatsWithOrigin(step == 0 ? first : second, storage, 1)});
    // The same origin: reused; then written since: read again.
    session->OnKernelDone(k1, {FloatsWithOrigin(second, storage, 1)}, {});
    session->OnKernelDone(k2, {FloatsWithOrigin(second, storage, 2)}, {});
    session->EndStep(0);
  }
  ASSERT_TRUE(session->Close().ok());
  // Four of the six rows were computed, each from 4 floats; the other two reused them.
  const DumpSummary summary = session->Summary();
  EXPECT_EQ(summary.statistic_rows, 6u);
  EXPECT_EQ(summary.statistics_computed, 4u);
  EXPECT_EQ(summary.statistics_bytes, 4u * 16u);
  for (const char* it : {"0", "1"}) {
    const std::string csv = ReadFile(dir.Sub(std::string("rank_0/Net/0/") + it + "/statistic.csv"));
    std::vector<std::string> values;
    std::regex value(R"re("\(4\)",([^,]+),([^,]+),\n)re");
    for (auto m = std::sregex_iterator(csv.begin(), csv.end(), value); m != std::sregex_iterator();
         ++m) {
      values.push_back((*m)[1].str() + "/" + (*m)[2].str());
    }
    // Step 1 starts over: nothing survives EndStep.
    const std::string reused = std::string(it) == "0" ? "4/1" : "40/10";
    EXPECT_EQ(values, (std::vector<std::string>{reused, reused, "40/10"})) << csv;
  }
}

// A statistic dump names its rows' files as a tensor dump would (mapping.csv for a long
// name), per kernel and iteration, with the names a kernel's own KernelInfo gives it.
TEST(SessionTest, StatisticRowsNameEachKernelInEachIteration) {
  TempDir dir;
  auto session = OpenSession(Parse(ConfigJson(dir.path(), R"(, "saved_data": "statistic")")));
  const std::string long_name = "Default/" + std::string(300, 'a') + "/MatMul-op7";
  GraphInfo graph;
  KernelInfo k;
  k.full_name = long_name;
  graph.kernels.push_back(k);
  ASSERT_TRUE(session->OnGraphCompiled(graph).ok());
  std::vector<int32_t> v = {1, 2, 3};
  for (int step = 0; step < 2; ++step) {
    session->BeginStep(0);
    k.index = 0;
    k.full_name = step == 0 ? long_name : "Default/Add-op1";  // the host renamed it
    session->OnKernelDone(k, {}, {testing::MakeView(DType::kInt32, {3}, {}, v.data())});
    session->EndStep(0);
  }
  ASSERT_TRUE(session->Close().ok());
  EXPECT_TRUE(std::regex_match(
      ReadFile(dir.Sub("rank_0/Net/0/0/mapping.csv")),
      std::regex(R"(0\.npy,MatMul\.Default_a{300}_MatMul-op7\.0\.0\.\d{16}\.output\.0\.DefaultFormat\.int32\.npy\n)")));
  const std::string first = ReadFile(dir.Sub("rank_0/Net/0/0/statistic.csv"));
  const std::string second = ReadFile(dir.Sub("rank_0/Net/0/1/statistic.csv"));
  EXPECT_NE(first.find("\nMatMul,Default_" + std::string(300, 'a') + "_MatMul-op7,0,0,"),
            std::string::npos)
      << first;
  EXPECT_NE(second.find("\nAdd,Default_Add-op1,0,0,"), std::string::npos) << second;
  EXPECT_NE(second.find(",output,0,12,int32,\"(3)\","), std::string::npos) << second;
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("rank_0/Net/0/1/mapping.csv")));
}

// With stats_across_steps, the statistics a dumping step took are found again in the next one;
// an allocation the host reports written between steps (BeforeWrite while
// KeepsStatisticsAcrossSteps: a write that left its version as it was) is read again, and a
// step that dumps nothing starts from no statistics.
TEST(SessionTest, StatisticsKeptAcrossStepsAreReadAgainAfterAReportedWrite) {
  TempDir dir;
  SessionOptions options;
  options.config = Parse(ConfigJson(dir.path(), R"(, "saved_data": "statistic",
      "iteration": "0-2|4", "statistic_category": ["max", "min"])"));
  options.stats_across_steps = true;
  auto session = std::move(DumpSession::Open(std::move(options))).value();
  GraphInfo graph = NamedKernels({"Default/a-op0", "Default/b-op1"});
  ASSERT_TRUE(session->OnGraphCompiled(graph).ok());
  HostTensor t{std::make_shared<std::vector<float>>(64, 1.5f)};
  auto step = [&](const KernelInfo& kernel, bool input, float next_value, bool report) {
    session->BeginIteration();
    EXPECT_FALSE(session->KeepsStatisticsAcrossSteps());
    if (input) {
      session->OnKernelDone(kernel, {t.View()}, {});
    } else {
      session->OnKernelDone(kernel, {}, {t.View()});
    }
    session->EndIteration();
    if (report) session->BeforeWrite(t.data.get());
    std::fill(t.data->begin(), t.data->end(), next_value);  // the version stays 0
  };
  step(graph.kernels[0], false, 2.5f, /*report=*/false);
  EXPECT_TRUE(session->KeepsStatisticsAcrossSteps());
  step(graph.kernels[1], true, -7.0f, /*report=*/true);   // reuses 1.5: the write was not said
  step(graph.kernels[1], true, 9.0f, /*report=*/false);   // -7, read again
  step(graph.kernels[1], true, 9.0f, /*report=*/false);   // iteration 3 dumps nothing
  EXPECT_FALSE(session->KeepsStatisticsAcrossSteps());
  step(graph.kernels[1], true, 9.0f, /*report=*/false);   // 9: nothing was kept
  ASSERT_TRUE(session->Close().ok());
  std::vector<std::string> rows;
  for (const char* it : {"0", "1", "2", "4"}) {
    const std::string csv =
        ReadFile(dir.Sub(std::string("rank_0/Net/0/") + it + "/statistic.csv"));
    std::regex row(R"re(\n(\w+),[^,]+,0,0,\d+,(\w+),0,256,float32,"\(64\)",([^,]+),([^,]+),)re");
    for (auto m = std::sregex_iterator(csv.begin(), csv.end(), row);
         m != std::sregex_iterator(); ++m) {
      rows.push_back(std::string(it) + " " + (*m)[1].str() + " " + (*m)[2].str() + " " +
                     (*m)[3].str() + "/" + (*m)[4].str());
    }
  }
  EXPECT_EQ(rows, (std::vector<std::string>{"0 a output 1.5/1.5", "1 b input 1.5/1.5",
                                            "2 b input -7/-7", "4 b input 9/9"}));
}

}  // namespace
}  // namespace graphdump
