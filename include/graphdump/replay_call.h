// What replay may run for a kernel of a dump, decided without LibTorch (docs/reliability.md,
// "A dump is data, never code"). A dump's graph files record each kernel's operator schema and
// arguments (graph.h KernelArgument); replay rebuilds the call from them. Every byte of them is
// untrusted: the operator must be ATen's operator of the kernel's own op type and one of a fixed
// list of operators without side effects (no file, process or random operators), and every
// argument literal is bounded in size and nesting before it is parsed. The LibTorch half
// (src/torch/replay/replay.cc) then binds the literals to the operator's schema.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "graphdump/graph.h"

namespace graphdump {

// Bounds on one recorded argument, checked before it is parsed.
inline constexpr size_t kMaxReplayLiteralBytes = 64 * 1024;
inline constexpr int kMaxReplayLiteralDepth = 4;  // list nesting: "[[1, 2], [3]]" is 2
inline constexpr size_t kMaxReplayLiteralItems = 4096;
// Bounds on the call: ATen's operators take at most a few dozen arguments.
inline constexpr size_t kMaxReplayArguments = 64;
inline constexpr size_t kMaxReplayInputSlot = 1u << 20;

// One recorded argument value: a constant, a dumped input slot ("input.3") or a list of them.
struct ReplayLiteral {
  enum Kind { kNone, kBool, kInt, kFloat, kString, kList, kInput } kind = kNone;
  bool b = false;
  int64_t i = 0;  // kInt: the value; kInput: the slot
  double f = 0;
  std::string s;
  std::vector<ReplayLiteral> list;
};

// Parses one argument as the executor writes it (Python literals; graph.h). A text over the
// bounds above, malformed, or an input slot past kMaxReplayInputSlot gives the reason instead.
std::variant<ReplayLiteral, std::string> ParseReplayLiteral(std::string_view text);

// An ATen operator by name and overload: {"aten::add", "Tensor"}.
struct ReplayOperator {
  std::string name;
  std::string overload;
};

// A rebuilt call before LibTorch sees it: the operator replay may run and each argument parsed.
struct ReplayCallPlan {
  ReplayOperator op;
  std::vector<ReplayLiteral> arguments;  // in schema order
  size_t input_slots = 0;                // dumped input tensors the call reads
};

// The call `info` records, checked against `dumped_inputs` input tensors, or the reason replay
// refuses it (a sentence that follows "not replayable: ").
std::variant<ReplayCallPlan, std::string> PlanReplayCall(const KernelInfo& info,
                                                         size_t dumped_inputs);

// Whether replay may run ATen operator `name` ("relu", "add_"): one of its list of operators
// without side effects (an in-place form "x_" when "x" is listed).
bool IsReplayableOperator(std::string_view name);

// Operators whose output depends on a random generator, by ATen name without "aten::" and
// without leading or trailing underscores ("dropout" for "dropout_").
bool IsRandomOperator(std::string_view name);

}  // namespace graphdump
