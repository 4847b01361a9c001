// Everything in graphdump that depends on LibTorch internals whose shape changes between
// releases: the inlined call stack, source ranges, operator lookup, autograd hook signatures and
// scalar types. Written against torch 2.13 (the pip wheel; 2.11 to 2.14 supported); another
// release is adapted here only.
#pragma once

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/jit/frontend/source_range.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/scope.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "graphdump/dtype.h"
#include "graphdump/graph.h"

namespace graphdump::torch_compat {

// How autograd holds its graph's nodes: intrusive pointers since torch 2.x (a tensor's grad_fn,
// an edge's function), shared pointers before.
using AutogradNodePtr = c10::intrusive_ptr<torch::autograd::Node>;
using WeakAutogradNodePtr = c10::weak_intrusive_ptr<torch::autograd::Node>;

// One module on a node's inlined call path: the attribute it is stored under in its parent
// ("features", "0") and its class name ("Sequential", "Conv2d").
struct ModuleFrame {
  std::string attr;
  std::string class_name;
};

// The module call path of an inlined node, outermost first. Calls to other methods of the same
// module (instance name "SELF") add no frame.
inline std::vector<ModuleFrame> ModuleFrames(const torch::jit::Node* node) {
  std::vector<ModuleFrame> frames;
  auto callstack = node->callstack();
  if (!callstack) return frames;
  for (const auto& entry : (*callstack)->vec()) {
    const auto& info = std::get<torch::jit::kModuleInstanceInfo>(entry);
    if (!info) continue;
    const std::string name = info->instance_name();
    if (name.empty() || name == "SELF") continue;
    std::string class_name = "Module";
    if (auto type = info->class_type(); type && type->name()) class_name = type->name()->name();
    frames.push_back({name, class_name});
  }
  return frames;
}

// Parses the Python stack text a traced module records ("path(line): function" per frame,
// innermost first) into locations; frames inside torch itself are dropped.
inline std::vector<SourceLocation> ParseTracedStack(const std::string& text) {
  std::vector<SourceLocation> frames;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    const size_t open = line.rfind('(');
    const size_t close = line.find("): ", open == std::string::npos ? 0 : open);
    if (open == std::string::npos || close == std::string::npos || open == 0) continue;
    const std::string number = line.substr(open + 1, close - open - 1);
    if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos) continue;
    SourceLocation loc;
    loc.file = line.substr(0, open);
    loc.line = std::stoi(number);
    loc.code = line.substr(close + 3);
    if (loc.file.find("/torch/") != std::string::npos) continue;
    frames.push_back(std::move(loc));
  }
  return frames;
}

// The original Python range a serialized range was generated from, through the archive's debug
// info, which maps pieces of the serialized code. The call site of a function inlined at load
// time (`__torch__.torch.nn.functional.relu(x, False, )` for `F.relu(x)`) is the callee's name
// alone, which maps to nothing, while the call's parenthesis right after it maps to the call in
// the user's code: the first piece from the range's start to the end of its line that maps
// somewhere is taken.
inline c10::optional<torch::jit::SourceRange> GeneratingRange(const torch::jit::SourceRange& range) {
  auto maps = [](const c10::optional<torch::jit::SourceRange>& r) {
    return r && r->source() && r->end() > r->start();
  };
  auto original = range.findSourceRangeThatGenerated();
  if (maps(original) || !range.source()) return original;
  const auto& source = range.source();
  const size_t line = source->lineno_for_offset(range.end());
  const size_t line_end =
      line + 1 < source->num_lines() ? source->offset_for_line(line + 1) : source->size();
  for (size_t offset = range.start() + 1; offset < line_end; ++offset) {
    auto piece = torch::jit::SourceRange(source, offset, std::max(offset + 1, range.end()))
                     .findSourceRangeThatGenerated();
    if (maps(piece)) return piece;
  }
  return original;
}

