// ParseConfig: MindSpore's data_dump.json (docs/configuration.md), validated in one pass: the
// parser's frame (sections, typed readers, e2e_dump_settings, modes that force other keys,
// unknown keys and their suggestions). The keys of common_dump_settings are read in
// config_common_settings.cc.
//
// Every key is checked even after an error, so a user sees all problems of a file at once.
// Messages keep the substance of MindSpore's own error texts (dump_json_parser.cc) and add the
// key path, the value found and what is allowed.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graphdump/config.h"
#include "graphdump/internal/config_parser.h"
#include "graphdump/internal/json_text.h"
#include "graphdump/internal/kernel_entry.h"

namespace graphdump {
namespace internal {
namespace {

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

}  // namespace

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

const Json* ConfigParser::Find(const Json& section, const std::string& section_name,
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

std::optional<uint64_t> ConfigParser::ReadUint(const Json& section, const std::string& section_name,
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

std::optional<std::string> ConfigParser::ReadString(const Json& section, const std::string& section_name,
                                              const std::string& key, bool required,
                                              const char* allowed) {
  const Json* value = Find(section, section_name, key, required, allowed);
  if (value == nullptr) return std::nullopt;
  if (value->is_string()) return value->get<std::string>();
  Error(section_name + "." + key,
        "should be string type, but got " + Describe(*value) + " (allowed: " + allowed + ")");
  return std::nullopt;
}

std::optional<bool> ConfigParser::ReadBool(const Json& section, const std::string& section_name,
                                     const std::string& key) {
  const Json* value = Find(section, section_name, key, false, "true or false");
  if (value == nullptr) return std::nullopt;
  if (value->is_boolean()) return value->get<bool>();
  Error(section_name + "." + key,
        "should be boolean type (true or false, without quotes), but got " + Describe(*value));
  return std::nullopt;
}

const Json* ConfigParser::ReadArray(const Json& section, const std::string& section_name,
                              const std::string& key, bool required, const char* allowed) {
  const Json* value = Find(section, section_name, key, required, allowed);
  if (value == nullptr) return nullptr;
  if (value->is_array()) return value;
  Error(section_name + "." + key,
        "should be array type, but got " + Describe(*value) + " (allowed: " + allowed + ")");
  return nullptr;
}

void ConfigParser::ApplyForcedModes() {
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

void ConfigParser::ParseE2e(const Json& e2e) {
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

void ConfigParser::SuggestKey(const std::string& key_path, const std::string& key,
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

void ConfigParser::CheckUnknownKeys(const Json& object, const std::string& section_name,
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

StatusOr<ParsedConfig> ConfigParser::Parse(const std::string& json_text) {
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

}  // namespace internal

StatusOr<ParsedConfig> ParseConfig(const std::string& json_text, const std::string& file_name,
                                   const std::string& diagnostic_path) {
  internal::ConfigParser parser(file_name, diagnostic_path);
  return parser.Parse(json_text);
}

}  // namespace graphdump
