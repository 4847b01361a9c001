#include "graphdump/ge_dialect.h"

#include <cctype>
#include <ctime>
#include <filesystem>
#include <set>
#include <sstream>

#include "fmt/format.h"
#include "graphdump/internal/json_text.h"
#include "graphdump/layout.h"
#include "nlohmann/json.hpp"

namespace graphdump {
namespace {

using nlohmann::json;

constexpr const char* kKnownKeys[] = {"enable_dump", "dump_path", "dump_step", "dump_mode",
                                      "dump_layer"};

StatusOr<bool> ParseBool(const json& value, const std::string& key) {
  if (value.is_boolean()) return value.get<bool>();
  if (value.is_string()) {
    const std::string s = value.get<std::string>();
    if (s == "true" || s == "True" || s == "1") return true;
    if (s == "false" || s == "False" || s == "0") return false;
  }
  if (value.is_number_unsigned() && value.get<uint64_t>() <= 1) return value.get<uint64_t>() == 1;
  return Status::InvalidArgument(
      fmt::format("{}: {} is not a boolean; allowed: true, false, \"true\", \"false\"", key,
                  internal::JsonText(value)));
}

StatusOr<std::string> ParseString(const json& value, const std::string& key) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_unsigned()) return std::to_string(value.get<uint64_t>());
  return Status::InvalidArgument(
      fmt::format("{}: {} is not a string", key, internal::JsonText(value)));
}

std::vector<std::string> SplitSpaces(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> parts;
  for (std::string part; in >> part;) parts.push_back(part);
  return parts;
}

// RE2 syntax: every character that is not a letter, digit or '_' is escaped.
std::string QuoteRegex(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') out += '\\';
    out += c;
  }
  return out;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

bool IsGeDumpConfig(const std::string& json_text) {
  if (!internal::CheckJsonDepth(json_text, "").ok()) return false;  // ParseConfig says why
  json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  return doc.is_object() && doc.contains("dump") && doc["dump"].is_object() &&
         !doc.contains("common_dump_settings");
}

StatusOr<GeDumpOptions> ParseGeDumpOptions(const std::string& json_text,
                                           const std::string& file_name,
                                           std::vector<std::string>* warnings) {
  GRAPHDUMP_RETURN_IF_ERROR(internal::CheckJsonDepth(json_text, file_name));
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e999
    return Status::InvalidArgument(
        fmt::format("{}: Parse dump json failed, error: {}", file_name, e.what()));
  }
  if (!doc.is_object()) {
    return Status::InvalidArgument(fmt::format("{}: not a JSON object", file_name));
  }
  if (!doc.contains("dump") || !doc["dump"].is_object()) {
    return Status::InvalidArgument(
        fmt::format("{}: dump: missing or not an object; the GE dialect is "
                    "{{\"dump\": {{\"enable_dump\": ..., \"dump_path\": ...}}}}",
                    file_name));
  }
  GeDumpOptions options;
  std::vector<std::string> errors;
  for (const auto& [key, value] : doc["dump"].items()) {
    const std::string path = "dump." + key;
    Status status;
    if (key == "enable_dump") {
      StatusOr<bool> b = ParseBool(value, path);
      if (b.ok())
        options.enable_dump = *b;
      else
        status = b.status();
    } else if (key == "dump_path" || key == "dump_step" || key == "dump_mode" ||
               key == "dump_layer") {
      StatusOr<std::string> s = ParseString(value, path);
      if (!s.ok()) {
        status = s.status();
      } else if (key == "dump_path") {
        options.dump_path = *s;
      } else if (key == "dump_step") {
        options.dump_step = *s;
      } else if (key == "dump_mode") {
        options.dump_mode = *s;
      } else {
        options.dump_layer = *s;
      }
    } else if (warnings != nullptr) {
      warnings->push_back(
          fmt::format("{}: {}: unknown key, ignored (the GE dialect knows {})", file_name, path,
                      fmt::join(std::begin(kKnownKeys), std::end(kKnownKeys), ", ")));
    }
    if (!status.ok()) errors.push_back(file_name + ": " + status.message());
  }
  if (!errors.empty()) return Status::InvalidArgument(fmt::format("{}", fmt::join(errors, "\n")));
  return options;
}

