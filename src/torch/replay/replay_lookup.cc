// graphdump replay, finding the kernel (replay_parts.h): the rank, the full name a user's text
// names, the kernel's call in an iteration, its dumped tensors and its entry in the graph file.
#include "graphdump/torch/replay.h"

#include <torch/script.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <variant>

#include "torchscript/graph_compiler.h"
#include "graphdump/analysis/dump_index.h"
#include "graphdump/analysis/npy_file.h"
#include "graphdump/analysis/precision_verdict.h"
#include "graphdump/analysis/tensor_math.h"
#include "graphdump/file_system.h"
#include "graphdump/graph_files.h"
#include "graphdump/npy.h"
#include "graphdump/torch/scalar_type.h"
#include "replay/replay_execute.h"
#include "replay/replay_parts.h"
#include "torch_compat.h"

namespace graphdump {
namespace replay_internal {



std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string JoinNames(const std::vector<std::string>& names, size_t limit) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < limit; ++i) text += "\n  " + names[i];
  if (names.size() > limit) text += "\n  ... (" + std::to_string(names.size() - limit) + " more)";
  return text;
}
StatusOr<const RankEntry*> ChooseRank(const DumpIndex& index, std::optional<uint32_t> rank,
                                      const std::string& dir) {
  if (index.ranks.empty()) return Status::InvalidArgument(dir + " holds no rank directory");
  if (!rank) return &index.ranks.front();
  std::string have;
  for (const RankEntry& r : index.ranks) {
    if (r.rank == *rank) return &r;
    have += (have.empty() ? "" : ", ") + std::to_string(r.rank);
  }
  return Status::InvalidArgument("--rank " + std::to_string(*rank) + ": " + dir + " holds ranks " +
                                 have);
}

// The full name `wanted` names in `rank`: itself, or the one kernel whose op type equals it or
// whose full name contains it (case-insensitively).
StatusOr<std::string> ResolveKernelName(const RankEntry& rank, const std::string& wanted,
                                        const std::string& dir) {
  std::set<std::string> all;
  for (const GraphEntry& g : rank.graphs) {
    for (const std::string& name : g.execution_order) all.insert(name);
    for (const IterationEntry& it : g.iterations) {
      for (const KernelEntry& k : it.kernels) {
        if (!k.is_parameter) all.insert(k.full_name);
      }
    }
  }
  if (all.count(wanted)) return wanted;
  const std::string needle = Lower(wanted);
  std::vector<std::string> by_type, by_substring;
  for (const std::string& name : all) {
    if (Lower(OpTypeFromFullName(name)) == needle) by_type.push_back(name);
    if (Lower(name).find(needle) != std::string::npos) by_substring.push_back(name);
  }
  const std::vector<std::string>& hits = by_type.empty() ? by_substring : by_type;
  if (hits.size() == 1) return hits[0];
  if (hits.empty()) {
    return Status::InvalidArgument("no kernel of " + dir + " is named '" + wanted +
                                   "' (a full name, an op type or a piece of a full name); its "
                                   "kernels:" +
                                   JoinNames(std::vector<std::string>(all.begin(), all.end()), 20));
  }
  return Status::InvalidArgument("'" + wanted + "' matches " + std::to_string(hits.size()) +
                                 " kernels of " + dir +
                                 "; give one full name:" + JoinNames(hits, 20));
}

