#include "torchscript/graph_compiler.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>

#include <charconv>
#include <cmath>
#include <sstream>
#include <unordered_map>

#include "torch_compat.h"

namespace graphdump::torch_internal {
namespace {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

bool IsTensorLike(const c10::TypePtr& type) {
  if (type->isSubtypeOf(*c10::TensorType::get())) return true;
  if (auto opt = type->cast<c10::OptionalType>()) return IsTensorLike(opt->getElementType());
  if (auto list = type->cast<c10::ListType>()) {
    return list->getElementType()->isSubtypeOf(*c10::TensorType::get());
  }
  return false;
}

bool IsKernel(const Node* node) {
  if (!node->kind().is_aten()) return false;
  for (const Value* out : node->outputs()) {
    if (IsTensorLike(out->type())) return true;
  }
  return false;
}

std::string FormatScalar(const c10::IValue& v) {
  if (v.isNone()) return "None";
  if (v.isBool()) return v.toBool() ? "True" : "False";
  if (v.isInt()) return std::to_string(v.toInt());
  if (v.isString()) return "\"" + v.toStringRef() + "\"";
  if (v.isIntList()) {
    std::string s = "[";
    for (int64_t x : v.toIntVector()) s += (s.size() > 1 ? ", " : "") + std::to_string(x);
    return s + "]";
  }
  std::ostringstream out;
  out << v;
  return out.str();
}

// A non-tensor argument's value when it is known before running: a constant, or a list of
// constants (stride = [4, 4]); "<runtime>" otherwise.
std::string StaticValueText(const Value* v) {
  if (auto constant = torch::jit::toIValue(v)) return FormatScalar(*constant);
  if (v->node()->kind() == c10::prim::ListConstruct) {
    std::string text = "[";
    for (const Value* e : v->node()->inputs()) {
      auto constant = torch::jit::toIValue(e);
      if (!constant) return "<runtime>";
      text += (text.size() > 1 ? ", " : "") + FormatScalar(*constant);
    }
    return text + "]";
  }
  return "<runtime>";
}

// The non-tensor arguments of a kernel: constants by value, others as "<runtime>".
std::map<std::string, std::string> KernelAttributes(const Node* node) {
  std::map<std::string, std::string> attrs;
  for (size_t i = 0; i < node->inputs().size(); ++i) {
    const Value* in = node->inputs()[i];
    if (IsTensorLike(in->type())) continue;
    attrs[torch_compat::ArgumentName(node, i)] = StaticValueText(in);
  }
  return attrs;
}

// A constant as KernelArgument writes it (graph.h): Python literals a replay parses back;
// floats in the shortest text that reads back to the same double. nullopt for a value that has
// no such form (an object, a tensor).
std::optional<std::string> Literal(const c10::IValue& v) {
  if (v.isNone()) return "None";
  if (v.isBool()) return v.toBool() ? "True" : "False";
  if (v.isInt()) return std::to_string(v.toInt());
  if (v.isDouble()) {
    const double d = v.toDouble();
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    char buffer[64];
    auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), d);
    std::string text(buffer, end);
    // "1" would read back as an int: a Scalar argument must stay a float.
    if (text.find_first_of(".e") == std::string::npos) text += ".0";
    return text;
  }
  if (v.isString()) {
    std::string text = "\"";
    for (char c : v.toStringRef()) {
      if (c == '"' || c == '\\') text += '\\';
      text += c;
    }
    return text + "\"";
  }
  if (v.isDevice()) return Literal(c10::IValue(v.toDevice().str()));
  auto join = [](const std::vector<c10::IValue>& elements) -> std::optional<std::string> {
    std::string text = "[";
    for (const c10::IValue& e : elements) {
      auto element = Literal(e);
      if (!element) return std::nullopt;
      text += (text.size() > 1 ? ", " : "") + *element;
    }
    return text + "]";
  };
  if (v.isList()) return join(v.toListRef().vec());
  if (v.isTuple()) return join(v.toTupleRef().elements().vec());
  return std::nullopt;
}