// The original source of a serialized range (the model's Python, via the archive's debug
// info), or the range itself when no original is recorded.
inline std::optional<SourceLocation> OriginalLocation(const torch::jit::SourceRange& range) {
  auto original = GeneratingRange(range);
  const torch::jit::SourceRange& r = original && original->source() ? *original : range;
  if (!r.source()) return std::nullopt;
  auto flc = r.file_line_col();
  if (!flc) return std::nullopt;
  SourceLocation loc;
  loc.file = std::get<0>(*flc);
  loc.line = static_cast<int>(std::get<1>(*flc));
  loc.column = static_cast<int>(std::get<2>(*flc));
  // The whole line the range starts on (the range itself is often only the callee,
  // `torch.matmul`), without its line break.
  const auto& source = r.source();
  std::string line = source->get_line(source->lineno_for_offset(r.start())).str();
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  loc.code = line.empty() ? r.text().str() : line;
  return loc;
}

// The source trace of a node, innermost first: the node's own line, then the call sites of the
// methods it was inlined from. Traced modules record Python stack text instead, whose user
// frames are returned.
inline std::vector<SourceLocation> SourceTrace(const torch::jit::Node* node) {
  std::vector<SourceLocation> trace;
  // A module traced in this process has the stack in its own range; a loaded one in the range
  // its archive's debug info maps back to.
  auto original = GeneratingRange(node->sourceRange());
  const torch::jit::SourceRange& range =
      original && original->source() ? *original : node->sourceRange();
  if (range.source()) {
    const std::string text = range.text().str();
    if (text.find("): ") != std::string::npos && text.find('\n') != std::string::npos) {
      auto frames = ParseTracedStack(text);
      if (!frames.empty()) return frames;
    }
  }
  auto own = OriginalLocation(node->sourceRange());
  if (own) trace.push_back(*own);
  if (auto callstack = node->callstack()) {
    auto entries = (*callstack)->vec();
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
      auto loc = OriginalLocation(std::get<1>(*it));
      if (loc && loc->line > 0) trace.push_back(*loc);
    }
  }
  return trace;
}

// The node's operation, or an error text when LibTorch has no operator for its kind (the kinds
// the stock interpreter emits as special instructions).
inline std::optional<torch::jit::Operation> FindOperation(const torch::jit::Node* node,
                                                          std::string* error) {
  try {
    if (!node->maybeOperator()) {
      *error = "no operator registered for this node kind";
      return std::nullopt;
    }
    return node->getOperation();
  } catch (const std::exception& e) {
    *error = e.what();
    return std::nullopt;
  }
}

// Does `schema` say its operator writes argument `i` in place (aten::relu_, add_(out))?
inline bool SchemaWritesArgument(const c10::FunctionSchema& schema, size_t i) {
  if (i >= schema.arguments().size()) return false;
  const auto* alias = schema.arguments()[i].alias_info();
  return alias && alias->isWrite();
}

// Does the operator write argument `i` although its schema does not say so? Batch norm and
// instance norm update their running statistics in place (aten::batch_norm's schema has no
// `(a!)` on running_mean and running_var), without bumping their version counters.
inline bool SchemaWritesUnannotated(const c10::FunctionSchema& schema, size_t i) {
  if (i >= schema.arguments().size()) return false;
  static const char* const kinds[] = {"aten::batch_norm", "aten::instance_norm",
                                      "aten::_batch_norm_impl_index", "aten::native_batch_norm"};
  if (std::find(std::begin(kinds), std::end(kinds), schema.name()) == std::end(kinds)) {
    return false;
  }
  const std::string& name = schema.arguments()[i].name();
  return name == "running_mean" || name == "running_var";
}

// SchemaWritesArgument and SchemaWritesUnannotated for a graph node's input `i`.
inline bool WritesInput(const torch::jit::Node* node, size_t i) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  return schema && SchemaWritesArgument(*schema, i);
}
inline bool WritesInputUnannotated(const torch::jit::Node* node, size_t i) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  return schema && SchemaWritesUnannotated(*schema, i);
}

