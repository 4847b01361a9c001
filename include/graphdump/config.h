// The dump configuration: MindSpore's data_dump.json (docs/configuration.md), parsed and validated.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "graphdump/statistic_catalogue.h"
#include "graphdump/status.h"

namespace graphdump {

// Environment variables (docs/configuration.md).
inline constexpr char kConfigEnv[] = "GRAPHDUMP_CONFIG";
inline constexpr char kMindSporeConfigEnv[] = "MINDSPORE_DUMP_CONFIG";
inline constexpr char kDiagnosticPathEnv[] = "MS_DIAGNOSTIC_DATA_PATH";

enum class SavedData { kTensor, kStatistic, kFull };
enum class InputOutput { kBoth = 0, kInputs = 1, kOutputs = 2 };

// A set of iterations: "all" or inclusive ranges (docs/configuration.md).
class IterationSet {
 public:
  // Parses `text`. Errors name `key_path`, quote the text and say what is allowed.
  static StatusOr<IterationSet> Parse(const std::string& text, const std::string& key_path);
  static IterationSet All();
  bool Contains(uint64_t iteration) const;
  bool all() const { return all_; }
  const std::vector<std::pair<uint64_t, uint64_t>>& ranges() const { return ranges_; }
  std::string ToString() const;  // canonical form: "all" or "0|5-8"

 private:
  bool all_ = false;
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;  // sorted, inclusive
};

// One entry of common_dump_settings.kernels after normalisation (docs/configuration.md): a
// pattern of kernel names (a name-regex, a full name or an op type).
struct KernelPattern {
  enum class Kind { kRegex, kFullName, kOpType };
  Kind kind = Kind::kOpType;
  std::string text;      // the normalised entry as the user wrote it (quotes, spaces removed)
  std::string pattern;   // regex body, full name, or lower-cased op type
};

struct DumpConfig {
  // common_dump_settings
  uint32_t dump_mode = 0;                   // 0 all, 1 listed kernels, 2 set_dump marks
  std::string path;                         // absolute dump root (after MS_DIAGNOSTIC_DATA_PATH)
  std::string net_name;
  IterationSet iteration = IterationSet::All();
  SavedData saved_data = SavedData::kTensor;
  InputOutput input_output = InputOutput::kBoth;
  std::vector<KernelPattern> kernels;
  std::vector<uint32_t> support_device;
  std::vector<StatCategory> statistic_category = {StatCategory::kMax, StatCategory::kMin,
                                                   StatCategory::kL2Norm};
  uint32_t op_debug_mode = 0;               // 0, 3 overflow, 4 exception (1 and 2 become 3)
  uint32_t overflow_number = 0;             // 0 unlimited
  uint64_t initial_iteration = 0;
  std::string file_format = "npy";          // "npy" or "bin"
  // Set by the GE/TF-adapter dialect (ge_dialect.h, docs/ascend.md). Files go to the GE layout
  // {path}/{YYYYMMDDhhmmss}/{device_id}/{net_name}/{graph_id}/{iteration}/ instead of rank_{r}/,
  // and data, control-flow and constant nodes are not dumped (GeSkipsOpType).
  bool ge_layout = false;
  // False for a configuration that exists but turns dumping off (GE dialect enable_dump false).
  bool dump_enabled = true;
  // e2e_dump_settings
  bool enable = true;                       // true synchronous, false asynchronous
  bool trans_flag = true;
  std::string stat_calc_mode = "host";      // "host" or "device"
  std::string device_stat_precision_mode = "high";
  uint32_t sample_mode = 0;
  uint64_t sample_num = 100;
  bool save_kernel_args = false;

  std::string source_file;   // the configuration file, when read from one
  std::string source_bytes;  // its exact bytes, copied to .dump_metadata/data_dump.json
};

// Result of parsing: the config, plus warnings (unknown keys with the nearest known key,
// forced modes). Errors are returned as one InvalidArgument status listing every problem found,
// one per line, each naming its key path ("common_dump_settings.iteration: ...").
struct ParsedConfig {
  DumpConfig config;
  std::vector<std::string> warnings;
};

// Parses configuration JSON text. `file_name` is used in messages only. Uses `diagnostic_path`
// (the value of MS_DIAGNOSTIC_DATA_PATH, empty when unset) when common_dump_settings.path is
// missing or empty.
StatusOr<ParsedConfig> ParseConfig(const std::string& json_text, const std::string& file_name,
                                   const std::string& diagnostic_path);

// Reads and parses a configuration file. The file must exist and end in ".json".
StatusOr<ParsedConfig> LoadConfigFile(const std::filesystem::path& file,
                                      const std::string& diagnostic_path);

// Resolves the configuration from the environment (docs/configuration.md): GRAPHDUMP_CONFIG, else
// MINDSPORE_DUMP_CONFIG (a warning when both are set). Returns a null pointer when neither is
// set (dumping off), and an error when the named file is missing or invalid.
StatusOr<std::unique_ptr<ParsedConfig>> LoadConfigFromEnvironment();

// MindSpore's rule for a dump path (an absolute path of [A-Za-z0-9_/-]): "" when `path` keeps
// it, else the message saying what is wrong.
std::string DumpPathProblem(const std::string& path);

// The effective configuration as JSON with every default filled in (for check-config).
std::string ConfigToJson(const DumpConfig& config);

// The statistic.csv column title of a category ("Max Value", "NaN Count", "MD5"...).
const char* StatCategoryColumn(StatCategory category);

// The configuration spelling of a category ("max", "nan count", "md5"...).
const char* StatCategoryName(StatCategory category);

}  // namespace graphdump
