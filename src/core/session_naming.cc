// Where a DumpSession's files go and what they are called (docs/layout.md): the rank
// directory, iteration directories made once, the storage-order layout name of a tensor file
// (trans_flag false), and the numbered names of basenames too long for the file system, listed
// in mapping.csv.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "graphdump/ge_dialect.h"
#include "graphdump/layout.h"
#include "session_impl.h"

namespace graphdump::session_internal {

// For trans_flag false: the view in the order its elements are stored (dimensions sorted by
// decreasing stride), and the name of that layout.
TensorView StorageOrderView(const TensorView& view, std::string* format) {
  *format = kDefaultFormat;
  if (view.strides.empty() || view.IsContiguous()) return view;
  Dims perm;  // of dimension indices
  perm.resize(view.shape.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(),
                   [&](int64_t a, int64_t b) { return view.strides[a] > view.strides[b]; });
  TensorView out = view;
  for (size_t i = 0; i < perm.size(); ++i) {
    out.shape[i] = view.shape[perm[i]];
    out.strides[i] = view.strides[perm[i]];
  }
  if (perm == Dims{0, 2, 3, 1}) {
    *format = "NHWC";
  } else if (perm == Dims{0, 2, 3, 4, 1}) {
    *format = "NDHWC";
  } else {
    *format = "Permuted";
    for (size_t p : perm) *format += fmt::format("_{}", p);
  }
  return out;
}

std::string RootDir(const DumpConfig& config, uint32_t rank) {
  if (!config.ge_layout) return RankDir(config.path, rank);
  GeLayout layout{config.path, GeTimestampDirName(std::chrono::system_clock::now()), rank, ""};
  return fmt::format("{}/{}/{}", layout.dump_path, layout.timestamp, rank);
}

bool SessionImpl::EnsureDir(const std::string& dir) {
  if (created_dirs_.count(dir)) return true;
  Status st = fs_->CreateDirectories(dir);
  if (!st.ok()) {
    Fail(st);
    return false;
  }
  created_dirs_.insert(dir);
  return true;
}

const std::string& SessionImpl::IterationDirOf(uint32_t graph_id) {
  auto graph = graphs_.find(graph_id);
  if (graph == graphs_.end()) {
    unregistered_dir_ = IterationDir(root_, config_.net_name, graph_id, iteration_);
    return unregistered_dir_;
  }
  GraphState& state = graph->second;
  if (state.iteration_dir_of != iteration_) {
    state.iteration_dir = IterationDir(root_, config_.net_name, graph_id, iteration_);
    state.iteration_dir_of = iteration_;
  }
  return state.iteration_dir;
}

const GraphState::FileNames& SessionImpl::FileNamesOf(const KernelInfo& kernel) {
  auto make = [&kernel](GraphState::FileNames* names) {
    names->full_name = kernel.full_name;
    names->op_type = kernel.op_type;
    names->file_op_type = SanitizeName(
        kernel.op_type.empty() ? OpTypeFromFullName(kernel.full_name) : kernel.op_type);
    names->file_op_name = SanitizeName(kernel.full_name);
  };
  auto graph = graphs_.find(kernel.graph_id);
  if (graph == graphs_.end()) {
    make(&unregistered_names_);
    return unregistered_names_;
  }
  std::vector<std::optional<GraphState::FileNames>>& all = graph->second.file_names;
  if (kernel.index >= all.size()) all.resize(kernel.index + 1);
  std::optional<GraphState::FileNames>& names = all[kernel.index];
  // Made again should the kernel at this index be named otherwise (a host's own KernelInfo).
  if (!names || names->full_name != kernel.full_name || names->op_type != kernel.op_type) {
    make(&names.emplace());
  }
  return *names;
}

std::string SessionImpl::MappedName(const std::string& dir, const char* ext, bool names_a_file) {
  uint64_t& counter = mapping_counters_[dir];
  std::string mapped;
  do {
    mapped = fmt::format("{}{}", counter++, ext);
  } while (names_a_file && fs_->Exists(dir + "/" + mapped));
  return mapped;
}

std::string SessionImpl::FileNameIn(const std::string& dir, const std::string& basename,
                                    const char* ext) {
  if (basename.size() <= kMaxBasenameBytes) return basename;
  std::string mapped = MappedName(dir, ext);
  Status st = fs_->AppendToFile(dir + "/mapping.csv", mapped + "," + basename + "\n");
  if (!st.ok()) Fail(st);
  return mapped;
}

}  // namespace graphdump::session_internal
