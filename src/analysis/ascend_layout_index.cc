// Indexing a GE-layout dump or `graphdump convert` output (docs/ascend.md): its Ascend dump
// files, by device, model and data index, as ranks, graphs and iterations.
#include <filesystem>
#include <map>
#include <tuple>
#include <utility>

#include "dump_index_parts.h"
#include "graphdump/analysis/ascend_dump.h"
#include "graphdump/analysis/ascend_index.h"
#include "graphdump/analysis/dump_index.h"
#include "graphdump/layout.h"

namespace graphdump::analysis {
namespace fs = std::filesystem;

StatusOr<bool> IndexAscendLayout(const std::string& dir, DumpIndex* index) {
  StatusOr<AscendIndex> ascend = IndexAscendDump(dir);
  if (!ascend.ok() && ascend.status().code() == StatusCode::kIOError) return ascend.status();
  if (!ascend.ok() || ascend->entries.empty()) return false;
  for (const std::string& problem : ascend->problems) index->skipped.push_back({problem, problem});
  // rank -> graph -> iteration -> kernel (op name and timestamp) -> tensors
  using Kernels = std::map<std::tuple<uint64_t, std::string, std::string>, KernelEntry>;
  std::map<uint32_t, std::map<uint32_t, std::pair<std::string, std::map<uint64_t, Kernels>>>> tree;
  std::string previous_path;
  for (const AscendIndexEntry& e : ascend->entries) {
    auto& [net, iterations] = tree[e.ge_layout ? e.device_id : 0][e.ge_layout ? e.model_id : 0];
    net = e.ge_layout ? e.model_name : "converted";
    KernelEntry& k =
        iterations[e.ge_layout ? e.data_index : 0][{e.timestamp, e.op_name, e.op_type}];
    k.op_type = e.op_type;
    k.op_name = k.full_name = e.op_name;
    k.first_timestamp = e.timestamp;
    TensorEntry t;
    t.is_input = e.is_input;
    t.slot = e.slot;
    t.format = kDefaultFormat;
    t.path = e.path;
    t.in_dump_file = e.in_dump_file;
    t.ascend = std::make_shared<const AscendTensor>(e.tensor);
    t.timestamp = e.timestamp;
    // A dump file holds several tensors: its size counts once, with its first tensor.
    std::error_code ec;
    if (e.path != previous_path) t.file_bytes = fs::file_size(e.path, ec);
    previous_path = e.path;
    k.tensors.push_back(std::move(t));
  }
  for (auto& [rank, graphs] : tree) {
    RankEntry r;
    r.rank = rank;
    r.dir = dir;
    for (auto& [graph_id, net_and_iterations] : graphs) {
      GraphEntry g;
      g.graph_id = graph_id;
      g.net_name = net_and_iterations.first;
      for (auto& [iteration, kernels] : net_and_iterations.second) {
        IterationEntry it;
        it.iteration = static_cast<int64_t>(iteration);
        it.dir = dir;
        // Dump files carry no execution order: kernels follow their timestamps. Each file is
        // one call of its kernel.
        std::map<std::pair<std::string, std::string>, std::vector<size_t>> calls;
        for (auto& [key, k] : kernels) {
          calls[{k.op_type, k.op_name}].push_back(it.kernels.size());
          it.kernels.push_back(std::move(k));
        }
        for (const auto& [name, positions] : calls) {
          for (size_t c = 0; c < positions.size(); ++c) {
            it.kernels[positions[c]].call = static_cast<uint32_t>(c);
            it.kernels[positions[c]].calls = static_cast<uint32_t>(positions.size());
          }
        }
        g.iterations.push_back(std::move(it));
      }
      r.graphs.push_back(std::move(g));
    }
    index->ranks.push_back(std::move(r));
  }
  return true;
}

}  // namespace graphdump::analysis
