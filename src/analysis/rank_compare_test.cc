// Cross-rank compare and per-rank watch over multi-rank dumps written by the real DumpSession:
// rank 0 and rank 1 dump the synthetic graph (same seed: identical values) into one path, with
// faults planted on one rank.
#include "graphdump/analysis/rank_compare.h"

#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "graphdump/analysis/watch.h"
#include "graphdump/config.h"
#include "graphdump/session.h"
#include "graphdump/synthetic.h"
#include "testing/testing.h"

namespace graphdump::analysis {
namespace {

using testing::TempDir;

constexpr char kAllReduce[] = "Default/allreduce-DataParallel/fc2.weight/AllReduce-op0";

struct RankRun {
  SyntheticOptions synthetic;
  // Added to the all-reduce output (graph 1) from iteration `allreduce_fault_iteration` on.
  float allreduce_offset = 0;
  uint64_t allreduce_fault_iteration = 0;
};

// Runs graph 1: one all-reduce kernel per step, output 1.5 (+ the planted offset).
void RunAllReduceGraph(DumpSession& session, const RankRun& run) {
  GraphInfo g;
  g.graph_id = 1;
  g.name = "allreduce";
  KernelInfo k;
  k.full_name = kAllReduce;
  k.inputs = {{DType::kFloat32, {4}}};
  k.outputs = {{DType::kFloat32, {4}}};
  g.kernels.push_back(k);
  ASSERT_TRUE(session.OnGraphCompiled(g).ok());
  k.index = 0;
  k.graph_id = 1;
  for (int step = 0; step < 2; ++step) {
    session.BeginStep(1);
    const float offset =
        session.CurrentIteration() >= run.allreduce_fault_iteration ? run.allreduce_offset : 0.0f;
    std::vector<float> in(4, 0.75f), out(4, 1.5f + offset);
    TensorView vin, vout;
    vin.shape = vout.shape = {4};
    vin.data = in.data();
    vout.data = out.data();
    if (session.Wants(k)) session.OnKernelDone(k, {vin}, {vout});
    session.EndStep(1);
  }
}

void DumpRank(const std::string& dir, uint32_t rank, const RankRun& run) {
  const std::string json = R"({"common_dump_settings": {"dump_mode": 0, "path": ")" + dir +
                           R"(", "net_name": "Net", "iteration": "all", "input_output": 0,
       "kernels": [], "support_device": [0, 1], "saved_data": "tensor"},
       "e2e_dump_settings": {"enable": true}})";
  StatusOr<ParsedConfig> parsed = ParseConfig(json, "test.json", "");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  SessionOptions options;
  options.config = parsed->config;
  options.config.source_bytes = json;
  options.rank = rank;
  options.log = [](const std::string&) {};
  auto session = DumpSession::Open(std::move(options));
  ASSERT_TRUE(session.ok()) << session.status().message();
  ASSERT_NE(*session, nullptr);
  ASSERT_TRUE(RunSyntheticGraph(**session, run.synthetic).ok());
  RunAllReduceGraph(**session, run);
  ASSERT_TRUE((*session)->Close().ok());
}

DumpIndex DumpTwoRanks(const std::string& dir, const RankRun& rank0, const RankRun& rank1) {
  DumpRank(dir, 0, rank0);
  DumpRank(dir, 1, rank1);
  auto index = IndexDump(dir);
  EXPECT_TRUE(index.ok()) << index.status().message();
  EXPECT_EQ(index->ranks.size(), 2u);
  return std::move(index).value();
}

RankCompareOptions Quiet() {
  RankCompareOptions o;
  o.compare.progress = false;
  return o;
}

RankRun Clean() {
  RankRun run;
  run.synthetic.steps = 3;
  return run;
}

