// Replay's call, bound and run by LibTorch (docs/precision.md, "Replay"; docs/reliability.md,
// "A dump is data, never code"): the operator PlanReplayCall (replay_call.h) chose, its recorded
// arguments bound to the operator's schema with their values checked, run on copies of the
// dumped inputs under a memory budget.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "graphdump/graph.h"
#include "graphdump/replay_call.h"
#include "graphdump/status.h"

namespace graphdump::torch_internal {

// A rebuilt call: the operator and, per argument, its parsed value.
struct ReplayCall {
  std::shared_ptr<torch::jit::Operator> op;
  std::vector<ReplayLiteral> arguments;
};

// The call `info` records, or the reason it cannot be rebuilt (after "not replayable: ").
std::variant<ReplayCall, std::string> RebuildCall(const KernelInfo& info, size_t dumped_inputs);

// Runs `call` on copies of `inputs`; returns its tensor outputs, tensor lists flattened as the
// dump numbers them. Every LibTorch error, an argument value the operator could fault on, and
// outputs over the memory budget are a Status (the reason).
StatusOr<std::vector<at::Tensor>> Execute(const ReplayCall& call,
                                          const std::vector<at::Tensor>& inputs);

// The bytes replay may hold in tensors at once: half the machine's physical memory.
size_t ReplayMemoryBudget();

// While one lives, every CPU tensor allocation of this thread counts against
// ReplayMemoryBudget(), and one that would exceed it throws c10::Error before allocating.
// Other threads allocate as before.
class ReplayMemoryScope {
 public:
  ReplayMemoryScope();
  ~ReplayMemoryScope();
  ReplayMemoryScope(const ReplayMemoryScope&) = delete;
  ReplayMemoryScope& operator=(const ReplayMemoryScope&) = delete;

 private:
  bool outer_;
};

// The text of a LibTorch exception, first line, without its C++ backtrace.
std::string ErrorText(const std::exception& e);

}  // namespace graphdump::torch_internal
