// The configuration's values on their own: kernel entries, iteration sets, statistic categories,
// and the configuration written back as JSON.
#include "graphdump/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "graphdump/statistic_catalogue.h"
#include "testing/testing.h"
#include "config_test_util.h"

namespace graphdump {
namespace {

using nlohmann::json;

TEST(KernelEntryTest, Classification) {
  json config = WithCommon("dump_mode", 1);
  config["common_dump_settings"]["kernels"] = {"Default/Conv-op12",
                                               "Conv2D",
                                               "\"Relu\"",
                                               "  ",
                                               "",
                                               "conv2d-op3",
                                               " Max Pool ",
                                               "name-regex(Default/.+-op\\d+)",
                                               "name-regex(a b)"};
  ParsedConfig parsed = ParseOk(config);
  const std::vector<KernelPattern>& k = parsed.config.kernels;
  ASSERT_EQ(k.size(), 7u);
  EXPECT_EQ(k[0].kind, KernelPattern::Kind::kFullName);
  EXPECT_EQ(k[0].pattern, "Default/Conv-op12");
  EXPECT_EQ(k[1].kind, KernelPattern::Kind::kOpType);
  EXPECT_EQ(k[1].text, "Conv2D");
  EXPECT_EQ(k[1].pattern, "conv2d");
  EXPECT_EQ(k[2].kind, KernelPattern::Kind::kOpType);
  EXPECT_EQ(k[2].text, "Relu");
  EXPECT_EQ(k[3].kind, KernelPattern::Kind::kFullName);
  EXPECT_EQ(k[3].pattern, "conv2d-op3");
  EXPECT_EQ(k[4].text, "MaxPool");
  EXPECT_EQ(k[4].pattern, "maxpool");
  EXPECT_EQ(k[5].kind, KernelPattern::Kind::kRegex);
  // The JSON-decoded string, one backslash (MindSpore would double it).
  EXPECT_EQ(k[5].pattern, "Default/.+-op\\d+");
  EXPECT_EQ(k[6].kind, KernelPattern::Kind::kRegex);
  EXPECT_EQ(k[6].pattern, "ab");
}

TEST(KernelEntryTest, InvalidRegexNamesEntryAndRe2Message) {
  const std::string message = ParseError(WithCommon("kernels", {"conv", "name-regex(a(b)"}));
  EXPECT_NE(message.find("common_dump_settings.kernels[1]: \"name-regex(a(b)\" has an invalid "
                         "regular expression \"a(b\": missing ): a(b"),
            std::string::npos)
      << message;
}

TEST(KernelEntryTest, UnclosedRegexPrefix) {
  const std::string message = ParseError(WithCommon("kernels", {"name-regex(conv"}));
  EXPECT_NE(message.find("kernels[0]: \"name-regex(conv\" starts with \"name-regex(\" but does "
                         "not end with ')'"),
            std::string::npos)
      << message;
}

// --- ConfigToJson ---

TEST(ConfigToJsonTest, EveryKeyInTableOrderAndRoundTrip) {
  json config = WithCommon("dump_mode", 1);
  config["common_dump_settings"]["kernels"] = {"Conv2D", "name-regex(.*relu.*)"};
  config["common_dump_settings"]["iteration"] = "8 | 0 | 1-3";
  config["common_dump_settings"]["statistic_category"] = {"md5", "max"};
  config["e2e_dump_settings"]["sample_mode"] = 1;
  ParsedConfig parsed = ParseOk(config);
  const std::string text = ConfigToJson(parsed.config);
  nlohmann::ordered_json out = nlohmann::ordered_json::parse(text);
  std::vector<std::string> common_keys;
  for (const auto& [key, value] : out["common_dump_settings"].items()) common_keys.push_back(key);
  EXPECT_EQ(common_keys,
            (std::vector<std::string>{"dump_mode", "path", "net_name", "iteration", "saved_data",
                                      "input_output", "kernels", "support_device",
                                      "statistic_category", "op_debug_mode", "overflow_number",
                                      "initial_iteration", "file_format"}));
  std::vector<std::string> e2e_keys;
  for (const auto& [key, value] : out["e2e_dump_settings"].items()) e2e_keys.push_back(key);
  EXPECT_EQ(e2e_keys, (std::vector<std::string>{"enable", "trans_flag", "stat_calc_mode",
                                                "device_stat_precision_mode", "sample_mode",
                                                "sample_num", "save_kernel_args"}));
  EXPECT_EQ(out["common_dump_settings"]["iteration"], "0-3|8");
  // ordered_json on both sides: clang finds json against ordered_json ambiguous.
  using Ordered = nlohmann::ordered_json;
  EXPECT_EQ(out["common_dump_settings"]["kernels"], Ordered({"Conv2D", "name-regex(.*relu.*)"}));
  EXPECT_EQ(out["common_dump_settings"]["statistic_category"], Ordered({"md5", "max"}));
  EXPECT_EQ(out["e2e_dump_settings"]["sample_num"], 100);
  EXPECT_EQ(out["e2e_dump_settings"]["enable"], true);

  StatusOr<ParsedConfig> again = ParseConfig(text, "", "");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(ConfigToJson(again->config), text);
}

TEST(StatCategoryTest, NamesAndColumns) {
  EXPECT_STREQ(StatCategoryName(StatCategory::kNanCount), "nan count");
  EXPECT_STREQ(StatCategoryColumn(StatCategory::kNanCount), "NaN Count");
  EXPECT_STREQ(StatCategoryColumn(StatCategory::kMax), "Max Value");
  EXPECT_STREQ(StatCategoryColumn(StatCategory::kMin), "Min Value");
  EXPECT_STREQ(StatCategoryColumn(StatCategory::kAvg), "Avg Value");
  EXPECT_STREQ(StatCategoryColumn(StatCategory::kCount), "Count");
  EXPECT_STREQ(StatCategoryColumn(StatCategory::kNegativeZeroCount), "Negative Zero Count");
  EXPECT_STREQ(StatCategoryColumn(StatCategory::kPositiveZeroCount), "Positive Zero Count");
  EXPECT_STREQ(StatCategoryColumn(StatCategory::kNegativeInfCount), "Negative Inf Count");
  EXPECT_STREQ(StatCategoryColumn(StatCategory::kPositiveInfCount), "Positive Inf Count");
  EXPECT_STREQ(StatCategoryColumn(StatCategory::kZeroCount), "Zero Count");
  EXPECT_STREQ(StatCategoryColumn(StatCategory::kMd5), "MD5");
  EXPECT_STREQ(StatCategoryColumn(StatCategory::kL2Norm), "L2Norm Value");
  EXPECT_STREQ(StatCategoryName(StatCategory::kL2Norm), "l2norm");
  EXPECT_STREQ(StatCategoryName(StatCategory::kPositiveInfCount), "positive inf count");
}

// --- iteration grammar ---

TEST(IterationSetTest, AllAndRanges) {
  StatusOr<IterationSet> all = IterationSet::Parse("all", "k");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->all());
  EXPECT_TRUE(all->Contains(0));
  EXPECT_TRUE(all->Contains(18446744073709551615ull));
  EXPECT_EQ(all->ToString(), "all");

