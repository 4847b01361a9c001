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
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
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
  // dump_mode 2: marks the kernels under `module_path` (DumpHost::SetCompiledDump).
  void SetDump(const std::string& module_path);

  // HostGraph.
  std::string ScopeOf(const std::string& module_path) const override { return "Default"; }
  const GraphInfo& graph() const override { return info_; }
  DumpSession* session() const override { return session_; }

  // A call of the graph begins and ends (the session's step of this graph). A call that ends
  // while a watched kernel runs (Starting, no Ran: it raised) ends failed in that kernel:
  // the session has its inputs (op_debug_mode 4 dumps them), and EndCall returns
  // "kernel NAME (KERNEL) failed at FILE:LINE `code`"; else "".
  void BeginCall();
  std::string EndCall();
  // Does kernel `index` dump in this call? False for an index the graph does not have.
  bool Wants(uint32_t index) const;
  // Does this call watch kernel `index` for an exception (op_debug_mode 4)?
  bool WatchesFailure(uint32_t index) const;
  // Kernel `index` (dumped or watched) is about to run with `inputs` (from Inputs), and has
  // run.
  void Starting(uint32_t index, std::shared_ptr<const std::vector<TensorView>> inputs);
  void Ran() { running_.reset(); }
  // The views of kernel `index`'s inputs, taken before it runs; those at `written` (the
  // buffers it writes in place), when the session reads them, are summarised now (a statistic
  // dump) or else copied first.
  std::vector<TensorView> Inputs(uint32_t index, const std::vector<at::Tensor>& inputs,
                                 const std::vector<uint32_t>& written);
  // A kernel of this call that is not dumped, or the generated code between kernels, writes
  // buffers unseen: no statistic is reused for the rest of the call.
  void WriteUnseen() { reuse_ = false; }
  // Kernel `index` has run: dumps it with `inputs` (from Inputs) and the buffers it wrote.
  void Done(uint32_t index, const std::vector<TensorView>& inputs,
            const std::vector<at::Tensor>& outputs);

 private:
  KernelInfo AppendKernel(KernelInfo kernel) override;
  // The origins of a kernel's tensor views: see compiled_graph.cc.
  void InputOrigins(uint32_t index, std::vector<TensorView>* views);
  void OutputOrigins(std::vector<TensorView>* views);

  DumpSession* session_;
  GraphInfo info_;
  std::vector<std::string> set_dump_paths_;  // SetDump's
  bool registered_ = false;
  bool in_call_ = false;
  uint32_t running_index_ = 0;
  std::shared_ptr<const std::vector<TensorView>> running_;  // its inputs; null: none runs
  // Per kernel: does it write only the buffers it reports (a generated kernel, an extern
  // call's `out`)? A fallback operator may write its inputs too.
  std::vector<bool> reports_writes_;
  // In this call: may a kernel's input reuse the statistics of the kernel of this call that
  // wrote it last, or read it first? And the allocations its kernels wrote or read, each with
  // the version its bytes had last (the weak reference keeps the address from another
  // allocation) and, for one first read as a graph input, its version counter then.
  struct Seen {
    Handle storage;
    uint64_t version = 0;
    std::optional<uint64_t> counter;
  };
  bool reuse_ = false;
  std::unordered_map<const void*, Seen> written_;
};

}  // namespace graphdump::torch_internal
