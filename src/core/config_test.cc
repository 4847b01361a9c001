#include "graphdump/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graphdump/ge_dialect.h"
#include "graphdump/statistic_catalogue.h"
#include "testing/testing.h"

#include "config_test_util.h"

namespace graphdump {
namespace {

using nlohmann::json;

TEST(ParseConfigTest, DefaultsOfAMinimalConfig) {
  ParsedConfig parsed = ParseOk(BaseConfig());
  const DumpConfig& c = parsed.config;
  EXPECT_TRUE(parsed.warnings.empty());
  EXPECT_EQ(c.dump_mode, 0u);
  EXPECT_EQ(c.path, "/tmp/dump");
  EXPECT_EQ(c.net_name, "Net");
  EXPECT_TRUE(c.iteration.all());
  EXPECT_EQ(c.saved_data, SavedData::kTensor);
  EXPECT_EQ(c.input_output, InputOutput::kBoth);
  EXPECT_TRUE(c.kernels.empty());
  EXPECT_EQ(c.support_device, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(c.statistic_category, (std::vector<StatCategory>{StatCategory::kMax, StatCategory::kMin,
                                                             StatCategory::kL2Norm}));
  EXPECT_EQ(c.op_debug_mode, 0u);
  EXPECT_EQ(c.overflow_number, 0u);
  EXPECT_EQ(c.initial_iteration, 0u);
  EXPECT_EQ(c.file_format, "npy");
  EXPECT_TRUE(c.enable);
  EXPECT_TRUE(c.trans_flag);
  EXPECT_EQ(c.stat_calc_mode, "host");
  EXPECT_EQ(c.device_stat_precision_mode, "high");
  EXPECT_EQ(c.sample_mode, 0u);
  EXPECT_EQ(c.sample_num, 100u);
  EXPECT_FALSE(c.save_kernel_args);
}

TEST(ParseConfigTest, EveryKeyAcceptsItsValidValues) {
  for (int mode : {0, 1, 2})
    EXPECT_EQ(ParseOk(WithCommon("dump_mode", mode)).config.dump_mode, mode);
  EXPECT_EQ(ParseOk(WithCommon("path", "/a/b_c-D9")).config.path, "/a/b_c-D9");
  EXPECT_EQ(ParseOk(WithCommon("net_name", "Res_Net-50")).config.net_name, "Res_Net-50");
  EXPECT_EQ(ParseOk(WithCommon("iteration", "0|5-8")).config.iteration.ToString(), "0|5-8");
  EXPECT_EQ(ParseOk(WithCommon("saved_data", "tensor")).config.saved_data, SavedData::kTensor);
  EXPECT_EQ(ParseOk(WithCommon("saved_data", "statistic")).config.saved_data,
            SavedData::kStatistic);
  EXPECT_EQ(ParseOk(WithCommon("saved_data", "full")).config.saved_data, SavedData::kFull);
  EXPECT_EQ(ParseOk(WithCommon("input_output", 1)).config.input_output, InputOutput::kInputs);
  EXPECT_EQ(ParseOk(WithCommon("input_output", 2)).config.input_output, InputOutput::kOutputs);
  EXPECT_EQ(ParseOk(WithCommon("support_device", json::array())).config.support_device.size(), 0u);
  EXPECT_EQ(ParseOk(WithCommon("support_device", {7, 4294967295u})).config.support_device,
            (std::vector<uint32_t>{7, 4294967295u}));
  EXPECT_EQ(ParseOk(WithCommon("op_debug_mode", 3)).config.op_debug_mode, 3u);
  EXPECT_EQ(ParseOk(WithCommon("op_debug_mode", 4)).config.op_debug_mode, 4u);
  EXPECT_EQ(
      ParseOk(WithCommon("initial_iteration", 18446744073709551615ull)).config.initial_iteration,
      18446744073709551615ull);
  EXPECT_EQ(ParseOk(WithCommon("file_format", "bin")).config.file_format, "bin");
  EXPECT_EQ(ParseOk(WithCommon("file_format", "npy")).config.file_format, "npy");
  EXPECT_FALSE(ParseOk(WithE2e("enable", false)).config.enable);
  EXPECT_FALSE(ParseOk(WithE2e("trans_flag", false)).config.trans_flag);
  EXPECT_TRUE(ParseOk(WithE2e("save_kernel_args", true)).config.save_kernel_args);
  EXPECT_EQ(ParseOk(WithE2e("device_stat_precision_mode", "low")).config.device_stat_precision_mode,
            "low");
  EXPECT_EQ(ParseOk(WithE2e("sample_mode", 1)).config.sample_mode, 1u);
  EXPECT_EQ(ParseOk(WithE2e("sample_num", 1)).config.sample_num, 1u);
  json stat = WithCommon("saved_data", "statistic");
  stat["e2e_dump_settings"]["stat_calc_mode"] = "device";
  EXPECT_EQ(ParseOk(stat).config.stat_calc_mode, "device");
}

TEST(ParseConfigTest, OverflowNumberWithOverflowMode) {
  json config = WithCommon("op_debug_mode", 3);
  config["common_dump_settings"]["overflow_number"] = 5;
  EXPECT_EQ(ParseOk(config).config.overflow_number, 5u);
}

TEST(ParseConfigTest, OverflowNumberZeroIsAcceptedWithAnyMode) {
  EXPECT_EQ(ParseOk(WithCommon("overflow_number", 0)).config.overflow_number, 0u);
  json config = WithCommon("op_debug_mode", 4);
  config["common_dump_settings"]["overflow_number"] = 1;
  EXPECT_NE(ParseError(config).find("overflow_number only need to be set when op_debug_mode is "
                                    "3, but op_debug_mode is 4"),
            std::string::npos);
}

TEST(ParseConfigTest, StatisticCategoryOrderAndDuplicatesKept) {
  ParsedConfig parsed =
      ParseOk(WithCommon("statistic_category", {"md5", "nan count", "max", "negative zero count",
                                                "positive inf count", "max"}));
  EXPECT_EQ(parsed.config.statistic_category,
            (std::vector<StatCategory>{StatCategory::kMd5, StatCategory::kNanCount,
                                       StatCategory::kMax, StatCategory::kNegativeZeroCount,
                                       StatCategory::kPositiveInfCount, StatCategory::kMax}));
}

struct BadValue {
  const char* section;
  const char* key;
  json value;
  const char* expected;  // a fragment the message must contain
};

TEST(ParseConfigTest, EveryInvalidValueIsRejectedWithItsKeyPath) {
  const std::vector<BadValue> cases = {
      {"common_dump_settings", "dump_mode", 3, "should be 0, 1 or 2, but got 3"},
      {"common_dump_settings", "dump_mode", -1, "should be unsigned int type, but got -1"},
      {"common_dump_settings", "dump_mode", 1.5, "should be unsigned int type, but got 1.5"},
      {"common_dump_settings", "dump_mode", "0", "should be unsigned int type, but got string"},
      {"common_dump_settings", "dump_mode", true, "unsigned int type"},
      {"common_dump_settings", "path", "relative/dir", "should start with '/'"},
      {"common_dump_settings", "path", "/tmp/a b", "only support alphabets, digit"},
      {"common_dump_settings", "path", "/tmp/a.b", "but got: \"/tmp/a.b\""},
      {"common_dump_settings", "path", 5, "should be string type"},
      {"common_dump_settings", "net_name", "", "net_name only supports alphabetic"},
      {"common_dump_settings", "net_name", "a/b", "but got: \"a/b\""},
      {"common_dump_settings", "net_name", json::array(), "should be string type"},
      {"common_dump_settings", "iteration", 0, "should be string type"},
      {"common_dump_settings", "iteration", "5-", "dangling '-'"},
      {"common_dump_settings", "iteration", "", "it is empty"},
      {"common_dump_settings", "saved_data", "tensors",
       "saved_data only supports statistic, tensor"},
      {"common_dump_settings", "saved_data", 1, "should be string type"},
      {"common_dump_settings", "input_output", 3, "input_output should be 0, 1, 2"},
      {"common_dump_settings", "input_output", -2, "unsigned int type"},
      {"common_dump_settings", "kernels", "Conv2D", "should be array type"},
      {"common_dump_settings", "support_device", 0, "should be array type"},
      {"common_dump_settings", "statistic_category", "max", "should be array type"},
      {"common_dump_settings",
       "statistic_category",
       {"max", "mean"},
       "The following statistic_category is invalid:'mean'"},
      {"common_dump_settings", "op_debug_mode", 5, "op_debug_mode should be 0, 3, 4"},
      {"common_dump_settings", "op_debug_mode", 0.0, "unsigned int type"},
      {"common_dump_settings", "initial_iteration", -1, "unsigned int type"},
      {"common_dump_settings", "file_format", "npz", "should be either 'npy' or 'bin'"},
      {"common_dump_settings", "overflow_number", 2, "only need to be set when op_debug_mode is 3"},
      {"e2e_dump_settings", "enable", "true", "should be boolean type"},
      {"e2e_dump_settings", "trans_flag", 1, "should be boolean type"},
      {"e2e_dump_settings", "save_kernel_args", nullptr, "should be boolean type"},
      {"e2e_dump_settings", "stat_calc_mode", "gpu", "only supports 'host' or 'device'"},
      {"e2e_dump_settings", "stat_calc_mode", false, "should be string type"},
      {"e2e_dump_settings", "device_stat_precision_mode", "medium",
       "only supports 'high' or 'low'"},
      {"e2e_dump_settings", "sample_mode", 2, "sample_mode should be 0, 1"},
      {"e2e_dump_settings", "sample_num", 0, "sample_num should be greater than 0"},
      {"e2e_dump_settings", "sample_num", -5, "unsigned int type"},
  };
  for (const BadValue& c : cases) {
    json config = BaseConfig();
    config[c.section][c.key] = c.value;
    const std::string message = ParseError(config);
    SCOPED_TRACE(std::string(c.section) + "." + c.key + " = " + c.value.dump());
    EXPECT_NE(message.find(std::string(c.section) + "." + c.key + ": "), std::string::npos)
        << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
  }
}

TEST(ParseConfigTest, BadArrayElementsNameTheirIndex) {
  EXPECT_NE(
      ParseError(WithCommon("support_device", {0, -1}))
          .find("common_dump_settings.support_device[1]: should be an unsigned int device id"),
      std::string::npos);
  EXPECT_NE(ParseError(WithCommon("support_device", {4294967296ull})).find("support_device[0]"),
            std::string::npos);
  EXPECT_NE(ParseError(WithCommon("kernels", {"Conv2D", 3}))
                .find("common_dump_settings.kernels[1]: should be string type, but got 3"),
            std::string::npos);
  EXPECT_NE(ParseError(WithCommon("statistic_category", {"max", 2}))
                .find("common_dump_settings.statistic_category[1]: should be string type"),
            std::string::npos);
}

TEST(ParseConfigTest, InvalidStatisticCategoryListsTheValidOnes) {
  const std::string message = ParseError(WithCommon("statistic_category", {"Max", "mean", "min"}));
  EXPECT_NE(message.find("invalid:'Max', 'mean'"), std::string::npos) << message;
  // The valid names are the catalogue's, in its order, as MindSpore prints a list.
  std::string valid;
  for (const StatisticInfo& info : StatisticCatalogue()) {
    valid += (valid.empty() ? "['" : ", '") + std::string(info.name) + "'";
  }
  EXPECT_EQ(valid.substr(0, 23), "['max', 'min', 'avg', '");
  EXPECT_NE(message.find(valid + "]"), std::string::npos) << message;
}

TEST(ParseConfigTest, RequiredKeysMissing) {
  for (const char* key :
       {"dump_mode", "net_name", "iteration", "input_output", "kernels", "support_device"}) {
    const std::string message = ParseError(WithoutCommon(key));
    EXPECT_NE(message.find(std::string("common_dump_settings.") + key + ": not found"),
              std::string::npos)
        << message;
  }
  json misspelled = WithoutCommon("iteration");
  misspelled["common_dump_settings"]["Iterations"] = "0";
  EXPECT_NE(ParseError(misspelled)
                .find("common_dump_settings.iteration: not found; this key is "
                      "required (\"all\" or ranges separated by '|', e.g. "
                      "\"0|5-8|100-120\"); the section has \"Iterations\": a "
                      "misspelling of \"iteration\"?"),
            std::string::npos)
      << ParseError(misspelled);
  const std::string message = ParseError(json::parse(R"({"e2e_dump_settings": {}})"));
  EXPECT_NE(message.find("common_dump_settings: not found"), std::string::npos) << message;
}

TEST(ParseConfigTest, ReportsEveryProblemInOnePass) {
  json config = json::parse(R"j({
    "common_dump_settings": {
      "dump_mode": 7, "path": "rel", "net_name": "a b", "iteration": "3-1|x",
      "input_output": 9, "kernels": ["name-regex(()"], "support_device": [-1],
      "statistic_category": ["bogus"], "op_debug_mode": 9, "file_format": "txt"
    },
    "e2e_dump_settings": {"enable": "yes", "sample_num": 0}
  })j");
  StatusOr<ParsedConfig> parsed = ParseConfig(config.dump(), "cfg.json", "");
  ASSERT_FALSE(parsed.ok());
  const std::vector<std::string> lines = Lines(parsed.status().message());
  const std::vector<std::string> expected_keys = {"common_dump_settings.dump_mode:",
                                                  "common_dump_settings.path:",
                                                  "common_dump_settings.net_name:",
                                                  "common_dump_settings.iteration:",
                                                  "common_dump_settings.iteration:",
                                                  "common_dump_settings.input_output:",
                                                  "common_dump_settings.kernels[0]:",
                                                  "common_dump_settings.support_device[0]:",
                                                  "common_dump_settings.statistic_category:",
                                                  "common_dump_settings.op_debug_mode:",
                                                  "common_dump_settings.file_format:",
                                                  "e2e_dump_settings.enable:",
                                                  "e2e_dump_settings.sample_num:"};
  ASSERT_EQ(lines.size(), expected_keys.size()) << parsed.status().message();
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].rfind("cfg.json: " + expected_keys[i], 0), 0u) << lines[i];
  }
}

