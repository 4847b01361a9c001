// ParseConfig: MindSpore's data_dump.json (docs/configuration.md), validated in one pass.
//
// Every key is checked even after an error, so a user sees all problems of a file at once.
// Messages keep the substance of MindSpore's own error texts (dump_json_parser.cc) and add the
// key path, the value found and what is allowed.
#include "graphdump/config.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "graphdump/internal/json_text.h"
#include "graphdump/internal/kernel_entry.h"
#include "graphdump/layout.h"

namespace graphdump {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kCommon[] = "common_dump_settings";
constexpr char kE2e[] = "e2e_dump_settings";

// Keys in the order of docs/configuration.md's tables (also the order ConfigToJson writes).
const std::vector<std::string>& CommonKeys() {
  static const auto* keys = new std::vector<std::string>{
      "dump_mode",          "path",          "net_name",        "iteration",
      "saved_data",         "input_output",  "kernels",         "support_device",
      "statistic_category", "op_debug_mode", "overflow_number", "initial_iteration",
      "file_format"};
  return *keys;
}

const std::vector<std::string>& E2eKeys() {
  static const auto* keys = new std::vector<std::string>{
      "enable",      "trans_flag", "stat_calc_mode",  "device_stat_precision_mode",
      "sample_mode", "sample_num", "save_kernel_args"};
  return *keys;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Is `key` close enough to the known key `known` to be suggested as a misspelling of it?
bool IsNear(const std::string& key, const std::string& known) {
  const size_t threshold = std::max<size_t>(2, std::min(key.size(), known.size()) / 3);
  return EditDistance(internal::AsciiLower(key), known) <= threshold;
}

// `message` with control characters (from keys and values in the file) written as \u00XX: a
// message is one line, and a NUL must not cut it short when printed.
std::string OneLine(const std::string& message) {
  std::string out;
  out.reserve(message.size());
  for (char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

// A short rendering of a JSON value for messages: `string "0"`, `-1`, `1.5`, `array [1,2]`.
std::string Describe(const Json& value) {
  std::string text = internal::JsonText(value);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  if (value.is_string()) return "string " + text;
  if (value.is_array()) return "array " + text;
  if (value.is_object()) return "object " + text;
  if (value.is_boolean()) return "boolean " + text;
  return text;
}

std::string Join(const std::vector<std::string>& items, const std::string& separator) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

std::string ValidStatCategories() {
  std::vector<std::string> names;
  for (const StatisticInfo& info : StatisticCatalogue())
    names.push_back("'" + std::string(info.name) + "'");
  return "[" + Join(names, ", ") + "]";
}

// Collects the problems and warnings of one parse.
class Parser {
 public:
  Parser(std::string file_name, std::string diagnostic_path)
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

const Json* Parser::Find(const Json& section, const std::string& section_name,
                         const std::string& key, bool required, const char* allowed) {
  auto it = section.find(key);
  if (it != section.end()) return &*it;
  if (required) {
    std::string hint;
    const std::vector<std::string>& known = section_name == kCommon ? CommonKeys() : E2eKeys();
    for (const auto& [other, value] : section.items()) {
      if (std::find(known.begin(), known.end(), other) == known.end() && IsNear(other, key)) {
        hint = "; the section has \"" + other + "\": a misspelling of \"" + key + "\"?";
        break;
      }
    }
    Error(section_name + "." + key,
          std::string("not found; this key is required (") + allowed + ")" + hint);
  }
  return nullptr;
}

std::optional<uint64_t> Parser::ReadUint(const Json& section, const std::string& section_name,
                                         const std::string& key, bool required,
                                         const char* allowed) {
  const Json* value = Find(section, section_name, key, required, allowed);
  if (value == nullptr) return std::nullopt;
  if (value->is_number_unsigned()) return value->get<uint64_t>();
  if (value->is_number_integer() && value->get<int64_t>() >= 0) return value->get<uint64_t>();
  Error(section_name + "." + key,
        "should be unsigned int type, but got " + Describe(*value) + " (allowed: " + allowed + ")");
  return std::nullopt;
}

std::optional<std::string> Parser::ReadString(const Json& section, const std::string& section_name,
                                              const std::string& key, bool required,
                                              const char* allowed) {
  const Json* value = Find(section, section_name, key, required, allowed);
  if (value == nullptr) return std::nullopt;
  if (value->is_string()) return value->get<std::string>();
  Error(section_name + "." + key,
        "should be string type, but got " + Describe(*value) + " (allowed: " + allowed + ")");
  return std::nullopt;
}

std::optional<bool> Parser::ReadBool(const Json& section, const std::string& section_name,
                                     const std::string& key) {
  const Json* value = Find(section, section_name, key, false, "true or false");
  if (value == nullptr) return std::nullopt;
  if (value->is_boolean()) return value->get<bool>();
  Error(section_name + "." + key,
        "should be boolean type (true or false, without quotes), but got " + Describe(*value));
  return std::nullopt;
}

const Json* Parser::ReadArray(const Json& section, const std::string& section_name,
                              const std::string& key, bool required, const char* allowed) {
  const Json* value = Find(section, section_name, key, required, allowed);
  if (value == nullptr) return nullptr;
  if (value->is_array()) return value;
  Error(section_name + "." + key,
        "should be array type, but got " + Describe(*value) + " (allowed: " + allowed + ")");
  return nullptr;
}

void Parser::ParseDumpMode(const Json& common) {
  constexpr char kAllowed[] =
      "0 all kernels, 1 the kernels listed in \"kernels\", 2 kernels marked by set_dump";
  std::optional<uint64_t> mode = ReadUint(common, kCommon, "dump_mode", true, kAllowed);
  if (!mode) return;
  if (*mode > 2) {
    Error("common_dump_settings.dump_mode",
          "should be 0, 1 or 2, but got " + std::to_string(*mode) + " (" + kAllowed + ")");
    return;
  }
  config_.dump_mode = static_cast<uint32_t>(*mode);
  dump_mode_valid_ = true;
}

void Parser::ParsePath(const Json& common) {
  constexpr char kAllowed[] = "an absolute path of characters [A-Za-z0-9_/-]";
  std::optional<std::string> path = ReadString(common, kCommon, "path", false, kAllowed);
  const Json* raw = Find(common, kCommon, "path", false, kAllowed);
  if (raw != nullptr && !path) return;  // wrong type, already reported
  std::string value = path.value_or("");
  std::string origin;
  if (value.empty()) {
    if (diagnostic_path_.empty()) {
      Error("common_dump_settings.path",
            std::string("Dump path is empty. Please set it in dump json file or environment "
                        "variable `") +
                kDiagnosticPathEnv + "` (" + kAllowed + ")");
      return;
    }
    std::string base = diagnostic_path_;
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    value = (base == "/" ? "" : base) + "/debug_dump";
    origin = std::string(" (from ") + kDiagnosticPathEnv + "=" + diagnostic_path_ + ")";
  }
  if (const std::string problem = DumpPathProblem(value); !problem.empty()) {
    Error("common_dump_settings.path", problem + origin);
    return;
  }
  config_.path = value;
}

void Parser::ParseNetName(const Json& common) {
  constexpr char kAllowed[] = "a non-empty name of characters [A-Za-z0-9_-], e.g. \"ResNet50\"";
  std::optional<std::string> name = ReadString(common, kCommon, "net_name", true, kAllowed);
  if (!name) return;
  const bool good = !name->empty() && std::all_of(name->begin(), name->end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  });
  if (!good) {
    Error("common_dump_settings.net_name",
          "net_name only supports alphabetic, digit, or {'-', '_'}, but got: \"" + *name + "\"");
    return;
  }
  // net_name is a directory name of the dump (docs/layout.md): longer than NAME_MAX, every write of
  // the run would fail with ENAMETOOLONG.
  if (name->size() > kMaxBasenameBytes) {
    Error("common_dump_settings.net_name",
          "net_name is " + std::to_string(name->size()) +
              " bytes long, but it names a "
              "directory of the dump and a directory name can be at most " +
              std::to_string(kMaxBasenameBytes) + " bytes: \"" + name->substr(0, 40) + "...\"");
    return;
  }
  config_.net_name = *name;
}

void Parser::ParseIteration(const Json& common) {
  constexpr char kAllowed[] = "\"all\" or ranges separated by '|', e.g. \"0|5-8|100-120\"";
  const Json* value = Find(common, kCommon, "iteration", true, kAllowed);
  if (value == nullptr) return;
  if (!value->is_string()) {
    // MindSpore 1.1-1.2 took a number here (0 meaning all iterations).
    Error("common_dump_settings.iteration",
          "should be string type, but got " + Describe(*value) + " (allowed: " + kAllowed + ")");
    return;
  }
  StatusOr<IterationSet> set =
      IterationSet::Parse(value->get<std::string>(), "common_dump_settings.iteration");
  if (!set.ok()) {
    // One line per bad segment; each already names the key path.
    const std::string message = set.status().message();
    size_t start = 0;
    while (start <= message.size()) {
      const size_t end = message.find('\n', start);
      errors_.push_back(Prefix() + message.substr(start, end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
    return;
  }
  config_.iteration = *set;
}

void Parser::ParseSavedData(const Json& common) {
  constexpr char kAllowed[] = "\"tensor\", \"statistic\" or \"full\"";
  std::optional<std::string> saved = ReadString(common, kCommon, "saved_data", false, kAllowed);
  if (!saved) return;
  if (*saved == "tensor") {
    config_.saved_data = SavedData::kTensor;
  } else if (*saved == "statistic") {
    config_.saved_data = SavedData::kStatistic;
  } else if (*saved == "full") {
    config_.saved_data = SavedData::kFull;
  } else {
    Error("common_dump_settings.saved_data",
          "saved_data only supports statistic, tensor, or full, but got: \"" + *saved +
              "\". Please set saved_data to either statistic, tensor, or full");
  }
}

void Parser::ParseInputOutput(const Json& common) {
  constexpr char kAllowed[] = "0 inputs and outputs, 1 inputs only, 2 outputs only";
  std::optional<uint64_t> io = ReadUint(common, kCommon, "input_output", true, kAllowed);
  if (!io) return;
  if (*io > 2) {
    Error("common_dump_settings.input_output",
          "input_output should be 0, 1, 2, but got " + std::to_string(*io) + " (" + kAllowed + ")");
    return;
  }
  config_.input_output = static_cast<InputOutput>(*io);
}

void Parser::ParseKernels(const Json& common) {
  constexpr char kAllowed[] =
      "an array of strings: full names, op types, or \"name-regex(REGEX)\"; may be empty";
  const Json* kernels = ReadArray(common, kCommon, "kernels", true, kAllowed);
  if (kernels == nullptr) return;
  std::set<std::string> seen;
  for (size_t i = 0; i < kernels->size(); ++i) {
    const Json& item = (*kernels)[i];
    const std::string key_path = "common_dump_settings.kernels[" + std::to_string(i) + "]";
    if (!item.is_string()) {
      Error(key_path, "should be string type, but got " + Describe(item) + " (" + kAllowed + ")");
      continue;
    }
    const std::string text = internal::NormalizeKernelEntry(item.get<std::string>());
    if (text.empty()) continue;
    StatusOr<KernelPattern> entry = internal::ClassifyKernelEntry(text);
    if (!entry.ok()) {
      Error(key_path, entry.status().message());
      continue;
    }
    if (!seen.insert(text).second) Warn(key_path, "duplicate dump kernel name \"" + text + "\"");
    config_.kernels.push_back(*entry);
  }
}

void Parser::ParseSupportDevice(const Json& common) {
  constexpr char kAllowed[] = "an array of rank/device ids (unsigned ints), e.g. [0,1,2,3]";
  const Json* devices = ReadArray(common, kCommon, "support_device", true, kAllowed);
  if (devices == nullptr) return;
  std::set<uint64_t> seen;
  for (size_t i = 0; i < devices->size(); ++i) {
    const Json& item = (*devices)[i];
    const std::string key_path = "common_dump_settings.support_device[" + std::to_string(i) + "]";
    const bool is_uint =
        item.is_number_unsigned() || (item.is_number_integer() && item.get<int64_t>() >= 0);
    if (!is_uint || item.get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
      Error(key_path,
            "should be an unsigned int device id (0 to 4294967295), but got " + Describe(item));
      continue;
    }
    const uint64_t id = item.get<uint64_t>();
    if (!seen.insert(id).second) {
      Warn(key_path, "duplicate support device " + std::to_string(id));
      continue;
    }
    config_.support_device.push_back(static_cast<uint32_t>(id));
  }
}

void Parser::ParseStatisticCategory(const Json& common) {
  const Json* categories =
      ReadArray(common, kCommon, "statistic_category", false, "an array of statistic names");
  if (categories == nullptr) return;
  std::vector<StatCategory> parsed;
  std::vector<std::string> invalid;
  for (size_t i = 0; i < categories->size(); ++i) {
    const Json& item = (*categories)[i];
    if (!item.is_string()) {
      Error("common_dump_settings.statistic_category[" + std::to_string(i) + "]",
            "should be string type, but got " + Describe(item) +
                "; the valid statistic_category are as follows:" + ValidStatCategories());
      continue;
    }
    const std::string name = item.get<std::string>();
    if (const StatisticInfo* info = FindStatisticByName(name)) {
      parsed.push_back(info->category);
    } else {
      invalid.push_back("'" + name + "'");
    }
  }
  if (!invalid.empty()) {
    Error("common_dump_settings.statistic_category",
          "The following statistic_category is invalid:" + Join(invalid, ", ") +
              ", the valid statistic_category are as follows:" + ValidStatCategories());
  }
  if (categories->empty()) {
    Warn("common_dump_settings.statistic_category",
         "the list is empty; statistic.csv will have no statistic columns");
  }
  config_.statistic_category = std::move(parsed);
}

void Parser::ParseOpDebugMode(const Json& common) {
  constexpr char kAllowed[] = "0 normal, 3 overflow dump (1 and 2 mean 3), 4 exception dump";
  std::optional<uint64_t> mode = ReadUint(common, kCommon, "op_debug_mode", false, kAllowed);
  if (!mode) return;
  if (*mode == 1 || *mode == 2) {
    Warn("common_dump_settings.op_debug_mode",
         "op_debug_mode should be 0, 3, 4; " + std::to_string(*mode) +
             " is reset to 3 (overflow dump of inputs and outputs)");
    config_.op_debug_mode = 3;
  } else if (*mode == 0 || *mode == 3 || *mode == 4) {
    config_.op_debug_mode = static_cast<uint32_t>(*mode);
  } else {
    Error("common_dump_settings.op_debug_mode", "op_debug_mode should be 0, 3, 4, but got " +
                                                    std::to_string(*mode) + " (" + kAllowed + ")");
  }
}

void Parser::ParseFileFormat(const Json& common) {
  constexpr char kAllowed[] = "\"npy\" or \"bin\"";
  std::optional<std::string> format = ReadString(common, kCommon, "file_format", false, kAllowed);
  if (!format) return;
  if (*format != "npy" && *format != "bin") {
    Error("common_dump_settings.file_format",
          "'file_format' should be either 'npy' or 'bin', but got: \"" + *format + "\"");
    return;
  }
  config_.file_format = *format;
}

void Parser::ParseCommon(const Json& common) {
  ParseDumpMode(common);
  ParsePath(common);
  ParseNetName(common);
  ParseIteration(common);
  ParseSavedData(common);
  ParseInputOutput(common);
  ParseKernels(common);
  ParseSupportDevice(common);
  ParseStatisticCategory(common);
  ParseOpDebugMode(common);
  std::optional<uint64_t> overflow = ReadUint(common, kCommon, "overflow_number", false,
                                              "the number of overflowing kernels to dump, 0 all");
  if (overflow) {
    if (*overflow > std::numeric_limits<uint32_t>::max()) {
      Error("common_dump_settings.overflow_number",
            "should be at most 4294967295, but got " + std::to_string(*overflow));
    } else {
      config_.overflow_number = static_cast<uint32_t>(*overflow);
    }
  }
  std::optional<uint64_t> initial = ReadUint(common, kCommon, "initial_iteration", false,
                                             "the first value of the iteration counter");
  if (initial) config_.initial_iteration = *initial;
  has_overflow_number_ = common.contains("overflow_number");
  ParseFileFormat(common);
  CheckUnknownKeys(common, kCommon, CommonKeys());
}

void Parser::ApplyForcedModes() {
  const std::string mode = std::to_string(config_.op_debug_mode);
  // MindSpore rejects any overflow_number outside mode 3; graphdump accepts the default 0 so that
  // ConfigToJson's output (which lists every key) is itself a valid configuration.
  if (has_overflow_number_ && config_.overflow_number != 0 && config_.op_debug_mode != 3) {
    Error("common_dump_settings.overflow_number",
          "overflow_number only need to be set when op_debug_mode is 3, but op_debug_mode is " +
              mode);
  }
  if (config_.op_debug_mode != 0 && dump_mode_valid_ && config_.dump_mode != 0) {
    Warn("common_dump_settings.dump_mode",
         "Overflow dump or exception dump do not support specify kernels (op_debug_mode " + mode +
             "), the dump_mode is set to 0");
    config_.dump_mode = 0;
  }
  if (config_.op_debug_mode == 3 && config_.input_output != InputOutput::kBoth) {
    Warn("common_dump_settings.input_output",
         "When the op_debug_mode is set to 3, input_output should be set to 0; it is set to 0");
    config_.input_output = InputOutput::kBoth;
  }
  if (config_.op_debug_mode == 4) {
    if (!config_.iteration.all()) {
      Warn("common_dump_settings.iteration",
           "exception dump (op_debug_mode 4) does not support specifying iterations; iteration "
           "is set to \"all\"");
      config_.iteration = IterationSet::All();
    }
    if (config_.saved_data != SavedData::kTensor) {
      Warn("common_dump_settings.saved_data",
           "exception dump (op_debug_mode 4) only supports saving tensors; saved_data is set to "
           "\"tensor\"");
      config_.saved_data = SavedData::kTensor;
    }
    if (config_.sample_mode != 0) {
      Warn("e2e_dump_settings.sample_mode",
           "exception dump (op_debug_mode 4) does not support sampling; sample_mode is set to 0 "
           "and whole tensors are saved");
      config_.sample_mode = 0;
    }
  }
  if (config_.stat_calc_mode == "device" && config_.saved_data != SavedData::kStatistic) {
    Warn("e2e_dump_settings.stat_calc_mode",
         "When 'saved_data' is 'tensor' or 'full', the device cannot be used to calculate "
         "statistics and the 'stat_calc_mode' is forced to 'host'");
    config_.stat_calc_mode = "host";
  }
  if (dump_mode_valid_ && config_.dump_mode != 1 && !config_.kernels.empty()) {
    Warn("common_dump_settings.kernels",
         std::to_string(config_.kernels.size()) +
             " entries are not used: kernels selects kernels only when dump_mode is 1 (dump_mode "
             "is " +
             std::to_string(config_.dump_mode) + ")");
  }
}

void Parser::ParseE2e(const Json& e2e) {
  if (auto v = ReadBool(e2e, kE2e, "enable")) config_.enable = *v;
  if (auto v = ReadBool(e2e, kE2e, "trans_flag")) config_.trans_flag = *v;
  if (auto v = ReadString(e2e, kE2e, "stat_calc_mode", false, "\"host\" or \"device\"")) {
    if (*v == "host" || *v == "device") {
      config_.stat_calc_mode = *v;
    } else {
      Error("e2e_dump_settings.stat_calc_mode",
            "'stat_calc_mode' only supports 'host' or 'device', but got: \"" + *v +
                "\". Please set 'stat_calc_mode' to 'host' or 'device'");
    }
  }
  if (auto v = ReadString(e2e, kE2e, "device_stat_precision_mode", false, "\"high\" or \"low\"")) {
    if (*v == "high" || *v == "low") {
      config_.device_stat_precision_mode = *v;
    } else {
      Error("e2e_dump_settings.device_stat_precision_mode",
            "'device_stat_precision_mode' only supports 'high' or 'low', but got: \"" + *v +
                "\". Please set 'device_stat_precision_mode' to 'high' or 'low'");
    }
  }
  constexpr char kSampleModes[] = "0 whole tensors, 1 the first sample_num elements";
  if (auto v = ReadUint(e2e, kE2e, "sample_mode", false, kSampleModes)) {
    if (*v <= 1) {
      config_.sample_mode = static_cast<uint32_t>(*v);
    } else {
      Error("e2e_dump_settings.sample_mode", "sample_mode should be 0, 1, but got " +
                                                 std::to_string(*v) + " (" + kSampleModes + ")");
    }
  }
  if (auto v = ReadUint(e2e, kE2e, "sample_num", false, "an element count >= 1")) {
    if (*v >= 1) {
      config_.sample_num = *v;
    } else {
      Error("e2e_dump_settings.sample_num", "sample_num should be greater than 0, but got 0");
    }
  }
  if (auto v = ReadBool(e2e, kE2e, "save_kernel_args")) config_.save_kernel_args = *v;
  CheckUnknownKeys(e2e, kE2e, E2eKeys());
}

void Parser::SuggestKey(const std::string& key_path, const std::string& key,
                        const std::vector<std::string>& known) {
  std::string best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (const std::string& candidate : known) {
    const size_t d = EditDistance(internal::AsciiLower(key), candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  if (IsNear(key, best)) {
    Warn(key_path, "unknown key, ignored; did you mean \"" + best + "\"?");
  } else {
    std::vector<std::string> quoted;
    for (const std::string& k : known) quoted.push_back("\"" + k + "\"");
    Warn(key_path, "unknown key, ignored; the nearest known key is \"" + best +
                       "\" (known keys: " + Join(quoted, ", ") + ")");
  }
}

void Parser::CheckUnknownKeys(const Json& object, const std::string& section_name,
                              const std::vector<std::string>& known) {
  const std::vector<std::string>& other = section_name == kCommon ? E2eKeys() : CommonKeys();
  const std::string other_name = section_name == kCommon ? kE2e : kCommon;
  for (const auto& [key, value] : object.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    const std::string key_path = section_name + "." + key;
    if (std::find(other.begin(), other.end(), key) != other.end()) {
      Warn(key_path, "unknown key in " + section_name + ", ignored; \"" + key + "\" belongs in " +
                         other_name);
      continue;
    }
    // A misspelling of the other section's key ("sampl_num" in common_dump_settings), when no
    // key of this section is as near.
    const std::string lower = internal::AsciiLower(key);
    auto nearest = [&lower](const std::vector<std::string>& keys) {
      size_t best = std::numeric_limits<size_t>::max();
      for (const std::string& k : keys) best = std::min(best, EditDistance(lower, k));
      return best;
    };
    // (A named copy: clang before 16 cannot capture a structured binding.)
    const auto misspelt_other =
        std::find_if(other.begin(), other.end(), [&, &name = key](const auto& k) {
          return IsNear(name, k) && EditDistance(lower, k) < nearest(known);
        });
    if (misspelt_other != other.end()) {
      Warn(key_path, "unknown key, ignored; did you mean \"" + *misspelt_other +
                         "\"? It belongs in " + other_name);
      continue;
    }
    SuggestKey(key_path, key, known);
  }
}

StatusOr<ParsedConfig> Parser::Parse(const std::string& json_text) {
  GRAPHDUMP_RETURN_IF_ERROR(internal::CheckJsonDepth(json_text, file_name_));
  Json root;
  try {
    root = Json::parse(json_text);
  } catch (const Json::exception& e) {  // parse_error, and out_of_range for numbers like 1e999
    return Status::InvalidArgument(Prefix() + "Parse dump json failed, error: " + e.what());
  }
  if (!root.is_object()) {
    return Status::InvalidArgument(Prefix() +
                                   "the dump configuration should be a JSON object "
                                   "with \"common_dump_settings\", but got " +
                                   Describe(root));
  }
  auto common = root.find(kCommon);
  if (common == root.end()) {
    errors_.push_back(Prefix() + kCommon +
                      ": not found; this key is required (an object with dump_mode, path, "
                      "net_name, iteration, input_output, kernels, support_device)");
  } else if (!common->is_object()) {
    errors_.push_back(Prefix() + kCommon + ": should be an object, but got " + Describe(*common));
  } else {
    ParseCommon(*common);
  }
  auto e2e = root.find(kE2e);
  if (e2e != root.end()) {
    if (e2e->is_object()) {
      ParseE2e(*e2e);
    } else {
      errors_.push_back(Prefix() + kE2e + ": should be an object, but got " + Describe(*e2e));
    }
  }
  if (common != root.end() && common->is_object()) ApplyForcedModes();
  for (const auto& [key, value] : root.items()) {
    if (key == kCommon || key == kE2e) continue;
    if (key == "async_dump_settings") {
      Warn(key,
           "ignored: MindSpore removed async_dump_settings in 1.3; set "
           "e2e_dump_settings.enable to false for an asynchronous dump");
      continue;
    }
    if (std::find(CommonKeys().begin(), CommonKeys().end(), key) != CommonKeys().end()) {
      Warn(key,
           std::string("unknown top-level key, ignored; \"") + key + "\" belongs in " + kCommon);
      continue;
    }
    SuggestKey(key, key, {kCommon, kE2e});
  }
  if (!errors_.empty()) return Status::InvalidArgument(Join(errors_, "\n"));
  ParsedConfig parsed;
  parsed.config = std::move(config_);
  parsed.warnings = std::move(warnings_);
  return parsed;
}

}  // namespace

StatusOr<ParsedConfig> ParseConfig(const std::string& json_text, const std::string& file_name,
                                   const std::string& diagnostic_path) {
  Parser parser(file_name, diagnostic_path);
  return parser.Parse(json_text);
}

std::string ConfigToJson(const DumpConfig& config) {
  Json common;
  common["dump_mode"] = config.dump_mode;
  common["path"] = config.path;
  common["net_name"] = config.net_name;
  common["iteration"] = config.iteration.ToString();
  common["saved_data"] = config.saved_data == SavedData::kTensor      ? "tensor"
                         : config.saved_data == SavedData::kStatistic ? "statistic"
                                                                      : "full";
  common["input_output"] = static_cast<uint32_t>(config.input_output);
  common["kernels"] = Json::array();
  for (const KernelPattern& entry : config.kernels) common["kernels"].push_back(entry.text);
  common["support_device"] = config.support_device;
  common["statistic_category"] = Json::array();
  for (StatCategory category : config.statistic_category) {
    common["statistic_category"].push_back(StatCategoryName(category));
  }
  common["op_debug_mode"] = config.op_debug_mode;
  common["overflow_number"] = config.overflow_number;
  common["initial_iteration"] = config.initial_iteration;
  common["file_format"] = config.file_format;
  Json e2e;
  e2e["enable"] = config.enable;
  e2e["trans_flag"] = config.trans_flag;
  e2e["stat_calc_mode"] = config.stat_calc_mode;
  e2e["device_stat_precision_mode"] = config.device_stat_precision_mode;
  e2e["sample_mode"] = config.sample_mode;
  e2e["sample_num"] = config.sample_num;
  e2e["save_kernel_args"] = config.save_kernel_args;
  Json root;
  root[kCommon] = std::move(common);
  root[kE2e] = std::move(e2e);
  return internal::JsonText(root, 4) + "\n";
}

std::string DumpPathProblem(const std::string& path) {
  const bool bad_char = !std::all_of(path.begin(), path.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '/';
  });
  if (bad_char) {
    return "Dump path only support alphabets, digit or {'-', '_', '/'}, but got: \"" + path + "\"";
  }
  if (path.empty() || path[0] != '/') {
    return "Dump path only support absolute path and should start with '/', but got: \"" + path +
           "\"";
  }
  return "";
}

}  // namespace graphdump
