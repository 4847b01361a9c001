// Selector: which ranks, iterations, kernels and slots are dumped (docs/configuration.md).
//
// Regexes are compiled once here. A kernel is tested against every entry that has not matched
// yet even after another entry selected it, so UnusedEntries() never reports an entry that
// would have matched; once all entries were used, the first match ends the test.
#include "graphdump/selector.h"

#include <re2/re2.h>

#include <algorithm>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "graphdump/internal/kernel_entry.h"

namespace graphdump {

struct Selector::Impl {
  explicit Impl(const DumpConfig& c) : config(c) {}

  bool ListedKernelSelected(const KernelInfo& kernel);
  bool SetDumpSelected(const KernelInfo& kernel) const;
  // Tests entry `index` unless it was already used and the kernel is already selected.
  bool Visit(size_t index, bool selected) const { return !selected || !used[index]; }
  void MarkUsed(size_t index) {
    if (!used[index]) {
      used[index] = true;
      ++used_count;
    }
  }

  DumpConfig config;
  uint32_t dump_mode = 0;                                           // after op_debug_mode forcing
  std::vector<std::pair<std::unique_ptr<RE2>, size_t>> regexes;     // (regex, entry index)
  std::unordered_map<std::string, std::vector<size_t>> full_names;  // name -> entry indices
  std::vector<std::pair<std::string, size_t>> op_types;             // (lower-case type, index)
  std::vector<bool> used;
  size_t used_count = 0;
  std::vector<std::string> set_dump_paths;
};

bool Selector::Impl::ListedKernelSelected(const KernelInfo& kernel) {
  if (config.kernels.empty()) return true;
  bool selected = false;
  for (const auto& [regex, index] : regexes) {
    if (!Visit(index, selected)) continue;
    if (regex->ok() && RE2::FullMatch(kernel.full_name, *regex)) {
      selected = true;
      MarkUsed(index);
    }
    if (selected && used_count == used.size()) return true;
  }
  auto it = full_names.find(kernel.full_name);
  if (it != full_names.end()) {
    selected = true;
    for (size_t index : it->second) MarkUsed(index);
  }
  if (selected && used_count == used.size()) return true;
  if (op_types.empty()) return selected;
  const std::string type = internal::AsciiLower(OpTypeFromFullName(kernel.full_name));
  for (const auto& [pattern, index] : op_types) {
    if (!Visit(index, selected)) continue;
    if (type.find(pattern) != std::string::npos) {
      selected = true;
      MarkUsed(index);
    }
  }
  return selected;
}

bool Selector::Impl::SetDumpSelected(const KernelInfo& kernel) const {
  return kernel.marked_for_dump || UnderMarkedModule(set_dump_paths, kernel.module_path);
}

bool UnderMarkedModule(const std::vector<std::string>& marked, const std::string& module_path) {
  return std::any_of(marked.begin(), marked.end(), [&](const std::string& p) {
    return p.empty() || module_path == p ||
           (module_path.size() > p.size() && module_path.compare(0, p.size(), p) == 0 &&
            module_path[p.size()] == '.');
  });
}

void MarkKernelsUnder(const std::vector<std::string>& marked, std::vector<KernelInfo>* kernels) {
  for (KernelInfo& k : *kernels) {
    if (UnderMarkedModule(marked, k.module_path)) k.marked_for_dump = true;
  }
}

Selector::Selector(const DumpConfig& config) : impl_(std::make_unique<Impl>(config)) {
  Impl& impl = *impl_;
  impl.dump_mode = config.op_debug_mode != 0 ? 0 : config.dump_mode;
  impl.used.assign(config.kernels.size(), false);
  RE2::Options options;
  options.set_log_errors(false);
  for (size_t i = 0; i < config.kernels.size(); ++i) {
    const KernelPattern& entry = config.kernels[i];
    switch (entry.kind) {
      case KernelPattern::Kind::kRegex:
        // An invalid regex (only possible when REQUIRES is broken) never matches.
        impl.regexes.emplace_back(std::make_unique<RE2>(entry.pattern, options), i);
        break;
      case KernelPattern::Kind::kFullName:
        impl.full_names[entry.pattern].push_back(i);
        break;
      case KernelPattern::Kind::kOpType:
        impl.op_types.emplace_back(internal::AsciiLower(entry.pattern), i);
        break;
    }
  }
}

Selector::~Selector() = default;

bool Selector::RankDumps(uint32_t rank) const {
  if (!impl_->config.dump_enabled) return false;
  const std::vector<uint32_t>& devices = impl_->config.support_device;
  return devices.empty() || std::find(devices.begin(), devices.end(), rank) != devices.end();
}

bool Selector::IterationDumps(uint64_t iteration) const {
  return impl_->config.op_debug_mode == 4 || impl_->config.iteration.Contains(iteration);
}

void Selector::SetDump(const std::string& module_path) {
  impl_->set_dump_paths.push_back(module_path);
}

bool Selector::KernelSelected(const KernelInfo& kernel) {
  switch (impl_->dump_mode) {
    case 1:
      return impl_->ListedKernelSelected(kernel);
    case 2:
      return impl_->SetDumpSelected(kernel);
    default:
      return true;
  }
}

std::vector<bool> Selector::SelectKernels(const GraphInfo& graph) {
  std::vector<bool> selected(graph.kernels.size());
  for (size_t i = 0; i < graph.kernels.size(); ++i) selected[i] = KernelSelected(graph.kernels[i]);
  return selected;
}

std::vector<std::string> Selector::UnusedEntries() const {
  std::vector<std::string> unused;
  if (impl_->dump_mode != 1) return unused;
  for (size_t i = 0; i < impl_->used.size(); ++i) {
    const std::string& text = impl_->config.kernels[i].text;
    if (!impl_->used[i] && std::find(unused.begin(), unused.end(), text) == unused.end()) {
      unused.push_back(text);
    }
  }
  return unused;
}

bool Selector::DumpInputs() const {
  const DumpConfig& c = impl_->config;
  if (c.op_debug_mode == 3 || c.op_debug_mode == 4) return true;
  return c.input_output != InputOutput::kOutputs;
}

bool Selector::DumpOutputs() const {
  const DumpConfig& c = impl_->config;
  if (c.op_debug_mode == 3) return true;
  if (c.op_debug_mode == 4) return false;
  return c.input_output != InputOutput::kInputs;
}

std::string DumpOffReason(const DumpConfig& config, uint32_t rank) {
  if (Selector(config).RankDumps(rank)) return "";
  const std::string source = config.source_file.empty() ? "the configuration" : config.source_file;
  if (!config.dump_enabled) return source + " has enable_dump false";
  std::string listed;
  for (uint32_t d : config.support_device)
    listed += (listed.empty() ? "" : ",") + std::to_string(d);
  return "rank " + std::to_string(rank) + " is not in support_device [" + listed + "] of " + source;
}

}  // namespace graphdump
