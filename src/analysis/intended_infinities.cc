// What graphs/*.pb tells of a graph's kernels beyond their names: the infinities a kernel writes
// on purpose (docs/analysis.md, "What counts as a hit"), the kernels Inductor generated
// (docs/analysis.md, "Compiled against eager") and the tensors that hold uninitialised memory
// (docs/file-format.md).
#include <set>
#include <string>

#include "graphdump/analysis/dump_index.h"

namespace graphdump::analysis {

std::map<std::string, IntendedInfinity> IntendedInfinities(const GraphInfo& graph) {
  // Operators whose constant argument becomes elements of the output as it is.
  static const std::set<std::string> kFills = {"masked_fill", "where", "full",      "full_like",
                                               "new_full",    "fill",  "index_fill"};
  std::map<std::string, IntendedInfinity> out;
  for (const KernelInfo& k : graph.kernels) {
    std::string op = k.op_type;
    if (!op.empty() && op.back() == '_') op.pop_back();  // in place: masked_fill_
    if (!kFills.count(op)) continue;
    IntendedInfinity found;
    for (const KernelArgument& a : k.arguments) {
      const bool positive = a.value == "inf", negative = a.value == "-inf";
      if (!positive && !negative) continue;
      found.positive |= positive;
      found.negative |= negative;
      found.argument += (found.argument.empty() ? "" : ", ") + a.name + "=" + a.value;
    }
    if (!found.positive && !found.negative) continue;
    found.argument = k.op_type + "(" + found.argument + ")";
    out.emplace(k.full_name, std::move(found));
  }
  return out;
}

std::map<std::string, std::set<std::pair<bool, uint32_t>>> UninitializedTensors(
    const GraphInfo& graph) {
  std::map<std::string, std::set<std::pair<bool, uint32_t>>> out;
  for (const KernelInfo& k : graph.kernels) {
    if (k.uninitialized_inputs.empty() && k.uninitialized_outputs.empty()) continue;
    auto& slots = out[k.full_name];
    for (uint32_t slot : k.uninitialized_inputs) slots.insert({true, slot});
    for (uint32_t slot : k.uninitialized_outputs) slots.insert({false, slot});
  }
  return out;
}

std::set<std::string> UnrecordedArguments(const GraphInfo& graph) {
  std::set<std::string> out;
  for (const KernelInfo& k : graph.kernels) {
    for (const KernelArgument& a : k.arguments) {
      if (a.value == "<runtime>") {
        out.insert(k.full_name);
        break;
      }
    }
  }
  return out;
}

std::map<std::string, CompiledKernelInfo> CompiledKernels(const GraphInfo& graph) {
  std::map<std::string, CompiledKernelInfo> out;
  for (const KernelInfo& k : graph.kernels) {
    auto kind = k.attributes.find("inductor_kernel");
    if (kind == k.attributes.end()) continue;
    CompiledKernelInfo& c = out[k.full_name];
    c.inductor_kernel = kind->second;
    if (auto fused = k.attributes.find("fused_ops"); fused != k.attributes.end()) {
      c.fused_ops = fused->second;
    }
    if (auto outputs = k.attributes.find("output_ops"); outputs != k.attributes.end()) {
      c.output_ops = outputs->second;
    }
    c.input_names = k.input_names;
  }
  return out;
}

}  // namespace graphdump::analysis