TEST(ParseConfigTest, ControlCharactersInValuesAreEscapedInMessages) {
  json config = BaseConfig();
  config["common_dump_settings"]["net_name"] = std::string("N\0x", 3);
  StatusOr<ParsedConfig> parsed = ParseConfig(config.dump(), "c.json", "");
  ASSERT_FALSE(parsed.ok());
  const std::string m = parsed.status().message();
  EXPECT_NE(m.find("but got: \"N\\u0000x\""), std::string::npos) << m;
  EXPECT_EQ(m.find('\0'), std::string::npos);
  EXPECT_EQ(std::count(m.begin(), m.end(), '\n'), 0) << m;  // one error, on one line
  json key = BaseConfig();
  key["common_dump_settings"]["bad\nkey"] = 1;
  ParsedConfig warned = ParseOk(key);
  ASSERT_EQ(warned.warnings.size(), 1u);
  EXPECT_NE(warned.warnings[0].find("common_dump_settings.bad\\u000akey: unknown key"),
            std::string::npos)
      << warned.warnings[0];
}

TEST(ParseConfigTest, MalformedJson) {
  StatusOr<ParsedConfig> parsed = ParseConfig("{\"common_dump_settings\": ", "x.json", "");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("x.json: Parse dump json failed, error:"),
            std::string::npos);
  // Numbers beyond double's range throw out_of_range, not parse_error, from the JSON library.
  for (const char* text : {R"({"common_dump_settings": {"dump_mode": 1e400}})",
                           R"({"common_dump_settings": {"x": -1e999}})"}) {
    StatusOr<ParsedConfig> huge = ParseConfig(text, "h.json", "");
    ASSERT_FALSE(huge.ok()) << text;
    EXPECT_NE(huge.status().message().find("h.json: Parse dump json failed, error:"),
              std::string::npos)
        << huge.status().message();
    EXPECT_NE(huge.status().message().find("number overflow"), std::string::npos);
  }
  EXPECT_NE(ParseError(json::array()).find("should be a JSON object"), std::string::npos);
  json e2e = BaseConfig();
  e2e["e2e_dump_settings"] = true;
  EXPECT_NE(ParseError(e2e).find("e2e_dump_settings: should be an object"), std::string::npos);
}

