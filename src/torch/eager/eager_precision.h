// EagerPrecision: a precision run of an eager program (docs/precision.md, "Precision runs of a
// script"): every floating kernel the program calls computes in bfloat16 or float16, and the
// kernels and parameters `--keep-fp32` names in float32, with the rules of `run --precision`
// for a TorchScript model (graph_executor.cc):
//   - the roots' floating parameters and buffers are cast to the run's dtype in place (the
//     module holds them as a bfloat16 model does); kept ones keep their float32 values;
//   - a kernel that is not kept casts its floating inputs of another dtype to the run's dtype
//     (the program's float32 data, the float32 outputs of kept kernels, kept parameters);
//   - a kept kernel computes in float32 on its inputs as the run holds them: an input of the
//     run's dtype is cast up; a float32 input that no kept kernel made and no kept parameter
//     holds (the program's data) is rounded to the run's dtype first; its outputs stay float32;
//   - a kernel that writes into a tensor (in place, out=, resize_, set_) computes in that
//     tensor's dtype: the tensor is never replaced by a cast copy, its other floating operands
//     are cast to its dtype;
//   - operators that convert to a dtype the program asks for, alias, or return no tensor
//     (`.float()`, `.detach()`, `.item()`, `.size()`) read their inputs as they are.
//
// Mechanism: a boxed fallback on a dispatch key above autograd (the casts are autograd
// operations, so gradients flow through them as through autocast's), included in the watched
// thread's dispatch keys while the run is on. Only outermost operator calls reach it (it
// excludes its key while it works); the kernel each call is comes from the eager capture
// (EagerCapture::TakeKernel), so names are those of the eager dump. Calls that are no kernel
// (backward passes, the optimizer's step, graphdump's own work) run as they are.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "graphdump/status.h"

namespace graphdump::torch_internal {

class EagerCapture;
class EagerGraph;

class EagerPrecision {
 public:
  // `dtype`: kBFloat16 or kHalf. `keep_fp32`: entries as for `run --keep-fp32` (a full name, an
  // op type, name-regex(RE), or a parameter's or buffer's dotted name). InvalidArgument for a
  // malformed entry.
  static StatusOr<std::unique_ptr<EagerPrecision>> Create(EagerCapture* capture,
                                                          at::ScalarType dtype,
                                                          std::vector<std::string> keep_fp32);
  ~EagerPrecision();  // turns the run off
  EagerPrecision(const EagerPrecision&) = delete;
  EagerPrecision& operator=(const EagerPrecision&) = delete;

  // Turns the run on for the calling thread (the one the capture watches).
  void Enable();

  // A root's floating parameters and buffers: cast to the run's dtype unless an entry keeps them.
  void AddStates(const std::vector<std::pair<std::string, at::Tensor>>& named);
  // Parameters of a TorchScript module the executor runs in the precision (it casts them):
  // listed, and entries naming them count as matched.
  void NoteStates(const std::vector<std::string>& names);
  // An entry the executor's model matched (TorchScript modules).
  void NoteMatched(const std::string& entry);

  // "--keep-fp32 'X' matches no kernel that ran and no parameter or buffer (nearby: ...)" for
  // each entry that matched nothing so far.
  std::vector<std::string> Unmatched() const;

  // Does the run hand `t` out in float32: a kept parameter or buffer, or a live float32 output
  // of a kept kernel?
  bool Keeps(const at::Tensor& t) const {
    return t.defined() && t.scalar_type() == at::kFloat && IsKeptFloat(t);
  }

  struct Seen {
    const EagerGraph* graph;
    uint32_t index;
  };
  // Kernels that ran with a floating input or output, in the order first seen.
  const std::vector<Seen>& seen() const { return seen_; }
  // Floating parameters and buffers, by dotted name, in the order registered.
  const std::vector<std::string>& states() const { return state_names_; }
  at::ScalarType dtype() const { return dtype_; }
  const std::vector<std::string>& entries() const { return entries_; }

  // The dispatcher's boxed fallback for the run's key (registered once per process).
  static void Fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                       std::vector<c10::IValue>* stack);

 private:
  EagerPrecision(EagerCapture* capture, at::ScalarType dtype, std::vector<std::string> entries);
  struct KernelMatch;
  void Handle(const c10::OperatorHandle& op, c10::DispatchKeySet below,
              std::vector<c10::IValue>* stack);
  bool Kept(const EagerGraph& graph, uint32_t index);
  bool IsKeptFloat(const at::Tensor& t) const;
  void NoteKeptOutput(const at::Tensor& t);
  void NoteSeen(const EagerGraph& graph, uint32_t index);

  EagerCapture* capture_;
  at::ScalarType dtype_;
  std::vector<std::string> entries_;
  std::vector<bool> matched_;     // per entry
  std::vector<bool> is_state_;    // per entry: it named a parameter or buffer
  std::vector<KernelMatch> kernel_entries_;  // per entry
  bool enabled_ = false;
  uint64_t thread_id_ = 0;  // the thread Enable ran on
  std::unordered_map<const EagerGraph*, std::vector<int8_t>> decisions_;  // -1 unknown, 0, 1
  std::unordered_map<const EagerGraph*, std::vector<uint8_t>> seen_flags_;
  std::vector<Seen> seen_;
  std::vector<std::string> state_names_;
  std::unordered_set<const c10::TensorImpl*> kept_states_;
  std::unordered_map<const c10::TensorImpl*,
                     c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>>
      kept_outputs_;
  size_t kept_outputs_swept_ = 0;  // size after the last sweep of dead entries
};

}  // namespace graphdump::torch_internal