  StatusOr<IterationSet> set = IterationSet::Parse("0|5-8|100-120", "k");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_FALSE(set->all());
  for (uint64_t i : {0, 5, 6, 8, 100, 120}) EXPECT_TRUE(set->Contains(i)) << i;
  for (uint64_t i : {1, 4, 9, 99, 121, 1000}) EXPECT_FALSE(set->Contains(i)) << i;
  EXPECT_EQ(set->ToString(), "0|5-8|100-120");
}

TEST(IterationSetTest, SpacesAroundBarsAndDashes) {
  StatusOr<IterationSet> set = IterationSet::Parse(" 0 | 5 - 8 | 100-120 ", "k");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->ToString(), "0|5-8|100-120");
  StatusOr<IterationSet> all = IterationSet::Parse(" all ", "k");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->all());
}

TEST(IterationSetTest, CanonicalFormSortsAndMerges) {
  StatusOr<IterationSet> set = IterationSet::Parse("9|3-5|4-6|0|1|7|007", "k");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->ToString(), "0-1|3-7|9");
  EXPECT_EQ(set->ranges().size(), 3u);
  EXPECT_FALSE(set->Contains(2));
  EXPECT_FALSE(set->Contains(8));
  StatusOr<IterationSet> max = IterationSet::Parse("18446744073709551615", "k");
  ASSERT_TRUE(max.ok()) << max.status().message();
  EXPECT_TRUE(max->Contains(18446744073709551615ull));
  EXPECT_FALSE(max->Contains(0));
}

TEST(IterationSetTest, ErrorsNameKeyAndSegment) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"8-5", "segment \"8-5\" is a reversed range (8 > 5; write 5-8)"},
      {"1||3", "segment \"\" is empty"},
      {"|1", "segment \"\" is empty"},
      {"1|", "segment \"\" is empty"},
      {"5-", "segment \"5-\" has a dangling '-'"},
      {"-5", "segment \"-5\" has a dangling '-'"},
      {"1-2-3", "segment \"1-2-3\" has more than one '-'"},
      {"1a", "segment \"1a\" is not a non-negative integer"},
      {"all|1", "segment \"all\" is not a non-negative integer"},
      {"1-x", "segment \"1-x\" has \"x\", which is not a non-negative integer"},
      {"+1", "is not a non-negative integer"},
      {"1 2", "is not a non-negative integer"},
      {"18446744073709551616", "is above 2^64-1"},
      {"0-99999999999999999999", "has \"99999999999999999999\", which is above 2^64-1"},
      {"", "it is empty"},
      {"   ", "it is empty"},
  };
  for (const auto& [text, expected] : cases) {
    StatusOr<IterationSet> set = IterationSet::Parse(text, "common_dump_settings.iteration");
    ASSERT_FALSE(set.ok()) << text;
    EXPECT_EQ(set.status().code(), StatusCode::kInvalidArgument);
    const std::string message = set.status().message();
    EXPECT_EQ(message.rfind("common_dump_settings.iteration: \"" + text + "\"", 0), 0u) << message;
    EXPECT_NE(message.find(expected), std::string::npos) << message;
    EXPECT_NE(message.find("allowed: \"all\""), std::string::npos) << message;
  }
}

TEST(IterationSetTest, EveryBadSegmentIsReported) {
  StatusOr<IterationSet> set = IterationSet::Parse("3-1|x|4", "it");
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(Lines(set.status().message()).size(), 2u) << set.status().message();
}

// --- files and environment ---

}  // namespace
}  // namespace graphdump