// A value nested 100,000 deep: printing it in a message recursed once per level and overflowed
// the stack (SIGSEGV). The depth is refused before the document is parsed.
TEST(ParseConfigTest, DeepNestingIsAnErrorNotACrash) {
  const size_t depth = 100000;
  const std::string deep = std::string(depth, '[') + std::string(depth, ']');
  for (const std::string& value : {deep, std::string(depth, '{')}) {
    const std::string text = "{\"common_dump_settings\": {\"dump_mode\": 0,\n \"path\": " + value;
    StatusOr<ParsedConfig> parsed = ParseConfig(text, "deep.json", "");
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(),
              "deep.json: Parse dump json failed, error: arrays and objects nest deeper than 64 "
              "levels at line 2, column 72 (a dump configuration needs 3: the file, its "
              "sections and their arrays)");
    std::vector<std::string> warnings;
    StatusOr<GeDumpOptions> ge = ParseGeDumpOptions("{\"dump\": " + value, "ge.json", &warnings);
    ASSERT_FALSE(ge.ok());
    EXPECT_NE(ge.status().message().find("ge.json: Parse dump json failed, error: arrays and "
                                         "objects nest deeper than 64 levels at line 1, column 73"),
              std::string::npos)
        << ge.status().message();
    EXPECT_FALSE(IsGeDumpConfig("{\"dump\": " + value));
  }
  // Brackets inside strings do not count; 64 levels are accepted.
  json strings = WithCommon("net_name", std::string(1000, '['));
  EXPECT_NE(ParseError(strings).find("net_name only supports"), std::string::npos);
  json nested = json::array();
  for (int i = 0; i < 61; ++i) nested = json::array({nested});
  EXPECT_NE(ParseError(WithCommon("kernels", nested)).find("common_dump_settings.kernels[0]"),
            std::string::npos);
}

