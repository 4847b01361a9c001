// Results travel between the processes of a distributed analysis exactly: every field, NaN and
// infinities included; bytes that are not an encoded result are an error, not a crash.
#include "graphdump/analysis/result_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace graphdump::analysis {
namespace {

TEST(ResultCodecTest, CompareResultRoundTripsWithNonFiniteValues) {
  CompareResult r;
  KernelComparison k;
  k.rank = 7;
  k.iteration = -1;
  k.order = 42;
  k.name_a = "Default/net/\xff" "odd-op1";
  k.verdict = Verdict::kError;
  k.role = KernelRole::kParameter;
  k.pairing = Pairing::kExecutionOrder;
  k.growth = std::numeric_limits<double>::infinity();
  k.input_error = 0.1 + 0.2;  // not a short decimal: must come back bit for bit
  k.source_trace =
      std::vector<SourceLocation>{{"model.py", 12, 4, "y = f(x)"}, {"run.py", 3, 0, ""}};
  TensorComparison t;
  t.is_input = true;
  t.slot = 3;
  t.mode = "statistic";
  t.stat_diffs = {{"Max Value", -std::numeric_limits<double>::infinity()},
                  {"A Title Of Its Own", 0.5}};  // a title the catalogue lacks
  t.metrics.cosine = std::nan("");
  t.metrics.nan_a = 5;
  k.tensors.push_back(t);
  r.kernels.push_back(k);
  r.unpaired.push_back({'B', 2, 1, 4, 1, "x", "intermediate"});
  r.skipped.push_back({"a.npy", "a.npy: truncated"});
  r.first_failure = 0;
  r.differing_graph_inputs = {{0, 2}};
  auto back = DecodeCompareResult(EncodeCompareResult(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  const KernelComparison& b = back->kernels.at(0);
  EXPECT_EQ(b.rank, 7u);
  EXPECT_EQ(b.iteration, -1);
  EXPECT_EQ(b.order, 42);
  EXPECT_EQ(b.name_a, k.name_a);
  EXPECT_EQ(b.verdict, Verdict::kError);
  EXPECT_EQ(b.role, KernelRole::kParameter);
  EXPECT_EQ(b.pairing, Pairing::kExecutionOrder);
  EXPECT_TRUE(std::isinf(b.growth) && b.growth > 0);
  EXPECT_EQ(b.input_error, 0.1 + 0.2);
  EXPECT_TRUE(std::isnan(b.output_error));
  EXPECT_TRUE(std::isnan(b.tensors.at(0).metrics.cosine));
  EXPECT_EQ(b.tensors.at(0).metrics.nan_a, 5);
  EXPECT_EQ(b.tensors.at(0).stat_diffs.at(0).first, "Max Value");
  EXPECT_EQ(b.tensors.at(0).stat_diffs.at(0).second, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(b.tensors.at(0).stat_diffs.at(1).first, "A Title Of Its Own");
  ASSERT_EQ(b.source_trace.size(), 2u);
  EXPECT_EQ(b.source_trace[0].file, "model.py");
  EXPECT_EQ(b.source_trace[0].line, 12);
  EXPECT_EQ(b.source_trace[0].code, "y = f(x)");
  EXPECT_EQ(b.source_trace[1].file, "run.py");
  EXPECT_EQ(back->unpaired.at(0).side, 'B');
  EXPECT_EQ(back->unpaired.at(0).why, "intermediate");
  EXPECT_EQ(back->skipped.at(0).reason, "a.npy: truncated");
  EXPECT_EQ(back->differing_graph_inputs, r.differing_graph_inputs);
}

TEST(ResultCodecTest, WatchResultsMergeInTheOrderHitsOccurred) {
  auto hit = [](uint32_t rank, int64_t iteration, uint64_t sequence, const char* check) {
    WatchHit h;
    h.rank = rank;
    h.iteration = iteration;
    h.sequence = sequence;
    h.check = check;
    h.timestamp = UINT64_MAX;
    return h;
  };
  WatchResult r0, r1;
  r0.hits = {hit(0, 2, 1, "inf"), hit(0, 2, 1, "overflow")};
  r0.ranks = 1;
  r0.tensors_checked = 10;
  r1.hits = {hit(1, 1, 9, "nan"), hit(1, 2, 0, "nan")};
  r1.ranks = 1;
  r1.tensors_checked = 12;
  r1.skipped = {{"p", "p: bad"}};
  auto d0 = DecodeWatchResult(EncodeWatchResult(r0));
  auto d1 = DecodeWatchResult(EncodeWatchResult(r1));
  ASSERT_TRUE(d0.ok() && d1.ok());
  EXPECT_EQ(d0->hits.at(0).timestamp, UINT64_MAX);
  const WatchResult m = MergeWatchResults({*d0, *d1});
  ASSERT_EQ(m.hits.size(), 4u);
  // Iteration 1 of rank 1 first; then iteration 2 by sequence; one tensor's checks in order.
  EXPECT_EQ(m.hits[0].rank, 1u);
  EXPECT_EQ(m.hits[1].rank, 1u);
  EXPECT_EQ(m.hits[1].sequence, 0u);
  EXPECT_EQ(m.hits[2].check, "inf");
  EXPECT_EQ(m.hits[3].check, "overflow");
  EXPECT_EQ(m.ranks, 2u);
  EXPECT_EQ(m.tensors_checked, 22);
  EXPECT_EQ(m.skipped.size(), 1u);
}

TEST(ResultCodecTest, GarbageIsAnError) {
  EXPECT_EQ(DecodeWatchResult("\xc1garbage").status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(DecodeCompareResult("").status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(DecodeCompareResult(EncodeWatchResult({})).status().code(), StatusCode::kCorrupt);
}

}  // namespace
}  // namespace graphdump::analysis
