// Decides which kernels of a graph are dumped (docs/configuration.md). The session asks once per
// graph and iteration; the answers are then O(1) lookups per kernel.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graphdump/config.h"
#include "graphdump/graph.h"

namespace graphdump {

// dump_mode 2's set_dump rule: is the module at `module_path` one of the `marked` module paths
// or under one ("features.0" is under "features"; "" marks everything)?
bool UnderMarkedModule(const std::vector<std::string>& marked, const std::string& module_path);
// Sets marked_for_dump on each of `kernels` whose module is under `marked` (the front ends'
// set_dump); the others keep theirs.
void MarkKernelsUnder(const std::vector<std::string>& marked, std::vector<KernelInfo>* kernels);

class Selector {
 public:
  // REQUIRES: config was produced by ParseConfig (regexes already validated).
  explicit Selector(const DumpConfig& config);
  ~Selector();
  Selector(const Selector&) = delete;
  Selector& operator=(const Selector&) = delete;

  // Does rank `rank` dump at all (support_device)? An empty support_device list means every rank.
  bool RankDumps(uint32_t rank) const;

  // Is `iteration` a dumped iteration? (op_debug_mode 4 forces "all".)
  bool IterationDumps(uint64_t iteration) const;

  // Registers a module path marked by set_dump (dump_mode 2): kernels whose module_path equals
  // `module_path` or lies under it ("features" covers "features.0.conv") are selected. The empty
  // string is the root module and selects every kernel. Affects later KernelSelected calls.
  void SetDump(const std::string& module_path);

  // Does the kernel match the kernel selection (dump_mode, kernels, set_dump marks)? Records
  // which `kernels` entries matched, for UnusedEntries().
  bool KernelSelected(const KernelInfo& kernel);

  // One flag per kernel of `graph`: KernelSelected for each.
  std::vector<bool> SelectKernels(const GraphInfo& graph);

  // The `kernels` entries that matched no kernel so far, as written in the configuration.
  std::vector<std::string> UnusedEntries() const;

  // Input/output selection after op_debug_mode forcing: overflow mode (3) dumps both; exception
  // mode (4) dumps only the inputs of the failing kernel.
  bool DumpInputs() const;
  bool DumpOutputs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Why `config` dumps nothing on `rank` ("FILE has enable_dump false", "rank 3 is not in
// support_device [0,1] of FILE"), or "" when it dumps there (Selector::RankDumps decides).
std::string DumpOffReason(const DumpConfig& config, uint32_t rank);

}  // namespace graphdump