// net_name names a directory: over 255 bytes every write failed at run time (ENAMETOOLONG).
TEST(ParseConfigTest, NetNameLongerThanADirectoryNameIsAnError) {
  EXPECT_EQ(ParseOk(WithCommon("net_name", std::string(255, 'n'))).config.net_name.size(), 255u);
  const std::string message = ParseError(WithCommon("net_name", std::string(256, 'n')));
  EXPECT_EQ(message,
            "common_dump_settings.net_name: net_name is 256 bytes long, but it names a "
            "directory of the dump and a directory name can be at most 255 bytes: \"" +
                std::string(40, 'n') + "...\"");
}

TEST(ParseConfigTest, NonObjectSections) {
  json e2e = BaseConfig();
  e2e["e2e_dump_settings"] = true;
  EXPECT_NE(ParseError(e2e).find("e2e_dump_settings: should be an object"), std::string::npos);
}

TEST(ParseConfigTest, UnknownKeysWarnWithTheNearestKnownKey) {
  json config = BaseConfig();
  config["common_dump_settings"]["iterations"] = "1";
  config["common_dump_settings"]["Dump_Mod"] = 1;
  config["common_dump_settings"]["trans_flag"] = true;
  config["common_dump_settings"]["zzzzzzzzzzzzzz"] = 1;
  config["common_dump_settings"]["sampl_num"] = 5;
  config["e2e_dump_settings"]["enabled"] = true;
  config["common_dump_setting"] = json::object();
  config["async_dump_settings"] = json::object();
  config["net_name"] = "x";
  ParsedConfig parsed = ParseOk(config);
  EXPECT_TRUE(HasWarning(parsed,
                         "common_dump_settings.iterations: unknown key, ignored; did you mean "
                         "\"iteration\"?"));
  EXPECT_TRUE(HasWarning(parsed,
                         "common_dump_settings.Dump_Mod: unknown key, ignored; did you "
                         "mean \"dump_mode\"?"));
  EXPECT_TRUE(HasWarning(parsed,
                         "common_dump_settings.trans_flag: unknown key in "
                         "common_dump_settings, ignored; \"trans_flag\" belongs in "
                         "e2e_dump_settings"));
  EXPECT_TRUE(HasWarning(parsed,
                         "common_dump_settings.zzzzzzzzzzzzzz: unknown key, ignored; the "
                         "nearest known key is"));
  EXPECT_TRUE(HasWarning(parsed,
                         "common_dump_settings.sampl_num: unknown key, ignored; did you mean "
                         "\"sample_num\"? It belongs in e2e_dump_settings"));
  EXPECT_TRUE(HasWarning(parsed,
                         "e2e_dump_settings.enabled: unknown key, ignored; did you mean "
                         "\"enable\"?"));
  EXPECT_TRUE(HasWarning(parsed,
                         "common_dump_setting: unknown key, ignored; did you mean "
                         "\"common_dump_settings\"?"));
  EXPECT_TRUE(HasWarning(parsed, "async_dump_settings: ignored"));
  EXPECT_TRUE(HasWarning(parsed,
                         "net_name: unknown top-level key, ignored; \"net_name\" belongs "
                         "in common_dump_settings"));
  EXPECT_EQ(parsed.warnings.size(), 9u);
}

