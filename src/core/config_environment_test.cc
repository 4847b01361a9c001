// Where the configuration comes from: MINDSPORE_DUMP_CONFIG, GRAPHDUMP_CONFIG and the files they
// name.
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

class ConfigEnvironmentTest : public ::testing::Test {
 protected:
  void SetUp() override { Clear(); }
  void TearDown() override { Clear(); }
  static void Clear() {
    unsetenv(kConfigEnv);
    unsetenv(kMindSporeConfigEnv);
    unsetenv(kDiagnosticPathEnv);
  }
  std::string WriteConfig(const std::string& name, const json& config) {
    const std::string path = dir_.Sub(name);
    testing::WriteFile(path, config.dump(2));
    return path;
  }
  testing::TempDir dir_;
};

TEST_F(ConfigEnvironmentTest, LoadConfigFileKeepsBytesAndName) {
  const std::string text =
      "{\"common_dump_settings\": {\"dump_mode\": 0, \"path\": \"/d\",\n"
      "  \"net_name\": \"N\", \"iteration\": \"1\", \"input_output\": 0,\n"
      "  \"kernels\": [], \"support_device\": []}}  \n";
  const std::string path = dir_.Sub("data_dump.json");
  testing::WriteFile(path, text);
  StatusOr<ParsedConfig> parsed = LoadConfigFile(path, "");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->config.source_bytes, text);
  EXPECT_EQ(parsed->config.source_file, path);
}

TEST_F(ConfigEnvironmentTest, LoadConfigFileErrors) {
  StatusOr<ParsedConfig> missing = LoadConfigFile(dir_.Sub("nope.json"), "");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.json: the dump config file does not exist"),
            std::string::npos);

  const std::string txt = WriteConfig("config.txt", BaseConfig());
  StatusOr<ParsedConfig> suffix = LoadConfigFile(txt, "");
  ASSERT_FALSE(suffix.ok());
  EXPECT_NE(suffix.status().message().find("suffix only supports json! But got:\".txt\""),
            std::string::npos);

  const std::string bad = WriteConfig("bad.json", WithCommon("dump_mode", 9));
  StatusOr<ParsedConfig> invalid = LoadConfigFile(bad, "");
  ASSERT_FALSE(invalid.ok());
  EXPECT_NE(invalid.status().message().find(bad + ": common_dump_settings.dump_mode:"),
            std::string::npos)
      << invalid.status().message();
}

TEST_F(ConfigEnvironmentTest, NeitherVariableMeansDumpingOff) {
  StatusOr<std::unique_ptr<ParsedConfig>> loaded = LoadConfigFromEnvironment();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(*loaded, nullptr);
  setenv(kConfigEnv, "", 1);
  loaded = LoadConfigFromEnvironment();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(*loaded, nullptr);
}

TEST_F(ConfigEnvironmentTest, MindSporeVariableAlone) {
  setenv(kMindSporeConfigEnv, WriteConfig("ms.json", WithCommon("net_name", "Ms")).c_str(), 1);
  StatusOr<std::unique_ptr<ParsedConfig>> loaded = LoadConfigFromEnvironment();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ASSERT_NE(*loaded, nullptr);
  EXPECT_EQ((*loaded)->config.net_name, "Ms");
  EXPECT_TRUE((*loaded)->warnings.empty());
}

TEST_F(ConfigEnvironmentTest, GraphdumpVariableWinsWithAWarning) {
  setenv(kMindSporeConfigEnv, WriteConfig("ms.json", WithCommon("net_name", "Ms")).c_str(), 1);
  setenv(kConfigEnv, WriteConfig("gd.json", WithCommon("net_name", "Gd")).c_str(), 1);
  StatusOr<std::unique_ptr<ParsedConfig>> loaded = LoadConfigFromEnvironment();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ASSERT_NE(*loaded, nullptr);
  EXPECT_EQ((*loaded)->config.net_name, "Gd");
  ASSERT_EQ((*loaded)->warnings.size(), 1u);
  EXPECT_NE((*loaded)->warnings[0].find("are both set; using GRAPHDUMP_CONFIG"), std::string::npos);
}

TEST_F(ConfigEnvironmentTest, DiagnosticPathReadFromEnvironment) {
  setenv(kConfigEnv, WriteConfig("gd.json", WithoutCommon("path")).c_str(), 1);
  StatusOr<std::unique_ptr<ParsedConfig>> loaded = LoadConfigFromEnvironment();
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("Dump path is empty"), std::string::npos);
  setenv(kDiagnosticPathEnv, "/diag", 1);
  loaded = LoadConfigFromEnvironment();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ((*loaded)->config.path, "/diag/debug_dump");
}

TEST_F(ConfigEnvironmentTest, MissingFileNamesTheVariable) {
  setenv(kMindSporeConfigEnv, dir_.Sub("absent.json").c_str(), 1);
  StatusOr<std::unique_ptr<ParsedConfig>> loaded = LoadConfigFromEnvironment();
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kNotFound);
  EXPECT_NE(loaded.status().message().find("dump config named by MINDSPORE_DUMP_CONFIG: "),
            std::string::npos);
}

}  // namespace
}  // namespace graphdump