// The call's arguments as KernelArgument values (graph.h). Tensors are numbered as the executor
// dumps them (tensor_views.h AppendViews): each tensor and each element of a tensor list is the
// next input slot. After a tensor list whose length only the run knows, slots are unknown.
std::vector<KernelArgument> KernelArguments(const Node* node) {
  std::vector<KernelArgument> args;
  uint32_t slot = 0;
  bool slots_known = true;
  auto input = [&]() { return "input." + std::to_string(slot++); };
  for (size_t i = 0; i < node->inputs().size(); ++i) {
    const Value* in = node->inputs()[i];
    KernelArgument arg{torch_compat::ArgumentName(node, i), "<runtime>"};
    if (auto constant = torch::jit::toIValue(in)) {
      if (auto text = Literal(*constant)) arg.value = *text;
    } else if (in->type()->kind() == c10::TypeKind::NoneType) {
      arg.value = "None";
    } else if (IsTensorLike(in->type())) {
      if (in->type()->cast<c10::ListType>()) {
        if (in->node()->kind() == c10::prim::ListConstruct && slots_known) {
          std::string text = "[";
          for (size_t e = 0; e < in->node()->inputs().size(); ++e) {
            text += (e ? ", " : "") + input();
          }
          arg.value = text + "]";
        } else {
          slots_known = false;
        }
      } else if (slots_known) {
        arg.value = input();
      }
    } else if (in->node()->kind() == c10::prim::ListConstruct) {
      std::vector<c10::IValue> elements;
      bool all_constant = true;
      for (const Value* e : in->node()->inputs()) {
        auto constant = torch::jit::toIValue(e);
        if (!constant) {
          all_constant = false;
          break;
        }
        elements.push_back(*constant);
      }
      if (all_constant) {
        if (auto text = Literal(c10::IValue(c10::ivalue::Tuple::create(std::move(elements))))) {
          arg.value = *text;
        }
      }
    }
    args.push_back(std::move(arg));
  }
  return args;
}

void CollectModuleScopes(const torch::jit::Module& module, const std::string& path,
                         const std::string& scope, std::map<std::string, std::string>* out) {
  (*out)[path] = scope;
  for (const auto& child : module.named_children()) {
    const std::string class_name =
        child.value.type()->name() ? child.value.type()->name()->name() : "Module";
    const std::string segment = child.name + "-" + class_name;
    CollectModuleScopes(child.value, path.empty() ? child.name : path + "." + child.name,
                        scope.empty() ? segment : scope + "/" + segment, out);
  }
}

class Compiler {
 public:
  explicit Compiler(CompiledGraph* out) : out_(out) {}

  Status Run(torch::jit::Module& module, const std::string& method) {
    CollectModuleScopes(module, "", "", &out_->module_scopes);
    out_->graph = module.get_method(method).graph()->copy();
    torch::jit::Inline(*out_->graph);
    torch::jit::EliminateDeadCode(out_->graph);
    Block* top = out_->graph->block();
    AssignSlots(top);
    ComputeLastUses(top);
    return BuildBlock(top, &out_->body);
  }

 private:
  uint32_t Slot(const Value* v) {
    auto [it, added] = slots_.emplace(v, out_->num_slots);
    if (added) ++out_->num_slots;
    return it->second;
  }

  void AssignSlots(Block* block) {
    int position = 0;
    for (Value* v : block->inputs()) Slot(v);
    for (Node* node : block->nodes()) {
      position_[node] = position++;
      for (Value* v : node->outputs()) Slot(v);
      for (Block* b : node->blocks()) AssignSlots(b);
    }
    position_[block->return_node()] = position;
  }

  // A use inside a nested block counts as a use by the enclosing node in `home`.
  static Node* LiftTo(Node* user, const Block* home) {
    while (user && user->owningBlock() != home) {
      Node* owner = user->owningBlock()->owningNode();
      if (!owner) return nullptr;
      user = owner;
    }
    return user;
  }