TEST(ParseConfigTest, OpDebugModeOneAndTwoMeanThree) {
  for (int mode : {1, 2}) {
    ParsedConfig parsed = ParseOk(WithCommon("op_debug_mode", mode));
    EXPECT_EQ(parsed.config.op_debug_mode, 3u);
    EXPECT_TRUE(HasWarning(parsed, "is reset to 3"));
  }
}

TEST(ParseConfigTest, OpDebugModeForcesDumpModeZeroAndBothSlots) {
  json config = WithCommon("op_debug_mode", 3);
  config["common_dump_settings"]["dump_mode"] = 1;
  config["common_dump_settings"]["input_output"] = 2;
  config["common_dump_settings"]["kernels"] = {"Conv2D"};
  ParsedConfig parsed = ParseOk(config);
  EXPECT_EQ(parsed.config.dump_mode, 0u);
  EXPECT_EQ(parsed.config.input_output, InputOutput::kBoth);
  EXPECT_TRUE(HasWarning(parsed,
                         "common_dump_settings.dump_mode: Overflow dump or exception dump "
                         "do not support specify kernels (op_debug_mode 3), the dump_mode "
                         "is set to 0"));
  EXPECT_TRUE(HasWarning(parsed,
                         "common_dump_settings.input_output: When the op_debug_mode is "
                         "set to 3"));
}

