// loss-spike (watch_loss.h): each iteration's loss is the last one-element output before its
// backward, judged against the median of the losses before it; and weight-change's words for
// an update judged from statistic.csv's L2 norms.
#include "watch_loss.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "graphdump/analysis/watch_checks.h"

namespace graphdump::analysis {
namespace {

TEST(LossSeriesTest, TheLastScalarBeforeTheBackwardAgainstTheMedianBefore) {
  LossSeries series;
  const std::vector<double> losses = {2.0, 1.8, 1.9, 1.7, 1.75, 1.3e4};
  for (size_t i = 0; i < losses.size(); ++i) {
    const int64_t it = static_cast<int64_t>(i);
    series.AddCandidate(0, 0, it, 3, 100 + i, 0.5);        // a scale factor, earlier
    series.AddCandidate(0, 0, it, 7, 200 + i, losses[i]);  // the loss
    series.AddGradient(0, 0, it, 9);
    series.AddGradient(0, 0, it, 8);
    series.AddCandidate(0, 0, it, 12, 300 + i, 5e9);  // a scalar of the backward: not a loss
  }
  std::vector<std::pair<size_t, std::string>> hits;
  const int64_t judged =
      series.Judge(10, [&](size_t task, std::string detail) { hits.push_back({task, detail}); });
  EXPECT_EQ(judged, 5);  // every iteration after the first
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].first, 205u);
  // The median of iterations 0-4 is 1.8.
  EXPECT_EQ(hits[0].second,
            "loss 13000 is 7.22e+03x its usual 1.8 (the median of the 5 iteration(s) from 0) "
            "> 10x");
}

TEST(LossSeriesTest, NoBackwardNoLossAndANonFiniteLossIsASpike) {
  LossSeries series;
  series.AddCandidate(0, 0, 0, 1, 1, 2.0);  // no backward in iteration 0: not judged
  series.AddCandidate(0, 0, 1, 1, 2, 2.0);
  series.AddGradient(0, 0, 1, 2);
  series.AddCandidate(0, 0, 2, 1, 3, NAN);
  series.AddGradient(0, 0, 2, 2);
  std::vector<size_t> hits;
  EXPECT_EQ(series.Judge(10, [&](size_t task, std::string) { hits.push_back(task); }), 1);
  EXPECT_EQ(hits, std::vector<size_t>{3});
}

TEST(WeightChangeTest, FromNormsItIsALowerBound) {
  const WatchCheckInfo& check = WatchCheckOf(WatchKind::kWeightChange);
  WeightDelta d{.identical = false, .ratio = 50.225, .previous_iteration = 4, .update = true,
                .lower_bound = true, .norm_before = 4.0, .norm_after = 204.9};
  EXPECT_EQ(check.weight(d, 0.1),
            "||w|| 4 -> 204.9: ||w - w_prev|| / ||w_prev|| >= 50.225 > 0.1 (the update of "
            "iteration 4; from statistic.csv's L2 norms)");
  d.ratio = 0.05;
  EXPECT_EQ(check.weight(d, 0.1), "");
}

}  // namespace
}  // namespace graphdump::analysis
