// Helpers shared by the configuration's tests (config_test.cc, config_values_test.cc,
// config_environment_test.cc): a valid configuration changed one key at a time.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graphdump/config.h"

// In graphdump itself: only the configuration's tests include this.
namespace graphdump {

using nlohmann::json;

// A valid configuration; tests change one key at a time.
inline json BaseConfig() {
  return json::parse(R"({
    "common_dump_settings": {
      "dump_mode": 0, "path": "/tmp/dump", "net_name": "Net", "iteration": "all",
      "input_output": 0, "kernels": [], "support_device": [0, 1]
    }
  })");
}

inline StatusOr<ParsedConfig> Parse(const json& config, const std::string& diagnostic = "") {
  return ParseConfig(config.dump(), "", diagnostic);
}

inline ParsedConfig ParseOk(const json& config) {
  StatusOr<ParsedConfig> parsed = Parse(config);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  return parsed.ok() ? *parsed : ParsedConfig{};
}

inline std::string ParseError(const json& config, const std::string& diagnostic = "") {
  StatusOr<ParsedConfig> parsed = Parse(config, diagnostic);
  EXPECT_FALSE(parsed.ok());
  if (parsed.ok()) return "";
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  return parsed.status().message();
}

inline json WithCommon(const std::string& key, const json& value) {
  json config = BaseConfig();
  config["common_dump_settings"][key] = value;
  return config;
}

inline json WithE2e(const std::string& key, const json& value) {
  json config = BaseConfig();
  config["e2e_dump_settings"][key] = value;
  return config;
}

inline json WithoutCommon(const std::string& key) {
  json config = BaseConfig();
  config["common_dump_settings"].erase(key);
  return config;
}

inline bool HasWarning(const ParsedConfig& parsed, const std::string& text) {
  for (const std::string& w : parsed.warnings) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

}  // namespace graphdump
