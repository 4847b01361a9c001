// CompiledGraph: one graph that torch.compile generated and ran (an Inductor forward or backward
// graph, docs/compile.md), dumped kernel by kernel as it really ran. Its kernels are Inductor's
// generated kernels (fused C++ loops) and the extern calls its generated code makes (mm,
// convolution, fallbacks), known in full when the graph is compiled: the Python package
// (graphdump/_compiled.py) describes them from Inductor's scheduler and FX node metadata, and
// the generated code reports each kernel's buffers as it runs.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graphdump/session.h"
#include "graphdump/status.h"
#include "graphdump/torch/host_graph.h"

namespace graphdump::torch_internal {

class CompiledGraph final : public HostGraph {
 public:
  // `kernels` in execution order, each with its full name without the "-op{N}" suffix.
  // `session` may be null.
  CompiledGraph(uint32_t graph_id, DumpSession* session, const std::string& name,
                std::vector<KernelInfo> kernels);

  // Registers the graph with the session (its graph files). Idempotent.
  Status Register();

  // HostGraph.
  std::string ScopeOf(const std::string& module_path) const override { return "Default"; }
  const GraphInfo& graph() const override { return info_; }
  DumpSession* session() const override { return session_; }

  // A call of the graph begins and ends (the session's step of this graph).
  void BeginCall();
  void EndCall();
  // Does kernel `index` dump in this call? False for an index the graph does not have.
  bool Wants(uint32_t index) const;
  // The views of kernel `index`'s inputs, taken before it runs; those at `written` (the
  // buffers it writes in place) are copied first when the session reads them.
  std::vector<TensorView> Inputs(uint32_t index, const std::vector<at::Tensor>& inputs,
                                 const std::vector<uint32_t>& written) const;
  // Kernel `index` has run: dumps it with `inputs` (from Inputs) and the buffers it wrote.
  void Done(uint32_t index, const std::vector<TensorView>& inputs,
            const std::vector<at::Tensor>& outputs);

 private:
  KernelInfo AppendKernel(KernelInfo kernel) override;

  DumpSession* session_;
  GraphInfo info_;
  bool registered_ = false;
  bool in_call_ = false;
};

}  // namespace graphdump::torch_internal