// The schema's name for input `i`, or "arg{i}".
inline std::string ArgumentName(const torch::jit::Node* node, size_t i) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (!schema || i >= schema->arguments().size()) return "arg" + std::to_string(i);
  return schema->arguments()[i].name();
}

inline std::optional<DType> ToDType(at::ScalarType type) {
  switch (type) {
    case at::kBool:
      return DType::kBool;
    case at::kChar:
      return DType::kInt8;
    case at::kShort:
      return DType::kInt16;
    case at::kInt:
      return DType::kInt32;
    case at::kLong:
      return DType::kInt64;
    case at::kByte:
      return DType::kUInt8;
    case at::kHalf:
      return DType::kFloat16;
    case at::kBFloat16:
      return DType::kBFloat16;
    case at::kFloat:
      return DType::kFloat32;
    case at::kDouble:
      return DType::kFloat64;
    case at::kComplexFloat:
      return DType::kComplex64;
    case at::kComplexDouble:
      return DType::kComplex128;
    default:
      return std::nullopt;
  }
}

// An autograd node's class name without namespace: "ConvolutionBackward0", "AccumulateGrad".
inline std::string BackwardNodeName(const torch::autograd::Node& node) {
  std::string name = node.name();
  const size_t colon = name.rfind("::");
  if (colon != std::string::npos) name.erase(0, colon + 2);  // in place: no second allocation
  return name;
}

// The parameter an AccumulateGrad node accumulates into, or null for other nodes.
inline const at::TensorImpl* AccumulatedVariable(torch::autograd::Node& node) {
  auto* acc = dynamic_cast<torch::autograd::AccumulateGrad*>(&node);
  return acc ? acc->variable.unsafeGetTensorImpl() : nullptr;
}

// Is `fn` the autograd engine's record of one node's evaluation? The engine labels each node it
// runs "autograd::engine::evaluate_function: <Node>" (RecordScope::FUNCTION, no operator). The
// node's own apply is inside a BACKWARD_FUNCTION record, but the engine's operators around it
// are only inside this label: in torch 2 a gradient is reduced to its input's shape
// (validate_outputs: `sum`, `view`) and accumulated into the next node's input buffer (`add`,
// `add_`) there, and these are not operators of the program's forward.
inline bool IsAutogradEvaluation(const at::RecordFunction& fn) {
  static constexpr char kPrefix[] = "autograd::engine::evaluate_function: ";
  const char* name = fn.name();
  return name != nullptr && std::strncmp(name, kPrefix, sizeof(kPrefix) - 1) == 0;
}

// Calls `Observer` after a backward node ran with (gradients it produced, gradients it
// received); a pass hooks hundreds of nodes, so the observer is held inline (one allocation).
template <typename Observer>
class ObserverHook : public torch::autograd::FunctionPostHook {
 public:
  explicit ObserverHook(Observer observer) : observer_(std::move(observer)) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& grad_inputs,
      const torch::autograd::variable_list& grad_outputs) override {
    observer_(grad_inputs, grad_outputs);
    return grad_inputs;
  }

 private:
  Observer observer_;
};

// Adds `observer`, callable with (const std::vector<at::Tensor>& produced,
// const std::vector<at::Tensor>& received), to `node`; returns the key RemoveObserver takes.
template <typename Observer>
uintptr_t AddObserver(torch::autograd::Node& node, Observer observer) {
  return node.add_post_hook(std::make_unique<ObserverHook<Observer>>(std::move(observer)));
}
inline void RemoveObserver(torch::autograd::Node& node, uintptr_t key) { node.del_post_hook(key); }

// The backward pass (the engine's graph task) the calling thread is running a node of, or -1
// outside any. The engine sets it on whichever thread runs the node: the thread that called
// backward() for CPU nodes, a device thread for the others.
inline int CurrentGraphTaskId() { return torch::autograd::get_current_graph_task_id(); }

}  // namespace graphdump::torch_compat