StatusOr<std::unique_ptr<ParsedConfig>> GeOptionsToConfig(const GeDumpOptions& options,
                                                          const std::string& source) {
  if (!options.enable_dump) return std::unique_ptr<ParsedConfig>();
  auto parsed = std::make_unique<ParsedConfig>();
  DumpConfig& config = parsed->config;
  config.ge_layout = true;
  config.file_format = "bin";
  config.net_name = "";
  std::vector<std::string> errors;
  if (options.dump_path.empty()) {
    errors.push_back(
        fmt::format("{}: dump.dump_path: missing; enable_dump needs a directory", source));
  } else {
    std::error_code ec;
    std::filesystem::path p = std::filesystem::absolute(options.dump_path, ec);
    config.path = (ec ? std::filesystem::path(options.dump_path) : p).lexically_normal().string();
    while (config.path.size() > 1 && config.path.back() == '/') config.path.pop_back();
  }
  if (!options.dump_step.empty()) {
    StatusOr<IterationSet> steps = IterationSet::Parse(options.dump_step, "dump.dump_step");
    if (steps.ok()) {
      config.iteration = *steps;
    } else {
      errors.push_back(source + ": " + steps.status().message());
    }
  }
  if (options.dump_mode == "input") {
    config.input_output = InputOutput::kInputs;
  } else if (options.dump_mode == "output") {
    config.input_output = InputOutput::kOutputs;
  } else if (options.dump_mode == "all") {
    config.input_output = InputOutput::kBoth;
  } else {
    errors.push_back(
        fmt::format("{}: dump.dump_mode: \"{}\"; allowed: \"input\", \"output\", "
                    "\"all\"",
                    source, options.dump_mode));
  }
  for (const std::string& name : SplitSpaces(options.dump_layer)) {
    KernelPattern entry;
    entry.kind = KernelPattern::Kind::kRegex;
    entry.text = name;
    entry.pattern = "(?:.*/)?" + QuoteRegex(name);
    config.kernels.push_back(entry);
  }
  config.dump_mode = config.kernels.empty() ? 0 : 1;
  if (!errors.empty()) return Status::InvalidArgument(fmt::format("{}", fmt::join(errors, "\n")));
  return parsed;
}

StatusOr<std::unique_ptr<ParsedConfig>> ParseGeDumpConfig(const std::string& json_text,
                                                          const std::string& file_name) {
  std::vector<std::string> warnings;
  GRAPHDUMP_ASSIGN_OR_RETURN(GeDumpOptions options,
                             ParseGeDumpOptions(json_text, file_name, &warnings));
  GRAPHDUMP_ASSIGN_OR_RETURN(std::unique_ptr<ParsedConfig> parsed,
                             GeOptionsToConfig(options, file_name));
  if (parsed) {
    parsed->config.source_file = file_name;
    parsed->config.source_bytes = json_text;
    parsed->warnings = std::move(warnings);
  }
  return parsed;
}

std::string GeConfigToJson(const DumpConfig& config) {
  nlohmann::ordered_json dump;
  dump["enable_dump"] = config.dump_enabled;
  if (config.dump_enabled) {
    dump["dump_path"] = config.path;
    const std::string steps = config.iteration.ToString();
    if (steps != "all") dump["dump_step"] = steps;
    dump["dump_mode"] = config.input_output == InputOutput::kInputs    ? "input"
                        : config.input_output == InputOutput::kOutputs ? "output"
                                                                       : "all";
    std::string layers;
    for (const KernelPattern& entry : config.kernels) {
      layers += (layers.empty() ? "" : " ") + entry.text;
    }
    if (!layers.empty()) dump["dump_layer"] = layers;
  }
  nlohmann::ordered_json root;
  root["dump"] = std::move(dump);
  return internal::JsonText(root, 4) + "\n";
}

std::string GeTimestampDirName(std::chrono::system_clock::time_point time) {
  const std::time_t t = std::chrono::system_clock::to_time_t(time);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y%m%d%H%M%S", &tm);
  return buffer;
}

std::string GeLayout::StepDir(uint32_t model_id, uint64_t data_index) const {
  return fmt::format("{}/{}/{}/{}/{}/{}", dump_path, timestamp, device_id, SanitizeName(model_name),
                     model_id, data_index);
}

std::string GeFileBaseName(std::string_view op_type, std::string_view op_name, uint32_t task_id,
                           uint32_t stream_id, uint64_t timestamp) {
  return fmt::format("{}.{}.{}.{}.{}", SanitizeName(op_type), SanitizeName(op_name), task_id,
                     stream_id, timestamp);
}

StatusOr<std::string> GeFileNameIn(FileSystem& fs, const std::string& dir,
                                   const std::string& basename) {
  if (basename.size() <= kMaxBasenameBytes) return basename;
  uint64_t n = 0;
  while (fs.Exists(fmt::format("{}/{}", dir, n))) ++n;
  const std::string mapped = std::to_string(n);
  GRAPHDUMP_RETURN_IF_ERROR(fs.AppendToFile(dir + "/mapping.csv", mapped + "," + basename + "\n"));
  return mapped;
}

bool GeSkipsOpType(std::string_view op_type) {
  static const std::set<std::string, std::less<>> kSkipped = {
      // data, constants, variables
      "data", "refdata", "const", "constant", "constantop", "variable", "variablev2", "varhandleop",
      "parameter", "placeholder", "getattr",
      // control flow
      "if", "_if", "statelessif", "while", "_while", "statelesswhile", "loop", "for", "case",
      "statelesscase", "partitionedcall", "statefulpartitionedcall", "switch", "refswitch", "merge",
      "refmerge", "enter", "refenter", "exit", "refexit", "nextiteration", "refnextiteration",
      "loopcond", "streamswitch", "streamswitchn", "streamactive", "streammerge", "labelset",
      "labelgoto", "labelgotoex", "labelswitch", "labelswitchbyindex", "return",
      // graph plumbing
      "netoutput", "tupleconstruct", "tupleunpack", "listconstruct", "listunpack", "tupleindex",
      "listindex", "uninitialized"};
  if (op_type.substr(0, 6) == "prim::") return true;
  if (op_type.substr(0, 6) == "aten::") op_type.remove_prefix(6);
  return kSkipped.count(Lower(op_type)) > 0;
}

}  // namespace graphdump