TEST(RankCompareTest, SelectsParametersAllReduceAndOptimizerKernels) {
  KernelEntry k;
  k.is_parameter = true;
  EXPECT_TRUE(IsRankSyncedKernel(k));
  k.is_parameter = false;
  k.full_name = kAllReduce;
  EXPECT_TRUE(IsRankSyncedKernel(k));
  k.full_name = "Default/optimizer-SGD/ApplyGradientDescent-op8";
  EXPECT_TRUE(IsRankSyncedKernel(k));
  k.full_name = k.op_name = "Default_optimizer-Adam_Adam-op3";  // no execution order
  EXPECT_TRUE(IsRankSyncedKernel(k));
  k.full_name = k.op_name = "Default/fc2-Dense/MatMul-op3";
  EXPECT_FALSE(IsRankSyncedKernel(k));
  k.full_name = k.op_name =
      "Gradients/Default/optimizer-SGD/X-op1";  // not under Default/optimizer-
  EXPECT_FALSE(IsRankSyncedKernel(k));
}

TEST(RankCompareTest, IdenticalRanksAgree) {
  TempDir dir;
  const DumpIndex index = DumpTwoRanks(dir.path(), Clean(), Clean());
  auto result = CompareRanks(index, Quiet());
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->reference_rank, 0u);
  EXPECT_EQ(result->compared_ranks, std::vector<uint32_t>{1});
  const CompareResult& r = result->result;
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.first_failure, -1);
  EXPECT_TRUE(r.unpaired.empty());
  EXPECT_TRUE(r.skipped.empty());
  // Per iteration of graph 0: 4 parameters + the optimizer kernel; graph 1: the all-reduce.
  int parameters = 0, optimizer = 0, allreduce = 0;
  for (const KernelComparison& k : r.kernels) {
    EXPECT_EQ(k.rank, 1u);
    if (k.op_type == "Parameter" && k.iteration >= 0) ++parameters;
    if (k.name_a == "Default/optimizer-SGD/ApplyGradientDescent-op8") {
      ++optimizer;
      ASSERT_EQ(k.tensors.size(), 1u);  // outputs only
      EXPECT_FALSE(k.tensors[0].is_input);
      EXPECT_EQ(k.tensors[0].mode, "tensor");
    }
    if (k.name_a == kAllReduce) ++allreduce;
    EXPECT_NE(k.name_a, "Default/fc2-Dense/MatMul-op3");
  }
  EXPECT_EQ(parameters, 3 * 4);
  EXPECT_EQ(optimizer, 3);
  EXPECT_EQ(allreduce, 2);
}

TEST(RankCompareTest, PerturbedOptimizerOnRank1IsTheFirstDisagreement) {
  TempDir dir;
  RankRun bad = Clean();
  bad.synthetic.perturb_kernel = 8;  // Default/optimizer-SGD/ApplyGradientDescent-op8
  bad.synthetic.perturb = 0.25f;
  bad.synthetic.fault_iteration = 1;
  const DumpIndex index = DumpTwoRanks(dir.path(), Clean(), bad);
  auto result = CompareRanks(index, Quiet());
  ASSERT_TRUE(result.ok()) << result.status().message();
  const CompareResult& r = result->result;
  ASSERT_GE(r.first_failure, 0);
  const KernelComparison& f = r.kernels[r.first_failure];
  EXPECT_EQ(f.graph_id, 0u);
  EXPECT_EQ(f.iteration, 1);
  EXPECT_EQ(f.name_a, "Default/optimizer-SGD/ApplyGradientDescent-op8");
  EXPECT_EQ(f.rank, 1u);
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_NEAR(f.tensors[0].metrics.max_abs_err, 0.25, 1e-6);
  // Iteration 0 agrees; in iteration 2 the updated weight differs at step start too.
  bool weight_differs_at_2 = false;
  for (const KernelComparison& k : r.kernels) {
    if (k.graph_id == 0 && k.iteration == 0) {
      EXPECT_EQ(k.verdict, Verdict::kPass) << k.name_a;
    }
    if (k.iteration == 2 && k.op_type == "Parameter" && k.verdict == Verdict::kError) {
      EXPECT_NE(k.name_a.find("fc2"), std::string::npos) << k.name_a;
      weight_differs_at_2 = true;
    }
  }
  EXPECT_TRUE(weight_differs_at_2);
  const nlohmann::json j = nlohmann::json::parse(RankCompareResultJson(*result));
  EXPECT_EQ(j["reference_rank"], 0);
  EXPECT_EQ(j["first_failure"]["iteration"], 1);
  EXPECT_EQ(j["first_failure"]["rank"], 1);
}