StatusOr<Located> Locate(const RankEntry& rank, const std::string& full_name,
                         std::optional<int64_t> iteration, std::optional<uint32_t> call,
                         const std::string& dir, std::vector<std::string>* notes) {
  std::vector<Located> found;
  uint32_t calls = 0;
  for (const GraphEntry& g : rank.graphs) {
    for (const IterationEntry& it : g.iterations) {
      if (it.iteration < 0) continue;  // constants/
      for (const KernelEntry& k : it.kernels) {
        if (k.full_name != full_name) continue;
        if (!iteration || it.iteration == *iteration) calls = std::max(calls, k.calls);
        if (k.call == call.value_or(0)) found.push_back({&rank, &g, &it, &k});
      }
    }
  }
  if (call && *call > 0 && found.empty()) {
    return Status::InvalidArgument("--call " + std::to_string(*call) + ": " + dir +
                                   " holds kernel " + full_name + " " + std::to_string(calls) +
                                   " time(s) per iteration (calls count from 0)");
  }
  if (!call && calls > 1 && notes) {
    notes->push_back("replayed call 0 of " + std::to_string(calls) + " in the iteration " +
                     "(choose with --call)");
  }
  if (found.empty()) {
    return Status::InvalidArgument("kernel " + full_name + " has no dumped tensors in " + dir +
                                   " (rank " + std::to_string(rank.rank) +
                                   "): the configuration did not select it");
  }
  std::string have;
  for (const Located& l : found) {
    have += (have.empty() ? "" : ", ") + std::to_string(l.iteration->iteration);
  }
  if (iteration) {
    for (const Located& l : found) {
      if (l.iteration->iteration == *iteration) return l;
    }
    return Status::InvalidArgument("--iteration " + std::to_string(*iteration) + ": " + dir +
                                   " holds kernel " + full_name + " in iterations " + have);
  }
  if (found.size() > 1 && notes) {
    notes->push_back("replayed iteration " + std::to_string(found[0].iteration->iteration) +
                     " of " + have + " (choose with --iteration)");
  }
  return found.front();
}


StatusOr<at::Tensor> LoadTensor(const TensorEntry& entry) {
  auto mapped = analysis::OpenTensor(entry);
  if (!mapped.ok()) return mapped.status();
  const NpyInfo& info = (*mapped)->info();
  auto stored = ToScalarType(info.dtype);
  if (!stored) {
    return Status::Unsupported(entry.path + ": LibTorch has no dtype for " +
                               std::string(DTypeName(info.dtype)));
  }
  std::vector<int64_t> shape = info.shape;
  if (info.fortran_order) std::reverse(shape.begin(), shape.end());
  at::Tensor t =
      at::from_blob(const_cast<uint8_t*>((*mapped)->data()), shape, at::TensorOptions(*stored))
          .clone();
  if (info.fortran_order && shape.size() > 1) {
    std::vector<int64_t> order(shape.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(order.size() - 1 - i);
    t = t.permute(order).contiguous();
  }
  // A bfloat16 tensor is stored as float32; the file name keeps its dtype.
  if (entry.dtype && *entry.dtype != info.dtype) {
    auto named = ToScalarType(*entry.dtype);
    if (named) t = t.to(*named);
  }
  return t;
}
StatusOr<KernelTensors> LoadKernelTensors(const KernelEntry& kernel) {
  KernelTensors out;
  for (const TensorEntry& t : kernel.tensors) {
    if (t.path.empty()) continue;
    auto& list = t.is_input ? out.inputs : out.outputs;
    if (t.slot != list.size()) {
      return Status::Corrupt("kernel " + kernel.full_name + ": " +
                             (t.is_input ? "input" : "output") + " slot " +
                             std::to_string(list.size()) + " has no file (next: " + t.path + ")");
    }
    auto tensor = LoadTensor(t);
    if (!tensor.ok()) return tensor.status();
    list.push_back(std::move(*tensor));
  }
  return out;
}

StatusOr<const KernelInfo*> FindGraphKernel(const std::string& rank_dir, uint32_t graph_id,
                                            const std::string& full_name, GraphInfo* graph,
                                            std::string* missing) {
  const std::string path =
      rank_dir + "/graphs/ms_output_trace_code_graph_" + std::to_string(graph_id) + ".pb";
  auto bytes = ReadRegularFile(path);
  if (!bytes.ok()) {
    *missing =
        "the dump has no readable graph file " + path + " (" + bytes.status().message() + ")";
    return nullptr;
  }
  auto parsed = ParseGraphProto(*bytes, path);
  if (!parsed.ok()) return parsed.status();
  *graph = std::move(*parsed);
  for (const KernelInfo& k : graph->kernels) {
    if (k.full_name == full_name) return &k;
  }
  *missing = "the graph file " + path + " does not list the kernel";
  return nullptr;
}

}  // namespace replay_internal
}  // namespace graphdump
