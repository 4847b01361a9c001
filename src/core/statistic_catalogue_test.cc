// Every core consumer of a statistic category iterates the statistic catalogue: a row added to
// it is accepted by the configuration, written to statistic.csv in its place, computed when
// requested, and cached apart from requests that compute less. Nothing here names a category.
#include "graphdump/statistic_catalogue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "graphdump/config.h"
#include "graphdump/internal/stats_cache.h"
#include "graphdump/stats.h"
#include "testing/testing.h"

namespace graphdump {
namespace {

std::vector<StatCategory> EveryCategory() {
  std::vector<StatCategory> all;
  for (const StatisticInfo& info : StatisticCatalogue()) all.push_back(info.category);
  return all;
}

// Values with every kind of element: negative, positive, zeros of both signs, +-inf and NaN
// (a NaN makes max, min, avg and l2norm NaN; the counts stay exact).
const std::vector<float> kMixed = {-2.5f, 0.0f, -0.0f, 3.0f, 1e30f * 1e30f, -1e30f * 1e30f,
                                   std::nanf(""), 7.25f, -1.0f};

TEST(StatisticCatalogueTest, RowsFollowTheEnumAndNamesAreUnique) {
  std::set<std::string> names, titles;
  size_t i = 0;
  for (const StatisticInfo& info : StatisticCatalogue()) {
    EXPECT_EQ(static_cast<size_t>(info.category), i++) << info.name;
    EXPECT_EQ(&StatisticOf(info.category), &info);
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_TRUE(titles.insert(info.title).second) << info.title;
    EXPECT_EQ(FindStatisticByName(info.name), &info);
    EXPECT_EQ(FindStatisticByTitle(info.title), &info);
    EXPECT_STREQ(StatCategoryName(info.category), info.name);
    EXPECT_STREQ(StatCategoryColumn(info.category), info.title);
    // A digest is text; every other row has a number, which is what analysis compares.
    EXPECT_EQ(info.value == nullptr, info.format == StatFormat::kDigest) << info.name;
    if (info.comparable) {
      EXPECT_NE(info.value, nullptr) << info.name;
    }
  }
  EXPECT_EQ(FindStatisticByName("no such statistic"), nullptr);
  EXPECT_EQ(FindStatisticByTitle("max"), nullptr);  // a name is not a title
}

TEST(StatisticCatalogueTest, TheConfigurationAcceptsEveryNameInItsOrder) {
  nlohmann::json config = nlohmann::json::parse(R"({
    "common_dump_settings": {
      "dump_mode": 0, "path": "/tmp/dump", "net_name": "Net", "iteration": "all",
      "input_output": 0, "kernels": [], "support_device": []
    }
  })");
  // Reversed, so the order kept is the configuration's and not the catalogue's.
  std::vector<StatCategory> reversed = EveryCategory();
  std::reverse(reversed.begin(), reversed.end());
  for (StatCategory category : reversed) {
    config["common_dump_settings"]["statistic_category"].push_back(StatCategoryName(category));
  }
  StatusOr<ParsedConfig> parsed = ParseConfig(config.dump(), "", "");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->config.statistic_category, reversed);
  // check-config's JSON names them again the same way, and reads back to the same list.
  StatusOr<ParsedConfig> again = ParseConfig(ConfigToJson(parsed->config), "", "");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->config.statistic_category, reversed);

  // A wrong name is refused with every catalogue name listed as allowed.
  config["common_dump_settings"]["statistic_category"] = {"maxx"};
  StatusOr<ParsedConfig> bad = ParseConfig(config.dump(), "", "");
  ASSERT_FALSE(bad.ok());
  for (const StatisticInfo& info : StatisticCatalogue()) {
    EXPECT_NE(bad.status().message().find("'" + std::string(info.name) + "'"), std::string::npos)
        << info.name << " missing from: " << bad.status().message();
  }
}

TEST(StatisticCatalogueTest, StatisticCsvHasEveryTitleAndValueInTheOrderAsked) {
  const std::vector<StatCategory> all = EveryCategory();
  std::string titles;
  for (const StatisticInfo& info : StatisticCatalogue()) titles += std::string(",") + info.title;
  const std::string header = StatisticCsvHeader(all);
  ASSERT_GE(header.size(), titles.size() + 1);
  EXPECT_EQ(header.substr(header.size() - titles.size() - 1), titles + "\n");

  const NanPropagatingStats stats =
      ComputeStats(DType::kFloat32, kMixed.data(), static_cast<int64_t>(kMixed.size()), true);
  StatRowInfo row_info;
  row_info.shape = {static_cast<int64_t>(kMixed.size())};
  const std::string row = StatisticCsvRow(row_info, stats, all);
  std::string values;
  for (const StatisticInfo& info : StatisticCatalogue()) {
    values += StatisticText(info, stats) + ",";
  }
  ASSERT_GE(row.size(), values.size() + 1);
  EXPECT_EQ(row.substr(row.size() - values.size() - 1), values + "\n");
  // Each category alone: its own column and value.
  for (const StatisticInfo& info : StatisticCatalogue()) {
    EXPECT_EQ(StatisticCsvHeader({info.category}).find(std::string(",") + info.title + "\n") !=
                  std::string::npos,
              true)
        << info.name;
    const std::string one = StatisticCsvRow(row_info, stats, {info.category});
    EXPECT_EQ(one.substr(one.size() - StatisticText(info, stats).size() - 2),
              StatisticText(info, stats) + ",\n")
        << info.name;
  }
}

TEST(StatisticCatalogueTest, ARequestForOneCategoryComputesIt) {
  const int64_t n = static_cast<int64_t>(kMixed.size());
  const NanPropagatingStats full = ComputeStats(DType::kFloat32, kMixed.data(), n, true);
  for (const StatisticInfo& info : StatisticCatalogue()) {
    const StatsRequest request = StatsRequest::For({info.category});
    // The request asks for the row's pass and nothing else.
    StatsRequest expected{.counts = false, .md5 = false};
    if (info.needs != nullptr) expected.*info.needs = true;
    EXPECT_EQ(request, expected) << info.name;
    const NanPropagatingStats alone = ComputeStats(DType::kFloat32, kMixed.data(), n, request);
    EXPECT_EQ(StatisticText(info, alone), StatisticText(info, full)) << info.name;
    // The cache keeps a request that computes this row apart from one that does not.
    if (info.needs != nullptr) {
      StatsCache cache;
      TensorView view = testing::MakeView(DType::kFloat32, {n}, {}, kMixed.data());
      view.origin.storage = std::make_shared<int>(0);
      view.origin.version = 1;
      const StatsRequest without{.counts = false, .md5 = false};
      cache.Insert(view, without, full);
      EXPECT_EQ(cache.Find(view, request), nullptr) << info.name;
    }
  }
}

}  // namespace
}  // namespace graphdump
