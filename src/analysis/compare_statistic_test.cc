// compare between a statistic-only dump and a tensor dump: statistic.csv holds values printed
// with 6 significant digits (docs/file-format.md), so a value read from it is judged with that
// printing's rounding on top of the standard, and a larger difference is still an error.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "graphdump/analysis/compare.h"
#include "graphdump/analysis/dump_index.h"
#include "graphdump/npy.h"
#include "graphdump/stats.h"
#include "sin_dump_testing.h"
#include "testing/testing.h"

namespace graphdump::analysis {
namespace {

using testing::TempDir;

// -1.3097235 prints as "-1.30972": 3.5e-6 away, more than float32's standard allows (2^-20
// relative), less than half a unit in the sixth digit.
const std::vector<float> kValues = {-1.3097235f, 0.5f, 2.2500017f, 123456.7f};

DumpIndex WriteDump(const TempDir& dir, bool statistic, const NanPropagatingStats& stats,
                    const std::vector<StatCategory>& categories) {
  return testing_dumps::WriteSinDump(dir, statistic, kValues, stats, categories);
}

NanPropagatingStats StatsOfValues() {
  return ComputeStats(DType::kFloat32, kValues.data(), static_cast<int64_t>(kValues.size()),
                      StatsRequest{});
}

CompareResult Compare(const DumpIndex& a, const DumpIndex& b) {
  CompareOptions options;
  options.progress = false;
  options.threads = 1;
  return CompareDumps(a, b, options);
}

const std::vector<StatCategory> kCategories = {
    StatCategory::kMax,   StatCategory::kMin,       StatCategory::kAvg,
    StatCategory::kCount, StatCategory::kZeroCount, StatCategory::kL2Norm};

const TensorComparison& OnlyTensor(const CompareResult& r) {
  EXPECT_EQ(r.kernels.size(), 1u);
  EXPECT_EQ(r.kernels.at(0).tensors.size(), 1u);
  return r.kernels.at(0).tensors.at(0);
}

TEST(CompareStatisticTest, AStatisticDumpOfTheSameRunAsATensorDumpHasNoError) {
  TempDir stats_dir, tensor_dir;
  const NanPropagatingStats stats = StatsOfValues();
  // The test's point: printing moved the minimum by more than float32's standard allows.
  ASSERT_EQ(FormatStatValue(stats.min), "-1.30972");
  ASSERT_GT(std::fabs(-1.30972 - stats.min), std::ldexp(std::fabs(stats.min), -20));
  const DumpIndex statistic = WriteDump(stats_dir, true, stats, kCategories);
  const DumpIndex tensors = WriteDump(tensor_dir, false, stats, kCategories);
  for (const CompareResult& r : {Compare(statistic, tensors), Compare(tensors, statistic)}) {
    const TensorComparison& t = OnlyTensor(r);
    EXPECT_EQ(t.mode, "statistic");
    EXPECT_EQ(t.verdict, Verdict::kPass) << t.reason;
    EXPECT_EQ(t.reason, "statistics only: within tolerance");
    EXPECT_EQ(t.stat_diffs.size(), kCategories.size());
    EXPECT_EQ(r.errors, 0);
    EXPECT_EQ(r.first_failure, -1);
  }
}

TEST(CompareStatisticTest, ADifferenceBeyondThePrintedDigitsIsStillAnError) {
  TempDir stats_dir, tensor_dir;
  const NanPropagatingStats exact = StatsOfValues();
  const DumpIndex tensors = WriteDump(tensor_dir, false, exact, kCategories);
  // Three units in the sixth digit: the printing explains at most half of one.
  NanPropagatingStats moved = exact;
  moved.min = -1.30975;
  const DumpIndex statistic = WriteDump(stats_dir, true, moved, kCategories);
  const CompareResult r = Compare(statistic, tensors);
  const TensorComparison& t = OnlyTensor(r);
  EXPECT_EQ(t.verdict, Verdict::kError);
  EXPECT_EQ(t.reason, "statistics differ: Min Value -1.30975 vs -1.30972");
  EXPECT_EQ(t.worst_statistic, "Min Value");
  EXPECT_EQ(r.errors, 1);
  EXPECT_EQ(r.first_failure, 0);

  // A count is printed exactly: one element more is an error.
  NanPropagatingStats counted = exact;
  counted.zero_count = 1;
  TempDir count_dir;
  const CompareResult c = Compare(WriteDump(count_dir, true, counted, kCategories), tensors);
  EXPECT_EQ(OnlyTensor(c).reason, "statistics differ: Zero Count 1 vs 0");

  // Two statistic dumps: each side's printing counts, a larger step does not pass.
  NanPropagatingStats large = exact;
  large.max = 123460;  // printed "123460", against "123457" (half a unit: 0.5 each side)
  TempDir large_dir, stats_again;
  const CompareResult l = Compare(WriteDump(large_dir, true, large, kCategories),
                                  WriteDump(stats_again, true, exact, kCategories));
  EXPECT_EQ(OnlyTensor(l).reason, "statistics differ: Max Value 123460 vs 123457");
  NanPropagatingStats rounding = exact;
  rounding.max = 123456.4;  // printed "123456": one unit from "123457", within both printings
  TempDir rounding_dir, stats_once_more;
  const CompareResult p = Compare(WriteDump(rounding_dir, true, rounding, kCategories),
                                  WriteDump(stats_once_more, true, exact, kCategories));
  EXPECT_EQ(OnlyTensor(p).verdict, Verdict::kPass) << OnlyTensor(p).reason;
}

// A one-kernel statistic dump whose statistic.csv has the statistic columns `titles` (after the
// fixed ones) with the cells `cells`.
DumpIndex StatisticCsvDump(const TempDir& dir, const std::string& titles,
                           const std::string& cells) {
  const std::string rank = dir.Sub("rank_0");
  std::filesystem::create_directories(rank + "/Net/0/0");
  testing::WriteFile(rank + "/Net/0/0/statistic.csv",
                     "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,"
                     "Shape," + titles + "\n"
                     "Relu,Default_Relu-op0,0,0,1700000000000010,output,0,32,float32,\"(8)\"," +
                         cells + "\n");
  auto index = IndexDump(dir.path());
  EXPECT_TRUE(index.ok()) << index.status().message();
  return std::move(index).value();
}

// Two statistic.csv files with their columns in other orders, each with one the other lacks:
// the columns are paired by title, listed in title order, and MD5 is never compared as a number.
TEST(CompareStatisticTest, ColumnsArePairedByTitleWhateverTheirOrder) {
  TempDir a_dir, b_dir;
  const DumpIndex a = StatisticCsvDump(a_dir, "Min Value,MD5,Max Value,Norm Guess,NaN Count",
                                       "0,aaaa,2,7,0");
  const DumpIndex b = StatisticCsvDump(b_dir, "Max Value,Zero Count,Norm Guess,MD5,Min Value",
                                       "2.5,1,7,bbbb,0");
  const CompareResult r = Compare(a, b);
  const TensorComparison& t = OnlyTensor(r);
  std::vector<std::string> titles;
  for (const auto& [title, diff] : t.stat_diffs) titles.emplace_back(title.view());
  // A title the catalogue does not know is compared as a number too.
  EXPECT_EQ(titles, (std::vector<std::string>{"Max Value", "Min Value", "Norm Guess"}));
  EXPECT_EQ(t.verdict, Verdict::kError);
  EXPECT_EQ(t.reason, "statistics differ: Max Value 2 vs 2.5");
  EXPECT_DOUBLE_EQ(t.stat_diffs[0].second, 0.5 / (2.5 + 2.220446049250313e-16));

  // The same MD5 on both sides: equal, whatever the other cells say.
  TempDir c_dir, d_dir;
  const DumpIndex c = StatisticCsvDump(c_dir, "MD5,Max Value", "abcd,1");
  const DumpIndex d = StatisticCsvDump(d_dir, "Max Value,MD5", "9,abcd");
  EXPECT_EQ(OnlyTensor(Compare(c, d)).reason, "statistics only: MD5 equal");

  // No statistic in common; a cell that is no number is left out.
  TempDir e_dir, f_dir;
  const DumpIndex e = StatisticCsvDump(e_dir, "Max Value,Min Value", "n/a,1");
  const DumpIndex f = StatisticCsvDump(f_dir, "Max Value,Avg Value", "3,1");
  const CompareResult nothing = Compare(e, f);
  const TensorComparison& none = OnlyTensor(nothing);
  EXPECT_EQ(none.verdict, Verdict::kWarning);
  EXPECT_EQ(none.reason, "no statistic column in common; nothing compared");
}

// Millions of comparisons name a few titles: each title's text is held once for the process.
TEST(StatisticTitleTest, EachTitleIsHeldOnce) {
  const std::string text = "Max Value";
  const StatisticTitle a(text), b("Max Value"), c("Min Value");
  EXPECT_EQ(a.view().data(), b.view().data());
  EXPECT_NE(a.view().data(), c.view().data());
  EXPECT_EQ(a, "Max Value");
  EXPECT_EQ(c.view(), "Min Value");
  EXPECT_TRUE(a < c);
}

}  // namespace
}  // namespace graphdump::analysis
