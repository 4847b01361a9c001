// The analysis tools over dumps written by the real DumpSession (the synthetic MLP of
// graphdump/synthetic.h), with faults planted at known kernels and iterations.
#include <gtest/gtest.h>

#include "graphdump/analysis/compare.h"
#include "graphdump/analysis/dump_index.h"
#include "graphdump/analysis/trace.h"
#include "graphdump/analysis/watch.h"
#include "graphdump/config.h"
#include "graphdump/session.h"
#include "graphdump/synthetic.h"
#include "testing/testing.h"

namespace graphdump::analysis {
namespace {

using testing::TempDir;

// Dumps the synthetic graph into `dir` and returns its index.
DumpIndex Dump(const std::string& dir, const SyntheticOptions& synthetic,
               const std::string& saved_data = "tensor") {
  const std::string json =
      R"({"common_dump_settings": {"dump_mode": 0, "path": ")" + dir +
      R"(", "net_name": "Net", "iteration": "all", "input_output": 0, "kernels": [],
       "support_device": [0], "saved_data": ")" +
      saved_data + R"(", "statistic_category": ["max", "min", "avg", "l2norm", "nan count"]},
       "e2e_dump_settings": {"enable": true}})";
  StatusOr<ParsedConfig> parsed = ParseConfig(json, "test.json", "");
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  SessionOptions options;
  options.config = parsed->config;
  options.config.source_bytes = json;
  options.log = [](const std::string&) {};
  auto session = DumpSession::Open(std::move(options));
  EXPECT_TRUE(session.ok()) << session.status().message();
  EXPECT_TRUE(RunSyntheticGraph(**session, synthetic).ok());
  EXPECT_TRUE((*session)->Close().ok());
  auto index = IndexDump(dir);
  EXPECT_TRUE(index.ok()) << index.status().message();
  return std::move(index).value();
}

CompareOptions Quiet() {
  CompareOptions o;
  o.progress = false;
  return o;
}

TEST(SessionDumpTest, IdenticalRunsPassAndInjectedKernelIsTheFirstDivergence) {
  TempDir a_dir, b_dir, c_dir;
  SyntheticOptions clean;
  clean.steps = 3;
  SyntheticOptions perturbed = clean;
  perturbed.perturb_kernel = 3;
  perturbed.perturb = 0.5f;
  perturbed.fault_iteration = 1;
  const DumpIndex a = Dump(a_dir.path(), clean);
  const DumpIndex b = Dump(b_dir.path(), clean);
  const DumpIndex c = Dump(c_dir.path(), perturbed);
  ASSERT_EQ(a.ranks.size(), 1u);
  const auto& iterations = a.ranks[0].graphs[0].iterations;
  ASSERT_EQ(iterations.size(), 4u);  // 0, 1, 2 and constants/
  EXPECT_EQ(iterations.back().iteration, -1);
  EXPECT_TRUE(a.skipped.empty());

  const CompareResult same = CompareDumps(a, b, Quiet());
  EXPECT_EQ(same.errors, 0);
  EXPECT_EQ(same.first_failure, -1);
  EXPECT_TRUE(same.unpaired.empty());
  EXPECT_GE(same.kernels.size(), 3u * 9);  // 9 kernels (+ parameters) per iteration

  const CompareResult diff = CompareDumps(c, a, Quiet());
  ASSERT_GE(diff.first_failure, 0);
  const KernelComparison& first = diff.kernels[diff.first_failure];
  EXPECT_EQ(first.name_a, "Default/fc2-Dense/MatMul-op3");
  EXPECT_EQ(first.iteration, 1);
  EXPECT_EQ(first.source_line, "synthetic_mlp.py:14");
  EXPECT_NE(first.reason.find("output 0"), std::string::npos) << first.reason;
  // Iteration 0 is untouched.
  for (const KernelComparison& k : diff.kernels) {
    if (k.iteration == 0) {
      EXPECT_EQ(k.verdict, Verdict::kPass) << k.name_a << ": " << k.reason;
    }
  }
}

