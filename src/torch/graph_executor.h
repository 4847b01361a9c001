// GraphExecutor: runs a CompiledGraph node by node, calling the dump session's hooks for every
// kernel the session wants. Never throws: LibTorch errors come back as a Status that names the
// kernel's full name and source line.
#pragma once

#include <torch/script.h>

#include <functional>
#include <string>
#include <vector>

#include "graph_compiler.h"
#include "graphdump/session.h"
#include "graphdump/status.h"

namespace graphdump::torch_internal {

// Sees every kernel's outputs as it finishes (the trainer maps autograd nodes to kernels).
using KernelOutputObserver =
    std::function<void(const KernelInfo& kernel, const std::vector<c10::IValue>& outputs)>;

class GraphExecutor {
 public:
  // `graph` must outlive the executor. `session` may be null (no dump) and is not owned.
  GraphExecutor(const CompiledGraph* graph, DumpSession* session);

  // Runs the graph once. `inputs` are the graph inputs, the module object first. The caller
  // brackets the run with the session's BeginStep/EndStep.
  StatusOr<c10::IValue> Run(std::vector<c10::IValue> inputs);

  // Called after each kernel with its outputs; null to stop.
  void set_observer(KernelOutputObserver observer) { observer_ = std::move(observer); }

  // When set, the input and output dtypes and shapes of each kernel whose flag in `known` is 0
  // are recorded into `kernels` (both indexed like GraphInfo::kernels) when it first runs; its
  // flag is then set and `*learned` becomes true. Kernels already known cost one flag test.
  void set_meta_recorder(std::vector<KernelInfo>* kernels, std::vector<uint8_t>* known,
                         bool* learned) {
    metas_ = kernels;
    metas_known_ = known;
    metas_learned_ = learned;
  }

 private:
  using Frame = std::vector<c10::IValue>;

  Status RunBlock(const BlockPlan& block, Frame& frame);
  Status RunStep(const StepPlan& step, Frame& frame);
  Status RunSpecial(const StepPlan& step, Frame& frame);
  Status RunKernel(const StepPlan& step, Frame& frame);
  Status KernelFailed(const StepPlan& step, Frame& frame, const std::string& what);
  Status RunLoop(const StepPlan& step, Frame& frame);
  void RecordMetas(const StepPlan& step, const Frame& frame, const torch::jit::Stack& outputs);

  const CompiledGraph* graph_;
  DumpSession* session_;
  // Views keep the logical layout; the session applies trans_flag (storage order when false).
  bool logical_layout_ = true;
  KernelOutputObserver observer_;
  std::vector<KernelInfo>* metas_ = nullptr;
  std::vector<uint8_t>* metas_known_ = nullptr;
  bool* metas_learned_ = nullptr;
};

}  // namespace graphdump::torch_internal
