// GraphExecutor: runs a CompiledGraph node by node, calling the dump session's hooks for every
// kernel the session wants. Never throws: LibTorch errors come back as a Status that names the
// kernel's full name and source line.
#pragma once

#include <torch/script.h>

#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "torchscript/graph_compiler.h"
#include "graphdump/session.h"
#include "graphdump/status.h"
#include "host/unwritten_memory.h"

namespace graphdump::torch_internal {

// A precision run (docs/precision.md): the model's floating parameters, buffers and inputs are
// in `dtype`; kernels flagged in `keep_fp32` (indexed like GraphInfo::kernels) compute in float32.
// A kept kernel's inputs of `dtype` are cast up to float32 and its outputs stay float32, so kept
// kernels hand float32 to each other; a kernel that is not kept casts the float32 outputs of kept
// kernels it reads back to `dtype`, and so does the model's return. The dump shows what each
// kernel computed on: a kept kernel's inputs as cast, its float32 outputs.
// Parameters and buffers kept in float32 (`kept_states`, by TensorImpl: the module holds them)
// are handed out as a kept kernel's float32 outputs are.
struct PrecisionPlan {
  at::ScalarType dtype = at::kFloat;
  std::vector<uint8_t> keep_fp32;
  std::unordered_set<const c10::TensorImpl*> kept_states;
};

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

  // Runs kept kernels in float32 (PrecisionPlan); null (the default) runs every kernel as is.
  // `plan` is not owned and must outlive the runs.
  void set_precision(const PrecisionPlan* plan) { precision_ = plan; }

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
  // PrecisionPlan casts of a kernel's inputs on `stack`; the inputs an in-place kernel writes
  // that were cast are listed in `written_casts` (the value before the cast, the cast value).
  void CastInputs(const StepPlan& step, torch::jit::Stack& stack,
                  std::vector<std::pair<c10::IValue, c10::IValue>>* written_casts);
  // After the operator ran: writes cast inputs back into the tensors they came from, and
  // remembers a kept kernel's float32 outputs.
  void AfterCastKernel(const StepPlan& step, torch::jit::Stack& stack,
                       const std::vector<std::pair<c10::IValue, c10::IValue>>& written_casts);
  bool IsKeptOutput(const at::Tensor& t) const;
  // Adds `slots` (of memory nothing wrote) to the kernel's list `sorted` of its recorded
  // metadata, which EndStep sends when one is new.
  void MarkUninitialized(const std::vector<uint32_t>& slots, std::vector<uint32_t>* sorted);

  const CompiledGraph* graph_;
  DumpSession* session_;
  // Views keep the logical layout; the session applies trans_flag (storage order when false).
  bool logical_layout_ = true;
  KernelOutputObserver observer_;
  const PrecisionPlan* precision_ = nullptr;
  // Float32 outputs of kept kernels in this run, by TensorImpl; the weak reference tells a
  // live tensor from a freed one whose address was reused.
  std::unordered_map<const c10::TensorImpl*,
                     c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>>
      kept_outputs_;
  // Memory `empty`-like kernels of this run allocated that nothing wrote yet.
  UnwrittenMemory unwritten_;
  std::vector<KernelInfo>* metas_ = nullptr;
  std::vector<uint8_t>* metas_known_ = nullptr;
  bool* metas_learned_ = nullptr;
};

}  // namespace graphdump::torch_internal