  void ComputeLastUses(Block* block) {
    auto visit = [&](Value* v) {
      const Block* home = v->node()->owningBlock();
      Node* last = nullptr;
      for (const auto& use : v->uses()) {
        Node* lifted = LiftTo(use.user, home);
        if (lifted && (!last || position_[lifted] > position_[last])) last = lifted;
      }
      if (!last && v->node()->kind() != c10::prim::Param) last = v->node();
      if (last) frees_at_[last].push_back(Slot(v));
    };
    for (Value* v : block->inputs()) {
      if (block != out_->graph->block()) visit(v);
    }
    for (Node* node : block->nodes()) {
      for (Value* v : node->outputs()) visit(v);
      for (Block* b : node->blocks()) ComputeLastUses(b);
    }
  }

  Status BuildBlock(Block* block, BlockPlan* plan) {
    for (Value* v : block->inputs()) plan->params.push_back(Slot(v));
    for (Node* node : block->nodes()) {
      StepPlan step;
      GRAPHDUMP_RETURN_IF_ERROR(BuildStep(node, &step));
      plan->steps.push_back(std::move(step));
    }
    for (Value* v : block->outputs()) plan->returns.push_back(Slot(v));
    plan->return_frees = frees_at_[block->return_node()];
    return Status::Ok();
  }

  Status BuildStep(Node* node, StepPlan* step) {
    step->node = node;
    for (Value* v : node->inputs()) step->inputs.push_back(Slot(v));
    for (Value* v : node->outputs()) step->outputs.push_back(Slot(v));
    step->frees = frees_at_[node];
    for (Block* b : node->blocks()) {
      step->blocks.emplace_back();
      GRAPHDUMP_RETURN_IF_ERROR(BuildBlock(b, &step->blocks.back()));
    }
    GRAPHDUMP_RETURN_IF_ERROR(ChooseKind(node, step));
    if (step->kind == StepKind::kOperation && IsKernel(node)) AddKernel(node, step);
    return Status::Ok();
  }

  Status ChooseKind(Node* node, StepPlan* step) {
    using namespace c10;  // prim:: symbols
    const Symbol kind = node->kind();
    if (kind == prim::Constant) {
      step->kind = StepKind::kConstant;
      auto value = torch::jit::toIValue(node->output());
      if (!value) return Unsupported(node, "a constant of an unsupported type");
      step->constant = *value;
      if (value->isTensor() || value->isInt() || value->isDouble() || value->isBool()) {
        out_->constants.push_back(*value);
      }
    } else if (kind == prim::GetAttr || kind == prim::SetAttr) {
      step->kind = kind == prim::GetAttr ? StepKind::kGetAttr : StepKind::kSetAttr;
      step->attr_name = node->s(attr::name);
    } else if (kind == prim::If) {
      step->kind = StepKind::kIf;
    } else if (kind == prim::Loop) {
      step->kind = StepKind::kLoop;
    } else if (kind == prim::ListConstruct) {
      step->kind = StepKind::kListConstruct;
      step->type = node->output()->type();
    } else if (kind == prim::ListUnpack) {
      step->kind = StepKind::kListUnpack;
    } else if (kind == prim::TupleConstruct) {
      step->kind = StepKind::kTupleConstruct;
      step->type = node->output()->type();
    } else if (kind == prim::TupleUnpack) {
      step->kind = StepKind::kTupleUnpack;
    } else if (kind == prim::TupleIndex) {
      step->kind = StepKind::kTupleIndex;
    } else if (kind == prim::TupleSlice) {
      step->kind = StepKind::kTupleSlice;
      step->slice_begin = node->i(attr::beg);
      step->slice_end = node->i(attr::end);
    } else if (kind == prim::DictConstruct) {
      step->kind = StepKind::kDictConstruct;
      step->type = node->output()->type();
    } else if (kind == prim::Uninitialized) {
      step->kind = StepKind::kUninitialized;
    } else if (kind == prim::unchecked_cast) {
      step->kind = StepKind::kPassThrough;
    } else {
      step->kind = StepKind::kOperation;
      std::string error;
      auto op = torch_compat::FindOperation(node, &error);
      if (!op) return Unsupported(node, error);
      step->op = std::move(*op);
    }
    return Status::Ok();
  }

