#include "graphdump/ge_dialect.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>

#include "testing/testing.h"

namespace graphdump {
namespace {

TEST(GeDialect, ParsesTheTfAdapterOptions) {
  const std::string text = R"({"dump": {"enable_dump": "true", "dump_path": "/tmp/ge_dump/",
      "dump_step": "0|5|10", "dump_mode": "all",
      "dump_layer": "conv1  Default/net-Net/fc-Dense/MatMul-op7"}})";
  ASSERT_TRUE(IsGeDumpConfig(text));
  StatusOr<std::unique_ptr<ParsedConfig>> parsed = ParseGeDumpConfig(text, "ge.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_NE(parsed->get(), nullptr);
  const DumpConfig& config = (*parsed)->config;
  EXPECT_TRUE(config.ge_layout);
  EXPECT_EQ(config.file_format, "bin");
  EXPECT_EQ(config.path, "/tmp/ge_dump");
  EXPECT_TRUE(config.iteration.Contains(5));
  EXPECT_FALSE(config.iteration.Contains(6));
  EXPECT_EQ(config.input_output, InputOutput::kBoth);
  EXPECT_EQ(config.dump_mode, 1u);
  ASSERT_EQ(config.kernels.size(), 2u);
  EXPECT_EQ(config.kernels[0].kind, KernelPattern::Kind::kRegex);
  EXPECT_EQ(config.kernels[0].text, "conv1");
  EXPECT_EQ(config.kernels[0].pattern, "(?:.*/)?conv1");
  EXPECT_EQ(config.kernels[1].pattern, "(?:.*/)?Default\\/net\\-Net\\/fc\\-Dense\\/MatMul\\-op7");
  EXPECT_EQ(config.source_bytes, text);
}

TEST(GeDialect, DefaultsAndDisabled) {
  StatusOr<std::unique_ptr<ParsedConfig>> off =
      ParseGeDumpConfig(R"({"dump": {"enable_dump": false, "dump_path": "/x"}})", "ge.json");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->get(), nullptr);

  StatusOr<std::unique_ptr<ParsedConfig>> on =
      ParseGeDumpConfig(R"({"dump": {"enable_dump": true, "dump_path": "rel/dir"}})", "ge.json");
  ASSERT_TRUE(on.ok()) << on.status().message();
  const DumpConfig& config = (*on)->config;
  EXPECT_EQ(config.input_output, InputOutput::kOutputs);  // the TF adapter's default
  EXPECT_EQ(config.dump_mode, 0u);
  EXPECT_TRUE(config.iteration.Contains(12345));
  EXPECT_EQ(config.path, (std::filesystem::current_path() / "rel/dir").string());
}

TEST(GeDialect, ErrorsNameTheKey) {
  auto message = [](const std::string& text) {
    StatusOr<std::unique_ptr<ParsedConfig>> parsed = ParseGeDumpConfig(text, "ge.json");
    EXPECT_FALSE(parsed.ok());
    return parsed.ok() ? std::string() : parsed.status().message();
  };
  std::string m =
      message(R"({"dump": {"enable_dump": true, "dump_path": "/x", "dump_mode": "both"}})");
  EXPECT_NE(m.find("ge.json: dump.dump_mode: \"both\"; allowed: \"input\", \"output\", \"all\""),
            std::string::npos)
      << m;
  m = message(R"({"dump": {"enable_dump": true}})");
  EXPECT_NE(m.find("dump.dump_path: missing"), std::string::npos) << m;
  m = message(R"({"dump": {"enable_dump": "yes", "dump_path": "/x"}})");
  EXPECT_NE(m.find("dump.enable_dump: \"yes\" is not a boolean"), std::string::npos) << m;
  m = message(R"({"dump": {"enable_dump": true, "dump_path": "/x", "dump_step": "8-5"}})");
  EXPECT_NE(m.find("dump.dump_step"), std::string::npos) << m;
  m = message(R"({"dump": {"enable_dump": true, "x": 1e999}})");
  EXPECT_NE(m.find("Parse dump json failed, error:"), std::string::npos) << m;
  EXPECT_NE(m.find("number overflow"), std::string::npos) << m;
  m = message(R"({"dump": 3})");
  EXPECT_NE(m.find("dump: missing or not an object"), std::string::npos) << m;
}

TEST(GeDialect, UnknownKeysWarn) {
  std::vector<std::string> warnings;
  StatusOr<GeDumpOptions> options = ParseGeDumpOptions(
      R"({"dump": {"enable_dump": true, "dump_path": "/x", "dump_debug_mode": "all"}})", "g.json",
      &warnings);
  ASSERT_TRUE(options.ok());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("dump.dump_debug_mode: unknown key"), std::string::npos);
  EXPECT_FALSE(IsGeDumpConfig(R"({"common_dump_settings": {}, "dump": {}})"));
  EXPECT_FALSE(IsGeDumpConfig("not json"));
}

TEST(GeLayout, PathsAndNames) {
  GeLayout layout{"/d", "20261122010203", 3, "my.net"};
  EXPECT_EQ(layout.StepDir(1, 7), "/d/20261122010203/3/my_net/1/7");
  EXPECT_EQ(GeFileBaseName("Conv2D", "Default/net-Net/conv 1.x/Conv2D-op3", 0, 2, 1700000000000123),
            "Conv2D.Default_net-Net_conv_1_x_Conv2D-op3.0.2.1700000000000123");
  setenv("TZ", "UTC", 1);
  tzset();
  EXPECT_EQ(GeTimestampDirName(std::chrono::system_clock::from_time_t(1795309323)),
            "20261122010203");
}

TEST(GeLayout, LongNamesGoThroughMappingCsv) {
  testing::TempDir dir;
  auto fs = NewPosixFileSystem();
  StatusOr<std::string> short_name = GeFileNameIn(*fs, dir.path(), "Add.a.0.0.1");
  ASSERT_TRUE(short_name.ok());
  EXPECT_EQ(*short_name, "Add.a.0.0.1");
  const std::string long_name = "Add." + std::string(300, 'x') + ".0.0.1";
  StatusOr<std::string> first = GeFileNameIn(*fs, dir.path(), long_name);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(*first, "0");
  testing::WriteFile(dir.Sub("0"), "taken");
  StatusOr<std::string> second = GeFileNameIn(*fs, dir.path(), long_name + "2");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, "1");
  EXPECT_EQ(testing::ReadFile(dir.Sub("mapping.csv")),
            "0," + long_name + "\n1," + long_name + "2\n");
}

TEST(GeLayout, SkipsDataControlFlowAndConstants) {
  for (const char* type : {"Data", "Constant", "Const", "If", "Loop", "While", "NetOutput",
                           "prim::Constant", "prim::If", "aten::If", "Parameter", "StreamSwitch"}) {
    EXPECT_TRUE(GeSkipsOpType(type)) << type;
  }
  for (const char* type : {"Conv2D", "conv2d", "add", "MatMul", "aten::linear", "relu_", "ReLU"}) {
    EXPECT_FALSE(GeSkipsOpType(type)) << type;
  }
}

}  // namespace
}  // namespace graphdump
