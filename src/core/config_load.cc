// Reading the configuration from a file or from the environment (docs/configuration.md).
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "graphdump/config.h"
#include "graphdump/file_system.h"
#include "graphdump/ge_dialect.h"

namespace graphdump {
namespace {

std::string GetEnv(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

}  // namespace

StatusOr<ParsedConfig> LoadConfigFile(const std::filesystem::path& file,
                                      const std::string& diagnostic_path) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(file, ec).lexically_normal();
  const std::string name = ec ? file.string() : absolute.string();
  if (!std::filesystem::exists(absolute, ec)) {
    return Status::NotFound(name + ": the dump config file does not exist");
  }
  if (!std::filesystem::is_regular_file(absolute, ec)) {
    return Status::InvalidArgument(name + ": the dump config file is not a regular file");
  }
  if (file.extension() != ".json") {
    return Status::InvalidArgument(name +
                                   ": [DataDump] dump config file suffix only supports json! But "
                                   "got:\"" +
                                   file.extension().string() + "\"");
  }
  StatusOr<std::string> bytes = ReadRegularFile(absolute.string());
  if (!bytes.ok()) {
    return Status(bytes.status().code(),
                  "cannot read the dump config file: " + bytes.status().message());
  }
  std::string text = std::move(*bytes);
  ParsedConfig parsed;
  if (IsGeDumpConfig(text)) {
    // The GE / TF-adapter dialect (docs/ascend.md); a disabled one still parses, but dumps nothing.
    GRAPHDUMP_ASSIGN_OR_RETURN(std::unique_ptr<ParsedConfig> ge, ParseGeDumpConfig(text, name));
    if (ge) {
      parsed = std::move(*ge);
    } else {
      parsed.config.dump_enabled = false;
    }
  } else {
    GRAPHDUMP_ASSIGN_OR_RETURN(parsed, ParseConfig(text, name, diagnostic_path));
  }
  parsed.config.source_file = name;
  parsed.config.source_bytes = std::move(text);
  return parsed;
}

StatusOr<std::unique_ptr<ParsedConfig>> LoadConfigFromEnvironment() {
  const std::string graphdump_config = GetEnv(kConfigEnv);
  const std::string mindspore_config = GetEnv(kMindSporeConfigEnv);
  if (graphdump_config.empty() && mindspore_config.empty()) {
    return std::unique_ptr<ParsedConfig>();
  }
  const bool use_graphdump = !graphdump_config.empty();
  const std::string variable = use_graphdump ? kConfigEnv : kMindSporeConfigEnv;
  const std::string file = use_graphdump ? graphdump_config : mindspore_config;
  StatusOr<ParsedConfig> parsed = LoadConfigFile(file, GetEnv(kDiagnosticPathEnv));
  if (!parsed.ok()) {
    return Status(parsed.status().code(),
                  "dump config named by " + variable + ": " + parsed.status().message());
  }
  auto result = std::make_unique<ParsedConfig>(std::move(parsed).value());
  if (use_graphdump && !mindspore_config.empty()) {
    result->warnings.insert(result->warnings.begin(),
                            std::string(kConfigEnv) + "=" + graphdump_config + " and " +
                                kMindSporeConfigEnv + "=" + mindspore_config +
                                " are both set; using " + kConfigEnv);
  }
  return result;
}

}  // namespace graphdump
