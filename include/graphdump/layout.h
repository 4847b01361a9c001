// Directory layout and file names of a dump (docs/layout.md). Shared by the writer (session) and
// the readers (analysis), so both agree on every name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "graphdump/dtype.h"

namespace graphdump {

inline constexpr size_t kMaxBasenameBytes = 255;
inline constexpr char kDefaultFormat[] = "DefaultFormat";

// `op_name` in file names: the full name with '/', '\', '.' and space replaced by '_'. Control
// characters become '_' as well, so a name can never form a path.
std::string SanitizeName(std::string_view full_name);
// Whether SanitizeName changes `full_name` (a name already in file form does not).
bool NeedsSanitizing(std::string_view full_name);

// {path}/rank_{rank}
std::string RankDir(const std::string& path, uint32_t rank);
// {rank_dir}/{net_name}/{graph_id}/{iteration}
std::string IterationDir(const std::string& rank_dir, const std::string& net_name,
                         uint32_t graph_id, uint64_t iteration);
// {rank_dir}/{net_name}/{graph_id}/constants
std::string ConstantsDir(const std::string& rank_dir, const std::string& net_name,
                         uint32_t graph_id);
// {rank_dir}/graphs/ms_output_trace_code_graph_{graph_id}.{ext}   (ext "ir" or "pb")
std::string GraphFilePath(const std::string& rank_dir, uint32_t graph_id, const char* ext);
// {rank_dir}/execution_order/ms_execution_order_graph_{graph_id}.csv
std::string ExecutionOrderPath(const std::string& rank_dir, uint32_t graph_id);
// {rank_dir}/execution_order/ms_global_execution_order_graph_{graph_id}.csv
std::string GlobalExecutionOrderPath(const std::string& rank_dir, uint32_t graph_id);
// {rank_dir}/graphs/hyperparameters.jsonl   (the optimizers' hyperparameters by iteration)
std::string HyperparametersPath(const std::string& rank_dir);

// The parts of a tensor file name.
struct TensorFileName {
  std::string op_type;    // sanitized
  std::string op_name;    // sanitized full name
  uint32_t task_id = 0;
  uint32_t stream_id = 0;
  uint64_t timestamp = 0;  // microseconds since the epoch
  bool is_input = false;
  uint32_t slot = 0;
  std::string format = kDefaultFormat;
  std::string dtype = "float32";  // lower-case dtype name (MindSpore CPU dumps: "Float32")

  // "{op_type}.{op_name}.{task}.{stream}.{timestamp}.{input|output}.{slot}.{format}.{dtype}.npy"
  std::string Basename() const;
  // Basename() appended to `out` (a path being built in a reused buffer).
  void AppendBasename(std::string* out) const;
};

// Microseconds since the epoch, from the system clock.
uint64_t NowMicros();

}  // namespace graphdump
