// The second configuration dialect: Ascend GE / TensorFlow-adapter dump options (docs/ascend.md).
//
//   {"dump": {"enable_dump": true, "dump_path": "/tmp/ge_dump", "dump_step": "0|5|10",
//             "dump_mode": "all", "dump_layer": "conv1 Default/net/fc-Dense/MatMul-op7"}}
//
// enable_dump     bool, or "true"/"false"/"1"/"0" as the TF adapter writes it; default false
// dump_path       required when enabled; a relative path is taken from the working directory
// dump_step       iterations in the grammar of `iteration` (docs/configuration.md): "0|5|10",
//                 "0-3"; default: every step
// dump_mode       "input" | "output" | "all"; default "output" (the TF adapter's default)
// dump_layer      space-separated op names; empty means every kernel. A name selects the kernel
//                 whose full name, or whose last '/'-segment, equals it.
// Files are Ascend dump files (file_format "bin") in the GE layout:
//   {dump_path}/{YYYYMMDDhhmmss}/{device_id}/{model_name}/{model_id}/{data_index}/
//       {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}
// with model_name the net name, model_id the graph id and data_index the iteration.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "graphdump/config.h"
#include "graphdump/file_system.h"
#include "graphdump/status.h"

namespace graphdump {

// The options as written, before they become a DumpConfig.
struct GeDumpOptions {
  bool enable_dump = false;
  std::string dump_path;
  std::string dump_step;  // "" means every step
  std::string dump_mode = "output";
  std::string dump_layer;  // space-separated; "" means every kernel
};

// True when `json_text` is a JSON object with a "dump" object and no "common_dump_settings"
// (so a loader can tell the two dialects apart). False for anything unparsable.
bool IsGeDumpConfig(const std::string& json_text);

// Parses {"dump": {...}}. Errors are InvalidArgument, name the key ("dump.dump_mode"), say
// what was found and what is allowed; unknown keys under "dump" are warnings naming the known
// ones. `file_name` is used in messages only.
StatusOr<GeDumpOptions> ParseGeDumpOptions(const std::string& json_text,
                                           const std::string& file_name,
                                           std::vector<std::string>* warnings);

// Validates `options` (as given in a file or as run/train flags) and makes the DumpConfig:
// ge_layout, file_format "bin", path = dump_path made absolute, iteration = dump_step,
// input_output from dump_mode, dump_mode 1 with one kernels entry per dump_layer name (0 when
// empty), net_name left empty for the host to fill with the model's name. Returns null when
// enable_dump is false. `source` names the file or "command line" in messages.
StatusOr<std::unique_ptr<ParsedConfig>> GeOptionsToConfig(const GeDumpOptions& options,
                                                          const std::string& source);

// ParseGeDumpOptions then GeOptionsToConfig, warnings kept in the result.
StatusOr<std::unique_ptr<ParsedConfig>> ParseGeDumpConfig(const std::string& json_text,
                                                          const std::string& file_name);

// The configuration a GE-dialect file gave (config.ge_layout, or dump_enabled false), written
// back in that dialect with every default filled in: {"dump": {"enable_dump", "dump_path",
// "dump_step" (absent: every step), "dump_mode", "dump_layer" (absent: every kernel)}}.
// Indented JSON ending in a newline; reading it back gives the same configuration.
std::string GeConfigToJson(const DumpConfig& config);

// "YYYYMMDDhhmmss" of `time` in local time, as GE names the session directory.
std::string GeTimestampDirName(std::chrono::system_clock::time_point time);

// Where a GE-layout dump puts its files. One per session: the timestamp is fixed when the
// session starts.
struct GeLayout {
  std::string dump_path;   // absolute
  std::string timestamp;   // GeTimestampDirName of the session start
  uint32_t device_id = 0;  // the rank
  std::string model_name;  // the net name; sanitised like op names

  // {dump_path}/{timestamp}/{device_id}/{model_name}/{model_id}/{data_index}
  std::string StepDir(uint32_t model_id, uint64_t data_index) const;
};

// "{op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}" with '.', '/', '\' and space in
// op_type and op_name replaced by '_'. `op_name` is the kernel's full name.
std::string GeFileBaseName(std::string_view op_type, std::string_view op_name, uint32_t task_id,
                           uint32_t stream_id, uint64_t timestamp);

// The name to write `basename` under in `dir`: itself when at most 255 bytes, otherwise the
// first decimal number with no file of that name in `dir`, recorded as "{number},{basename}"
// in `dir`/mapping.csv. Errors are the file system's.
StatusOr<std::string> GeFileNameIn(FileSystem& fs, const std::string& dir,
                                   const std::string& basename);

// True for nodes the GE dialect does not dump: data, constant and variable nodes (Data,
// Const, Constant, Variable, Parameter, Placeholder), control flow (If, While, Loop, Case,
// Switch, Merge, Enter, Exit, StreamSwitch, Label*...), graph plumbing (NetOutput,
// TupleConstruct, ListUnpack, GetAttr...) and any TorchScript prim:: node. Case-insensitive;
// an "aten::" prefix is ignored.
bool GeSkipsOpType(std::string_view op_type);

}  // namespace graphdump
