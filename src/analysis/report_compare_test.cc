// What the report keeps of a comparison given rank pair by rank pair is what it keeps of the
// whole result: the same kernels at the same positions, the same ranking and counts.
#include "graphdump/analysis/report_compare.h"

#include <gtest/gtest.h>

#include <string>

namespace graphdump::analysis {
namespace {

// Rank `rank`'s part: 300 kernels, every 3rd failing and adding error (by an amount that
// interleaves the ranks' contributors), every 50th a differing parameter.
CompareResult Part(uint32_t rank) {
  CompareResult r;
  for (int i = 0; i < 300; ++i) {
    KernelComparison k;
    k.rank = rank;
    k.iteration = i / 100;
    k.order = i % 100;
    k.name_a = k.name_b = "net/k" + std::to_string(i % 100) + "-op" + std::to_string(i % 100);
    k.op_type = "Mul";
    if (i % 50 == 0) {
      k.op_type = "Parameter";
      k.role = KernelRole::kParameter;
      k.verdict = Verdict::kError;
    } else if (i % 3 == 0) {
      k.verdict = Verdict::kError;
      k.adds_error = true;
      k.output_error = k.added_error = static_cast<double>((i * 37 + rank * 11) % 97);
      k.growth = 2;
      k.contribution_rank = 1 + i / 3;  // within its part (as each_part gives it), not the page's
    }
    (k.verdict == Verdict::kPass ? r.passed : r.errors) += 1;
    r.kernels.push_back(k);
  }
  r.unpaired.push_back({'B', rank, 0, 1, 0, "net/extra-op9", ""});
  return r;
}

TEST(ReportCompareTest, PartsKeepWhatTheWholeKeeps) {
  CompareResult whole;
  ReportCompareCollector parts(3);
  for (uint32_t rank = 0; rank < 3; ++rank) {
    CompareResult part = Part(rank);
    parts.Add(part);
    for (KernelComparison& k : part.kernels) whole.kernels.push_back(k);
    whole.passed += part.passed;
    whole.errors += part.errors;
    whole.unpaired.push_back(part.unpaired[0]);
  }
  ReportComparison a = parts.Finish({});
  ReportComparison b = ReportComparisonOf(whole, 1);
  CompareResult one = Part(1);
  AddChartedRank(one, &a);
  EXPECT_EQ(a.kernels, 900u);
  EXPECT_EQ(a.not_passed, 3u * (100 + 6) - 3u * 2);  // i % 3 == 0 or i % 50 == 0
  EXPECT_EQ(a.contributors, b.contributors);
  EXPECT_EQ(a.unpaired, 3u);
  EXPECT_EQ(a.shown.unpaired.size(), 3u);
  // Shown: the first 200 not passing, each rank's first failing kernel, the first source, the
  // first 200 contributors and rank 1 whole.
  EXPECT_LT(a.shown.kernels.size(), 900u);
  EXPECT_EQ(a.positions, b.positions);
  ASSERT_EQ(a.shown.kernels.size(), b.shown.kernels.size());
  for (size_t i = 0; i < a.shown.kernels.size(); ++i) {
    EXPECT_EQ(a.shown.kernels[i].name_a, b.shown.kernels[i].name_a) << i;
    EXPECT_EQ(a.shown.kernels[i].contribution_rank, b.shown.kernels[i].contribution_rank) << i;
  }
  EXPECT_EQ(a.shown.contributors, b.shown.contributors);
  ASSERT_GE(a.shown.contributors.size(), 200u);
  // Ranked: the largest added error first, then execution order.
  for (size_t i = 1; i < 200; ++i) {
    const KernelComparison& x = a.shown.kernels[a.shown.contributors[i - 1]];
    const KernelComparison& y = a.shown.kernels[a.shown.contributors[i]];
    EXPECT_TRUE(x.added_error > y.added_error ||
                (x.added_error == y.added_error &&
                 a.positions[a.shown.contributors[i - 1]] < a.positions[a.shown.contributors[i]]))
        << i;
    EXPECT_EQ(x.contribution_rank, static_cast<int>(i));
  }
  // Only the first 200 contributors over every part carry a rank.
  std::vector<bool> ranked(a.shown.kernels.size());
  for (size_t i = 0; i < 200; ++i) ranked[a.shown.contributors[i]] = true;
  for (size_t i = 0; i < a.shown.kernels.size(); ++i) {
    if (!ranked[i]) {
      EXPECT_EQ(a.shown.kernels[i].contribution_rank, 0) << i;
    }
  }
  EXPECT_EQ(a.failing, b.failing);
  EXPECT_EQ(a.failing.at({2, 1}), 32);  // i in [100, 200) with i % 3 == 0, but 150
  ASSERT_EQ(a.shown.differing_sources.size(), 1u);
  EXPECT_EQ(a.positions[a.shown.differing_sources[0]], 0);
  // Rank 1's every kernel is there whole, at its position.
  size_t ones = 0;
  for (size_t i = 0; i < a.shown.kernels.size(); ++i) {
    if (a.shown.kernels[i].rank != 1) continue;
    EXPECT_EQ(a.positions[i], 300 + static_cast<int64_t>(ones)) << i;
    ++ones;
  }
  EXPECT_EQ(ones, 300u);
}

}  // namespace
}  // namespace graphdump::analysis