TEST(ParseConfigTest, ExceptionModeForcesIterationSampleModeAndSavedData) {
  json config = WithCommon("op_debug_mode", 4);
  config["common_dump_settings"]["iteration"] = "0|3";
  config["common_dump_settings"]["saved_data"] = "full";
  config["e2e_dump_settings"]["sample_mode"] = 1;
  ParsedConfig parsed = ParseOk(config);
  EXPECT_TRUE(parsed.config.iteration.all());
  EXPECT_EQ(parsed.config.saved_data, SavedData::kTensor);
  EXPECT_EQ(parsed.config.sample_mode, 0u);
  EXPECT_TRUE(HasWarning(parsed, "common_dump_settings.iteration: exception dump"));
  EXPECT_TRUE(HasWarning(parsed, "common_dump_settings.saved_data: exception dump"));
  EXPECT_TRUE(HasWarning(parsed, "e2e_dump_settings.sample_mode: exception dump"));
  EXPECT_EQ(parsed.warnings.size(), 3u);
}

TEST(ParseConfigTest, DeviceStatisticsOnlyForStatisticDumps) {
  json config = WithE2e("stat_calc_mode", "device");
  config["common_dump_settings"]["saved_data"] = "full";
  ParsedConfig parsed = ParseOk(config);
  EXPECT_EQ(parsed.config.stat_calc_mode, "host");
  EXPECT_TRUE(HasWarning(parsed, "forced to 'host'"));
}