  Status Unsupported(const Node* node, const std::string& why) {
    return Status::Unsupported(
        "graphdump's executor cannot run graph node " + std::string(node->kind().toQualString()) +
        " at " + DescribeNodeSource(node) + ": " + why +
        ". Handled directly: prim::Constant, GetAttr, SetAttr, If, Loop, ListConstruct, "
        "ListUnpack, TupleConstruct, TupleUnpack, TupleIndex, TupleSlice, DictConstruct, "
        "Uninitialized, unchecked_cast, and every node with a registered operator");
  }

  void AddKernel(Node* node, StepPlan* step) {
    KernelInfo k;
    k.graph_id = out_->info.graph_id;
    k.index = static_cast<uint32_t>(out_->info.kernels.size());
    std::string scope = "Default";
    std::string module_path;
    for (const auto& frame : torch_compat::ModuleFrames(node)) {
      scope += "/" + frame.attr + "-" + frame.class_name;
      module_path += (module_path.empty() ? "" : ".") + frame.attr;
    }
    k.op_type = node->kind().toUnqualString();
    k.full_name = scope + "/" + k.op_type + "-op" + std::to_string(k.index);
    k.module_path = module_path;
    k.source_trace = torch_compat::SourceTrace(node);
    for (const Value* in : node->inputs()) {
      if (IsTensorLike(in->type())) k.input_names.push_back(in->debugName());
    }
    k.attributes = KernelAttributes(node);
    if (const c10::FunctionSchema* schema = node->maybeSchema()) {
      std::ostringstream text;
      text << *schema;
      k.schema = text.str();
      k.arguments = KernelArguments(node);
    }
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      if (torch_compat::WritesInputUnannotated(node, i)) {
        step->written_inputs.push_back(i);
        step->unannotated_writes.push_back(i);
      } else if (torch_compat::WritesInput(node, i)) {
        step->written_inputs.push_back(i);
      }
    }
    // Memory the operator allocates and does not write is not data (docs/file-format.md); the
    // executor finds the kernels that read it, or views of it.
    step->allocates = AllocatesUninitialized(k.op_type);
    if (step->allocates) k.uninitialized_outputs = {0};
    step->kernel = static_cast<int>(k.index);
    out_->info.kernels.push_back(std::move(k));
  }

  CompiledGraph* out_;
  std::unordered_map<const Value*, uint32_t> slots_;
  std::unordered_map<const Node*, int> position_;
  std::unordered_map<const Node*, std::vector<uint32_t>> frees_at_;
};

std::string FormatLocation(const SourceLocation& loc) {
  std::string code = loc.code.substr(0, loc.code.find('\n'));
  code.erase(0, code.find_first_not_of(" \t"));
  return loc.file + ":" + std::to_string(loc.line) + (code.empty() ? "" : " `" + code + "`");
}

}  // namespace

std::string DescribeTrace(const std::vector<SourceLocation>& trace) {
  const SourceLocation* frame = UserFrame(trace);
  return frame ? FormatLocation(*frame) : "(no source recorded)";
}

std::string DescribeSource(const KernelInfo& kernel) { return DescribeTrace(kernel.source_trace); }

std::optional<std::string> ArgumentLiteral(const c10::IValue& value) { return Literal(value); }

std::string DescribeNodeSource(const torch::jit::Node* node) {
  return DescribeTrace(torch_compat::SourceTrace(node));
}

StatusOr<std::unique_ptr<CompiledGraph>> CompileGraph(torch::jit::Module& module,
                                                      const std::string& method,
                                                      uint32_t graph_id) {
  auto out = std::make_unique<CompiledGraph>();
  out->info.graph_id = graph_id;
  out->info.name = method;
  try {
    if (!module.find_method(method)) {
      return Status::InvalidArgument("the module has no method '" + method + "'");
    }
    Compiler compiler(out.get());
    GRAPHDUMP_RETURN_IF_ERROR(compiler.Run(module, method));
  } catch (const c10::Error& e) {
    return Status::Internal("compiling method '" + method +
                            "' failed: " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return Status::Internal("compiling method '" + method + "' failed: " + e.what());
  }
  return out;
}

}  // namespace graphdump::torch_internal
