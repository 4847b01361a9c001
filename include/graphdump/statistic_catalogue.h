// The statistic catalogue: one row per statistic category of statistic.csv (docs/configuration.md,
// `statistic_category`; docs/file-format.md, the statistic columns). Configuration validation,
// the statistics request, the statistics cache, statistic.csv writing, and the analysis tools
// (compare, watch, report, the Python package) read a category's names, column title, cost and
// use from here instead of spelling them again. A new category is its StatCategory value and its
// row (statistic_catalogue.cc), its accumulation (NanPropagatingStats, stats.h) and its words in
// docs/file-format.md and docs/configuration.md.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace graphdump {

// One statistic column of statistic.csv, in the order of docs/file-format.md's column list (the
// order of the catalogue's rows).
enum class StatCategory {
  kMax, kMin, kAvg, kCount, kNegativeZeroCount, kPositiveZeroCount, kNanCount,
  kNegativeInfCount, kPositiveInfCount, kZeroCount, kMd5, kL2Norm,
};

struct NanPropagatingStats;
struct StatsRequest;

// How statistic.csv prints a category's value.
enum class StatFormat {
  kValue,   // FormatStatValue: 6 significant digits, "nan", "inf"
  kCount,   // an integer: exact
  kDigest,  // the md5's lower-case hex digits (NanPropagatingStats::md5)
};

struct StatisticInfo {
  StatCategory category;
  const char* name;   // the configuration's spelling: "nan count"
  const char* title;  // the statistic.csv column title: "NaN Count"
  // The StatsRequest member (a pass over the data) that computes it; null when every request
  // computes it (count, max, min, avg and l2norm come from one cheap pass).
  bool StatsRequest::*needs;
  StatFormat format;
  // Its value from computed statistics; null for kDigest.
  double (*value)(const NanPropagatingStats&);
  // Whether the analysis tools compare it between two dumps and read it as a number (not md5:
  // the bytes' hash changes with any change and says nothing of how far apart values are).
  bool comparable;
};

// Every row, in the order of StatCategory: docs/file-format.md's column list.
std::span<const StatisticInfo> StatisticCatalogue();

// The row of `category`.
const StatisticInfo& StatisticOf(StatCategory category);

// The row whose configuration name (FindStatisticByName) or column title (FindStatisticByTitle)
// is exactly `text`, or null.
const StatisticInfo* FindStatisticByName(std::string_view text);
const StatisticInfo* FindStatisticByTitle(std::string_view text);

// StatCategoryColumn and StatCategoryName (config.h) read the row too.

// A category's value in `stats` as statistic.csv prints it.
std::string StatisticText(const StatisticInfo& info, const NanPropagatingStats& stats);

}  // namespace graphdump