TEST(ParseConfigTest, KernelsOutsideDumpModeOneWarn) {
  ParsedConfig parsed = ParseOk(WithCommon("kernels", {"Default/Conv-op12"}));
  EXPECT_EQ(parsed.config.kernels.size(), 1u);
  EXPECT_TRUE(HasWarning(parsed, "common_dump_settings.kernels: 1 entries are not used"));
}

TEST(ParseConfigTest, EmptyStatisticCategoryWarns) {
  ParsedConfig parsed = ParseOk(WithCommon("statistic_category", json::array()));
  EXPECT_TRUE(parsed.config.statistic_category.empty());
  EXPECT_TRUE(HasWarning(parsed, "statistic_category: the list is empty"));
}

TEST(ParseConfigTest, DuplicateSupportDeviceAndKernelWarn) {
  json config = WithCommon("support_device", {1, 1, 2});
  config["common_dump_settings"]["dump_mode"] = 1;
  config["common_dump_settings"]["kernels"] = {"conv", " conv "};
  ParsedConfig parsed = ParseOk(config);
  EXPECT_EQ(parsed.config.support_device, (std::vector<uint32_t>{1, 2}));
  EXPECT_TRUE(HasWarning(parsed, "support_device[1]: duplicate support device 1"));
  EXPECT_TRUE(HasWarning(parsed, "kernels[1]: duplicate dump kernel name \"conv\""));
}

// --- path and MS_DIAGNOSTIC_DATA_PATH ---

TEST(ConfigPathTest, MissingOrEmptyPathUsesDiagnosticDirectory) {
  for (const json& config : {WithoutCommon("path"), WithCommon("path", "")}) {
    StatusOr<ParsedConfig> parsed = Parse(config, "/var/diag");
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    EXPECT_EQ(parsed->config.path, "/var/diag/debug_dump");
  }
  StatusOr<ParsedConfig> slash = Parse(WithoutCommon("path"), "/var/diag//");
  ASSERT_TRUE(slash.ok());
  EXPECT_EQ(slash->config.path, "/var/diag/debug_dump");
}

TEST(ConfigPathTest, MissingPathWithoutDiagnosticDirectoryIsAnError) {
  const std::string message = ParseError(WithoutCommon("path"));
  EXPECT_NE(message.find("common_dump_settings.path: Dump path is empty. Please set it in dump "
                         "json file or environment variable `MS_DIAGNOSTIC_DATA_PATH`"),
            std::string::npos)
      << message;
}

TEST(ConfigPathTest, DiagnosticDirectoryIsValidatedToo) {
  const std::string message = ParseError(WithoutCommon("path"), "diag dir");
  EXPECT_NE(message.find("(from MS_DIAGNOSTIC_DATA_PATH=diag dir)"), std::string::npos) << message;
  EXPECT_NE(ParseError(WithoutCommon("path"), "rel").find("should start with '/'"),
            std::string::npos);
}

// --- kernels ---

}  // namespace
}  // namespace graphdump