TEST(RankCompareTest, PerturbedAllReduceIsReported) {
  TempDir dir;
  RankRun bad = Clean();
  bad.allreduce_offset = 1e-3f;
  bad.allreduce_fault_iteration = 4;  // the session's iteration counter: graph 1 runs 3 and 4
  const DumpIndex index = DumpTwoRanks(dir.path(), Clean(), bad);
  auto result = CompareRanks(index, Quiet());
  ASSERT_TRUE(result.ok()) << result.status().message();
  const CompareResult& r = result->result;
  EXPECT_EQ(r.errors, 1);
  ASSERT_GE(r.first_failure, 0);
  const KernelComparison& f = r.kernels[r.first_failure];
  EXPECT_EQ(f.name_a, kAllReduce);
  EXPECT_EQ(f.graph_id, 1u);
  EXPECT_EQ(f.iteration, 4);
  EXPECT_NEAR(f.tensors[0].metrics.max_abs_err, 1e-3, 1e-6);
}

TEST(RankCompareTest, RankSelectionErrors) {
  TempDir dir;
  const DumpIndex index = DumpTwoRanks(dir.path(), Clean(), Clean());
  RankCompareOptions o = Quiet();
  o.ranks = {0, 7};
  auto missing = CompareRanks(index, o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("rank 7"), std::string::npos);
  EXPECT_NE(missing.status().message().find("ranks found: 0, 1"), std::string::npos);
  o.ranks = {1};
  EXPECT_FALSE(CompareRanks(index, o).ok());
  o.ranks = {1, 0};  // rank 1 is the reference
  auto swapped = CompareRanks(index, o);
  ASSERT_TRUE(swapped.ok());
  EXPECT_EQ(swapped->reference_rank, 1u);
  EXPECT_EQ(swapped->result.errors, 0);
}

TEST(RankWatchTest, FirstHitPerRankNamesTheRankThatHitFirst) {
  TempDir dir;
  RankRun rank0 = Clean(), rank1 = Clean();
  rank0.synthetic.nan_kernel = 3;  // Default/fc2-Dense/MatMul-op3
  rank0.synthetic.fault_iteration = 2;
  rank1.synthetic.nan_kernel = 4;  // Default/fc2-Dense/BiasAdd-op4
  rank1.synthetic.fault_iteration = 1;
  const DumpIndex index = DumpTwoRanks(dir.path(), rank0, rank1);
  auto checks = ParseWatchChecks("nan");
  ASSERT_TRUE(checks.ok());
  WatchOptions options;
  options.progress = false;
  const WatchResult result = RunWatch(index, *checks, options);
  EXPECT_EQ(result.ranks, 2u);
  const std::vector<WatchHit> firsts = FirstHitPerRank(result);
  ASSERT_EQ(firsts.size(), 2u);
  EXPECT_EQ(firsts[0].rank, 1u);
  EXPECT_EQ(firsts[0].iteration, 1);
  EXPECT_EQ(firsts[0].kernel, "Default/fc2-Dense/BiasAdd-op4");
  EXPECT_EQ(firsts[1].rank, 0u);
  EXPECT_EQ(firsts[1].iteration, 2);
  EXPECT_EQ(firsts[1].kernel, "Default/fc2-Dense/MatMul-op3");
  const nlohmann::json j = nlohmann::json::parse(WatchResultJson(result));
  EXPECT_EQ(j["first_rank"], 1);
  EXPECT_EQ(j["first_hit"]["rank"], 1);
  ASSERT_EQ(j["first_hit_per_rank"].size(), 2u);
  EXPECT_EQ(j["first_hit_per_rank"][1]["rank"], 0);
}

}  // namespace
}  // namespace graphdump::analysis
