// The configuration parser shared by the files of ParseConfig (config.cc: the frame, typed
// readers, e2e_dump_settings, forced modes, unknown keys; config_common_settings.cc: the keys of
// common_dump_settings) and ConfigToJson (config_to_json.cc). Core use only.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graphdump/config.h"

namespace graphdump::internal {

using Json = nlohmann::ordered_json;

inline constexpr char kCommon[] = "common_dump_settings";
inline constexpr char kE2e[] = "e2e_dump_settings";

// Keys in the order of docs/configuration.md's tables (also the order ConfigToJson writes).
const std::vector<std::string>& CommonKeys();
const std::vector<std::string>& E2eKeys();

// `message` with control characters (from keys and values in the file) written as \u00XX: a
// message is one line, and a NUL must not cut it short when printed.
std::string OneLine(const std::string& message);

// A short rendering of a JSON value for messages: `string "0"`, `-1`, `1.5`, `array [1,2]`.
std::string Describe(const Json& value);

std::string Join(const std::vector<std::string>& items, const std::string& separator);

// Collects the problems and warnings of one parse (ParseConfig). Its members are defined in
// config.cc, except the readers of common_dump_settings's keys (config_common_settings.cc).
class ConfigParser {
 public:
  ConfigParser(std::string file_name, std::string diagnostic_path)
      : file_name_(std::move(file_name)), diagnostic_path_(std::move(diagnostic_path)) {}

  StatusOr<ParsedConfig> Parse(const std::string& json_text);

 private:
  void Error(const std::string& key_path, const std::string& message) {
    errors_.push_back(OneLine(Prefix() + key_path + ": " + message));
  }
  void Warn(const std::string& key_path, const std::string& message) {
    warnings_.push_back(OneLine(Prefix() + key_path + ": " + message));
  }
  std::string Prefix() const { return file_name_.empty() ? "" : file_name_ + ": "; }

  // Typed readers. `section` is an object; a missing key returns nullopt (an error when
  // `required`); a value of the wrong type is an error and returns nullopt.
  std::optional<uint64_t> ReadUint(const Json& section, const std::string& section_name,
                                   const std::string& key, bool required, const char* allowed);
  std::optional<std::string> ReadString(const Json& section, const std::string& section_name,
                                        const std::string& key, bool required, const char* allowed);
  std::optional<bool> ReadBool(const Json& section, const std::string& section_name,
                               const std::string& key);
  const Json* ReadArray(const Json& section, const std::string& section_name,
                        const std::string& key, bool required, const char* allowed);
  const Json* Find(const Json& section, const std::string& section_name, const std::string& key,
                   bool required, const char* allowed);

  void ParseCommon(const Json& common);
  void ParseDumpMode(const Json& common);
  void ParsePath(const Json& common);
  void ParseNetName(const Json& common);
  void ParseIteration(const Json& common);
  void ParseSavedData(const Json& common);
  void ParseInputOutput(const Json& common);
  void ParseKernels(const Json& common);
  void ParseSupportDevice(const Json& common);
  void ParseStatisticCategory(const Json& common);
  void ParseOpDebugMode(const Json& common);
  void ParseFileFormat(const Json& common);
  void ParseE2e(const Json& e2e);
  void ApplyForcedModes();
  void CheckUnknownKeys(const Json& object, const std::string& section_name,
                        const std::vector<std::string>& known);
  void SuggestKey(const std::string& key_path, const std::string& key,
                  const std::vector<std::string>& known);

  std::string file_name_;
  std::string diagnostic_path_;
  std::vector<std::string> errors_;
  std::vector<std::string> warnings_;
  DumpConfig config_;
  bool dump_mode_valid_ = false;
  bool has_overflow_number_ = false;
};

}  // namespace graphdump::internal
