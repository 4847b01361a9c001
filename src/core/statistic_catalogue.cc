// The statistic catalogue's rows (statistic_catalogue.h) and what is read from them: look-ups,
// a value's statistic.csv text, and the StatsRequest of a list of categories.
#include "graphdump/statistic_catalogue.h"

#include <string>

#include "graphdump/stats.h"

namespace graphdump {
namespace {

using S = NanPropagatingStats;
constexpr auto kValue = StatFormat::kValue;
constexpr auto kCount = StatFormat::kCount;

// In the order of StatCategory (checked by StatisticOf's test).
constexpr StatisticInfo kCatalogue[] = {
    {StatCategory::kMax, "max", "Max Value", nullptr, kValue,
     [](const S& s) { return s.max; }, true},
    {StatCategory::kMin, "min", "Min Value", nullptr, kValue,
     [](const S& s) { return s.min; }, true},
    {StatCategory::kAvg, "avg", "Avg Value", nullptr, kValue,
     [](const S& s) { return s.avg; }, true},
    {StatCategory::kCount, "count", "Count", nullptr, kCount,
     [](const S& s) { return static_cast<double>(s.count); }, true},
    {StatCategory::kNegativeZeroCount, "negative zero count", "Negative Zero Count",
     &StatsRequest::counts, kCount,
     [](const S& s) { return static_cast<double>(s.negative_count); }, true},
    {StatCategory::kPositiveZeroCount, "positive zero count", "Positive Zero Count",
     &StatsRequest::counts, kCount,
     [](const S& s) { return static_cast<double>(s.positive_count); }, true},
    {StatCategory::kNanCount, "nan count", "NaN Count", &StatsRequest::counts, kCount,
     [](const S& s) { return static_cast<double>(s.nan_count); }, true},
    {StatCategory::kNegativeInfCount, "negative inf count", "Negative Inf Count",
     &StatsRequest::counts, kCount,
     [](const S& s) { return static_cast<double>(s.negative_inf_count); }, true},
    {StatCategory::kPositiveInfCount, "positive inf count", "Positive Inf Count",
     &StatsRequest::counts, kCount,
     [](const S& s) { return static_cast<double>(s.positive_inf_count); }, true},
    {StatCategory::kZeroCount, "zero count", "Zero Count", &StatsRequest::counts, kCount,
     [](const S& s) { return static_cast<double>(s.zero_count); }, true},
    {StatCategory::kMd5, "md5", "MD5", &StatsRequest::md5, StatFormat::kDigest, nullptr, false},
    {StatCategory::kL2Norm, "l2norm", "L2Norm Value", nullptr, kValue,
     [](const S& s) { return s.l2norm; }, true},
};

}  // namespace

std::span<const StatisticInfo> StatisticCatalogue() { return kCatalogue; }

const StatisticInfo& StatisticOf(StatCategory category) {
  return kCatalogue[static_cast<size_t>(category)];
}

const StatisticInfo* FindStatisticByName(std::string_view text) {
  for (const StatisticInfo& info : kCatalogue) {
    if (text == info.name) return &info;
  }
  return nullptr;
}

const StatisticInfo* FindStatisticByTitle(std::string_view text) {
  // Compared by first character before the whole title (a lookup per statistic.csv cell in
  // compare).
  for (const StatisticInfo& info : kCatalogue) {
    if (!text.empty() && info.title[0] == text[0] && text == info.title) return &info;
  }
  return nullptr;
}

const char* StatCategoryColumn(StatCategory category) { return StatisticOf(category).title; }

const char* StatCategoryName(StatCategory category) { return StatisticOf(category).name; }

std::string StatisticText(const StatisticInfo& info, const NanPropagatingStats& stats) {
  switch (info.format) {
    case StatFormat::kValue:
      return FormatStatValue(info.value(stats));
    case StatFormat::kCount:
      return std::to_string(static_cast<uint64_t>(info.value(stats)));
    case StatFormat::kDigest:
      return stats.md5;
  }
  return std::string();
}

StatsRequest StatsRequest::For(const std::vector<StatCategory>& categories) {
  StatsRequest request{.counts = false, .md5 = false};
  for (StatCategory category : categories) {
    if (bool StatsRequest::*needs = StatisticOf(category).needs) request.*needs = true;
  }
  return request;
}

}  // namespace graphdump
