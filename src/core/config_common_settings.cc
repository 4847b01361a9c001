// ParseConfig, the keys of common_dump_settings (docs/configuration.md's table): each read,
// validated and stored by its own ConfigParser member, then ParseCommon over them all.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "graphdump/config.h"
#include "graphdump/internal/config_parser.h"
#include "graphdump/internal/kernel_entry.h"
#include "graphdump/layout.h"
#include "graphdump/statistic_catalogue.h"

namespace graphdump {
namespace internal {
namespace {

std::string ValidStatCategories() {
  std::vector<std::string> names;
  for (const StatisticInfo& info : StatisticCatalogue())
    names.push_back("'" + std::string(info.name) + "'");
  return "[" + Join(names, ", ") + "]";
}

}  // namespace

void ConfigParser::ParseDumpMode(const Json& common) {
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

void ConfigParser::ParsePath(const Json& common) {
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

void ConfigParser::ParseNetName(const Json& common) {
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

void ConfigParser::ParseIteration(const Json& common) {
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

void ConfigParser::ParseSavedData(const Json& common) {
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

void ConfigParser::ParseInputOutput(const Json& common) {
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

void ConfigParser::ParseKernels(const Json& common) {
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

void ConfigParser::ParseSupportDevice(const Json& common) {
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

void ConfigParser::ParseStatisticCategory(const Json& common) {
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

void ConfigParser::ParseOpDebugMode(const Json& common) {
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

void ConfigParser::ParseFileFormat(const Json& common) {
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

void ConfigParser::ParseCommon(const Json& common) {
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

}  // namespace internal

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