TEST(SessionDumpTest, WatchFindsThePlantedNan) {
  TempDir clean_dir, nan_dir;
  SyntheticOptions clean;
  clean.steps = 4;
  SyntheticOptions with_nan = clean;
  with_nan.nan_kernel = 2;
  with_nan.fault_iteration = 2;
  const DumpIndex ok = Dump(clean_dir.path(), clean);
  const DumpIndex bad = Dump(nan_dir.path(), with_nan);
  auto checks = ParseWatchChecks("nan,inf");
  ASSERT_TRUE(checks.ok());
  WatchOptions options;
  options.progress = false;
  const WatchResult none = RunWatch(ok, *checks, options);
  EXPECT_TRUE(none.hits.empty()) << none.hits[0].kernel;
  EXPECT_GT(none.tensors_checked, 50);
  const WatchResult hits = RunWatch(bad, *checks, options);
  ASSERT_FALSE(hits.hits.empty());
  const WatchHit& first = hits.hits.front();
  EXPECT_EQ(first.kernel, "Default/relu-ReLU/ReLU-op2");
  EXPECT_EQ(first.iteration, 2);
  EXPECT_FALSE(first.is_input);
  EXPECT_EQ(first.check, "nan");
  EXPECT_EQ(first.source_line, "synthetic_mlp.py:13");
  for (const WatchHit& h : hits.hits) EXPECT_GE(h.iteration, 2) << h.kernel;
}

TEST(SessionDumpTest, StatisticDumpComparesAgainstTensorDump) {
  TempDir stats_dir, tensor_dir;
  SyntheticOptions clean;
  clean.steps = 2;
  const DumpIndex stats = Dump(stats_dir.path(), clean, "statistic");
  const DumpIndex tensors = Dump(tensor_dir.path(), clean);
  CompareOptions options = Quiet();
  options.user_tolerances = true;
  options.rtol = 1e-4;  // statistic.csv keeps 6 significant digits
  options.atol = 1e-6;
  const CompareResult r = CompareDumps(stats, tensors, options);
  EXPECT_EQ(r.errors, 0) << (r.first_failure >= 0 ? r.kernels[r.first_failure].reason : "");
  ASSERT_FALSE(r.kernels.empty());
  bool saw_statistic = false;
  for (const KernelComparison& k : r.kernels)
    for (const TensorComparison& t : k.tensors) saw_statistic |= t.mode == "statistic";
  EXPECT_TRUE(saw_statistic);
  // With the default standards too: statistic.csv's 6 printed digits are no difference.
  const CompareResult standard = CompareDumps(stats, tensors, Quiet());
  EXPECT_EQ(standard.errors, 0) << (standard.first_failure >= 0
                                        ? standard.kernels[standard.first_failure].reason
                                        : "");

  SyntheticOptions perturbed = clean;
  perturbed.perturb_kernel = 4;
  perturbed.perturb = 1.0f;
  TempDir bad_dir;
  const DumpIndex bad = Dump(bad_dir.path(), perturbed, "statistic");
  const CompareResult d = CompareDumps(bad, tensors, options);
  ASSERT_GE(d.first_failure, 0);
  EXPECT_EQ(d.kernels[d.first_failure].name_a, "Default/fc2-Dense/BiasAdd-op4");
  const CompareResult d_standard = CompareDumps(bad, tensors, Quiet());
  ASSERT_GE(d_standard.first_failure, 0);
  EXPECT_EQ(d_standard.kernels[d_standard.first_failure].name_a, "Default/fc2-Dense/BiasAdd-op4");
}

TEST(SessionDumpTest, FullDumpAttachesStatisticRowsToFiles) {
  TempDir dir;
  SyntheticOptions clean;
  clean.steps = 1;
  const DumpIndex index = Dump(dir.path(), clean, "full");
  const IterationEntry& it = index.ranks[0].graphs[0].iterations[0];
  ASSERT_EQ(it.iteration, 0);
  int kernels = 0;
  for (const KernelEntry& k : it.kernels) {
    if (k.is_parameter) continue;
    ++kernels;
    EXPECT_GE(k.order, 0) << k.full_name;
    for (const TensorEntry& t : k.tensors) {
      EXPECT_FALSE(t.path.empty()) << k.full_name;
      EXPECT_TRUE(t.stats.has_value()) << k.full_name;
    }
  }
  EXPECT_EQ(kernels, 9);
}

TEST(SessionDumpTest, TraceMapsASourceLineToKernels) {
  TempDir dir;
  SyntheticOptions clean;
  clean.steps = 2;
  const DumpIndex index = Dump(dir.path(), clean);
  const std::vector<TraceMatch> matches = TraceLine(index, "synthetic_mlp.py", 14);
  std::vector<std::string> names;
  for (const TraceMatch& m : matches) names.push_back(m.full_name);
  EXPECT_EQ(names, (std::vector<std::string>{"Default/fc2-Dense/MatMul-op3",
                                             "Default/fc2-Dense/BiasAdd-op4",
                                             "Gradients/Default/fc2-Dense/MatMulGrad-op7"}));
  ASSERT_FALSE(matches.empty());
  EXPECT_EQ(matches[0].code, "x = self.fc2(x)");
  EXPECT_EQ(matches[0].files.size(), 2u * 3);  // 2 iterations x (2 inputs + 1 output)
}

}  // namespace
}  // namespace graphdump::analysis
