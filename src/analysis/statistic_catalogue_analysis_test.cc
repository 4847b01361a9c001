// The analysis tools read statistic.csv through the statistic catalogue: a statistic-only dump of
// every catalogue category is compared on every comparable column, and watch and report take
// its counts from the row, as from the same tensor's file. Nothing here names a category.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "graphdump/analysis/compare.h"
#include "graphdump/analysis/dump_index.h"
#include "graphdump/analysis/report.h"
#include "graphdump/analysis/watch.h"
#include "graphdump/npy.h"
#include "graphdump/statistic_catalogue.h"
#include "graphdump/stats.h"
#include "sin_dump_testing.h"
#include "testing/testing.h"

namespace graphdump::analysis {
namespace {

using testing::TempDir;

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<StatCategory> EveryCategory() {
  std::vector<StatCategory> all;
  for (const StatisticInfo& info : StatisticCatalogue()) all.push_back(info.category);
  return all;
}

// A one-kernel dump of `values` under `dir`: a .npy file, or (with `statistic`) a statistic.csv
// row of every catalogue category.
DumpIndex WriteDump(const TempDir& dir, bool statistic, const std::vector<float>& values) {
  const NanPropagatingStats stats =
      ComputeStats(DType::kFloat32, values.data(), static_cast<int64_t>(values.size()), true);
  return testing_dumps::WriteSinDump(dir, statistic, values, stats, EveryCategory());
}

TEST(StatisticCatalogueAnalysisTest, CompareJudgesEveryComparableColumn) {
  const std::vector<float> values = {-1.5f, 0.0f, 2.25f, 7.0f, -3.0f, 0.0f};
  TempDir stats_dir, tensor_dir;
  const DumpIndex statistic = WriteDump(stats_dir, true, values);
  const DumpIndex tensors = WriteDump(tensor_dir, false, values);
  std::set<std::string> comparable;
  for (const StatisticInfo& info : StatisticCatalogue()) {
    if (info.comparable) comparable.insert(info.title);
  }
  CompareOptions options;
  options.progress = false;
  options.threads = 1;
  for (const auto& [a, b] : {std::pair(&statistic, &tensors), std::pair(&tensors, &statistic),
                             std::pair(&statistic, &statistic)}) {
    const CompareResult r = CompareDumps(*a, *b, options);
    ASSERT_EQ(r.kernels.size(), 1u);
    ASSERT_EQ(r.kernels[0].tensors.size(), 1u);
    const TensorComparison& t = r.kernels[0].tensors[0];
    if (a == b) {  // both rows carry the md5: equal bytes, nothing else to judge
      EXPECT_EQ(t.reason, "statistics only: MD5 equal");
      continue;
    }
    EXPECT_EQ(t.mode, "statistic");
    EXPECT_EQ(t.verdict, Verdict::kPass) << t.reason;
    std::set<std::string> judged;
    for (const auto& [title, diff] : t.stat_diffs) judged.emplace(title.view());
    EXPECT_EQ(judged, comparable);
    EXPECT_EQ(r.errors, 0);
  }
}

TEST(StatisticCatalogueAnalysisTest, WatchAndReportCountFromTheRowAsFromTheFile) {
  const std::vector<float> values = {1.0f, std::nanf(""), kInf, -kInf, -kInf, 0.0f, 2.0f, 3.0f};
  TempDir stats_dir, tensor_dir;
  const DumpIndex statistic = WriteDump(stats_dir, true, values);
  const DumpIndex tensors = WriteDump(tensor_dir, false, values);
  auto checks = ParseWatchChecks("nan,inf");
  ASSERT_TRUE(checks.ok());
  WatchOptions options;
  options.progress = false;
  options.threads = 1;
  options.count_intended_inf = true;
  const WatchResult from_row = RunWatch(statistic, *checks, options);
  const WatchResult from_file = RunWatch(tensors, *checks, options);
  ASSERT_EQ(from_row.hits.size(), 2u);
  ASSERT_EQ(from_file.hits.size(), 2u);
  EXPECT_EQ(from_row.hits[0].detail, "1 NaN of 8 elements");
  EXPECT_EQ(from_row.hits[1].detail, "1 +Inf and 2 -Inf of 8 elements");
  for (size_t i = 0; i < 2; ++i) {
    // The file's hit adds where the first bad element lies; the counts are the same.
    EXPECT_EQ(from_file.hits[i].detail.rfind(from_row.hits[i].detail, 0), 0u)
        << from_file.hits[i].detail;
  }

  SeriesSelection selection;
  const std::vector<KernelSeries> row = CollectKernelSeries(statistic, 0, selection);
  const std::vector<KernelSeries> file = CollectKernelSeries(tensors, 0, selection);
  ASSERT_EQ(row.size(), 1u);
  ASSERT_EQ(file.size(), 1u);
  ASSERT_EQ(row[0].points.size(), 1u);
  ASSERT_EQ(file[0].points.size(), 1u);
  const StatPoint& r = row[0].points[0];
  const StatPoint& f = file[0].points[0];
  EXPECT_EQ(r.elements, 8);
  EXPECT_EQ(r.nan_count, 1);
  EXPECT_EQ(r.pos_inf_count, 1);
  EXPECT_EQ(r.neg_inf_count, 2);
  EXPECT_EQ(std::tuple(r.elements, r.nan_count, r.pos_inf_count, r.neg_inf_count),
            std::tuple(f.elements, f.nan_count, f.pos_inf_count, f.neg_inf_count));
  ASSERT_TRUE(r.max && r.min && r.mean && r.l2norm);
  EXPECT_TRUE(std::isnan(*r.max) && std::isnan(*r.min) && std::isnan(*r.mean));
}

}  // namespace
}  // namespace graphdump::analysis
