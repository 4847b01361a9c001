// The shared host's backward and optimizer capture (host_kernels.h): every front end's
// backward passes and optimizer updates become kernels here.
#include "host/host_kernels.h"

#include <algorithm>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "eager/eager_capture.h"
#include "host/tensor_views.h"
#include "torch_compat.h"

namespace graphdump {
namespace torch_internal {

using torch::autograd::Node;

std::string Underscored(std::string name) {
  for (char& c : name) {
    if (c == '.' || c == '/' || c == '\\' || c == ' ') c = '_';
  }
  return name;
}

std::string ModuleOfParameter(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? "" : name.substr(0, dot);
}

namespace {

// Views of the tensors, each keeping its index as its slot: a backward node's undefined
// gradients (none for an input that needs none) and sparse ones leave gaps, so a slot always
// names the same gradient (the input or output index).
std::vector<TensorView> SlotViews(const std::vector<at::Tensor>& tensors, Slots* slots) {
  std::vector<TensorView> views;
  views.reserve(tensors.size());
  for (const at::Tensor& t : tensors) {
    AppendSlot(Detached(t), /*logical_layout=*/true, &views, slots);
  }
  return views;
}

}  // namespace

std::vector<TensorView> DefinedViews(const std::vector<at::Tensor>& tensors) {
  Slots slots;
  return SlotViews(tensors, &slots);
}

BackwardKernels::Hooks::~Hooks() {
  if (owner_ == nullptr) return;
  std::lock_guard<std::recursive_mutex> lock(*owner_->lock_);
  for (auto& [node, handle] : hooks_) torch_compat::RemoveObserver(*node, handle);
  std::erase(owner_->open_, this);
}

bool BackwardKernels::InHookedPass() const {
  const int task = torch_compat::CurrentGraphTaskId();
  if (task < 0) return false;
  std::lock_guard<std::recursive_mutex> lock(*lock_);
  for (const Hooks* hooks : open_) {
    if (hooks->pass_->task.load() == task) return true;
  }
  return false;
}

void BackwardKernels::NoteForward(HostGraph* model, const KernelInfo& kernel,
                                  const std::vector<c10::IValue>& outputs) {
  if (!at::GradMode::is_enabled()) return;
  // The kernel's scope: its full name without the last segment. Interned once per kernel.
  const Scope* scope = nullptr;
  auto where = [&] {
    if (scope != nullptr) return scope;
    std::vector<const Scope*>& by_index = kernel_scopes_[model];
    if (by_index.size() <= kernel.index) by_index.resize(kernel.index + 1);
    const Scope*& known = by_index[kernel.index];
    const std::string_view name(kernel.full_name);
    const std::string_view prefix = name.substr(0, name.rfind('/'));
    if (known == nullptr || known->name->scope != prefix ||
        known->module_path != kernel.module_path) {
      known = InternScope(model, std::string(prefix), kernel.module_path,
                          static_cast<int64_t>(kernel.index));
    }
    return scope = known;
  };
  auto note = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    const torch_compat::AutogradNodePtr& node = t.grad_fn();
    if (!node) return;
    Producer& p = producers_[node.get()];
    if (p.where != nullptr && !p.node.expired()) return;  // the first producer wins
    p.node = torch_compat::WeakAutogradNodePtr(node);
    p.where = where();
  };
  for (const auto& v : outputs) {
    if (v.isTensor()) note(v.toTensor());
    if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) note(t);
    }
  }
}

void BackwardKernels::NoteNode(const at::Tensor& tensor, HostGraph* model,
                               const std::string& scope, const std::string& module_path) {
  if (tensor.defined() && tensor.grad_fn()) {
    producers_[tensor.grad_fn().get()] = Producer{torch_compat::WeakAutogradNodePtr(tensor.grad_fn()),
                                                  InternScope(model, scope, module_path, -1)};
  }
}

void BackwardKernels::NoteFunction(HostGraph* model, const std::string& scope,
                                   const std::string& module_path, uint64_t sequence_nr,
                                   uint64_t thread_id) {
  functions_[{thread_id, sequence_nr}].where = InternScope(model, scope, module_path, -1);
  // Sequence numbers grow: the first entries are the oldest Functions.
  while (functions_.size() > kMaxFunctions) functions_.erase(functions_.begin());
}

const BackwardKernels::Producer* BackwardKernels::FunctionOf(const Node& node) const {
  auto it = functions_.find({node.thread_id(), node.sequence_nr()});
  return it == functions_.end() ? nullptr : &it->second;
}

void BackwardKernels::AddParameter(const at::Tensor& param, HostGraph* model,
                                   const std::string& name) {
  parameters_.emplace(param.unsafeGetTensorImpl(), Parameter{model, name});
}

const BackwardKernels::Scope* BackwardKernels::InternScope(HostGraph* model,
                                                           const std::string& scope,
                                                           const std::string& module_path,
                                                           int64_t kernel) {
  std::unique_ptr<ScopeName>& name = scope_names_[scope];
  if (!name) {
    name = std::make_unique<ScopeName>();
    name->scope = scope;
  }
  std::unique_ptr<Scope>& interned = scopes_[{model, name.get(), module_path, kernel}];
  if (!interned) {
    interned = std::make_unique<Scope>();
    interned->model = model;
    interned->name = name.get();
    interned->module_path = module_path;
    interned->kernel = kernel;
  }
  return interned.get();
}

const BackwardKernels::Scope* BackwardKernels::Inherited(const Scope* scope) {
  if (scope->kernel < 0) return scope;
  if (scope->inherited == nullptr) {
    // As the node's: the scope, not the source line.
    scope->inherited = InternScope(scope->model, scope->name->scope, scope->module_path, -1);
  }
  return scope->inherited;
}

void BackwardKernels::ForgetDeadNodes() {
  for (auto it = producers_.begin(); it != producers_.end();) {
    it = it->second.node.expired() ? producers_.erase(it) : std::next(it);
  }
}

const BackwardKernels::Producer* BackwardKernels::ProducerOf(
    const torch_compat::AutogradNodePtr& node) const {
  auto it = producers_.find(node.get());
  if (it == producers_.end() || it->second.node.expired()) return nullptr;
  return &it->second;
}

std::unique_ptr<BackwardKernels::Hooks> BackwardKernels::Hook(const std::vector<at::Tensor>& roots,
                                                              HostGraph* fallback, bool names) {
  std::lock_guard<std::recursive_mutex> lock(*lock_);
  auto hooks = std::make_unique<Hooks>();
  hooks->owner_ = this;
  open_.push_back(hooks.get());
  if (!names) {
    // The roots run first in the pass: the first one to run names its graph task.
    for (const at::Tensor& root : roots) {
      if (!root.defined() || !root.grad_fn()) continue;
      torch_compat::AutogradNodePtr node = root.grad_fn();
      uintptr_t handle = torch_compat::AddObserver(
          *node, [pass = hooks->pass_](const std::vector<at::Tensor>&,
                                       const std::vector<at::Tensor>&) {
            int unknown = -1;
            pass->task.compare_exchange_strong(unknown, torch_compat::CurrentGraphTaskId());
          });
      hooks->hooks_.emplace_back(std::move(node), handle);
    }
    return hooks;
  }
  std::vector<Walked>& walk = walk_;
  const size_t last_walk_size = walk.size();
  walk.clear();
  seen_.Clear(last_walk_size);
  for (const at::Tensor& root : roots) {
    if (!root.defined() || !root.grad_fn() || !seen_.Insert(root.grad_fn().get())) continue;
    walk.push_back({root.grad_fn(), InternScope(fallback, "Default", "", -1)});
  }
  const size_t root_count = walk.size();
  hooks->hooks_.reserve(last_walk_size);
  ++passes_;  // numbers the bases' ordinals anew
  for (size_t i = 0; i < walk.size(); ++i) {
    torch_compat::AutogradNodePtr node = walk[i].node;
    // A Python autograd Function's node is named where the Function was applied, even when a
    // later forward kernel returned its output unchanged (RMSNorm's `.to(float32)` of a float32
    // tensor) and was noted as producing it.
    const Producer* known = FunctionOf(*node);
    if (known == nullptr) known = ProducerOf(node);
    const Scope* where = known ? known->where : walk[i].inherited;
    if (const at::TensorImpl* var = torch_compat::AccumulatedVariable(*node)) {
      auto it = parameters_.find(var);
      if (it != parameters_.end()) {
        Parameter& param = it->second;
        if (param.where == nullptr) {
          const std::string module_path = ModuleOfParameter(param.name);
          param.where = InternScope(param.model,
                                    param.model->ScopeOf(module_path) + "/" +
                                        Underscored(param.name),
                                    module_path, -1);
        }
        where = param.where;
      }
    }
    // Kernels are numbered by "Gradients/<scope>/<name>" in the order of the walk.
    std::string name = torch_compat::BackwardNodeName(*node);
    auto [named, added] = where->name->bases.try_emplace(name);
    Base* base = &named->second;
    if (added) base->name = std::move(name);
    if (base->pass != passes_) {
      base->pass = passes_;
      base->walked = 0;
    }
    Site* site = &base->sites[{where->model, base->walked++}];
    const bool root = i < root_count;
    uintptr_t handle = torch_compat::AddObserver(
        *node, [this, pass = hooks->pass_, root, where, base, site](
                   const std::vector<at::Tensor>& produced,
                   const std::vector<at::Tensor>& received) {
          const int task = torch_compat::CurrentGraphTaskId();
          // The roots run first in the pass: the first one to run names its graph task.
          if (root) {
            int unknown = -1;
            pass->task.compare_exchange_strong(unknown, task);
          }
          // Another thread's backward pass running a node this pass hooked (the gradient
          // accumulator of a parameter both reach) is that thread's: left alone.
          if (task < 0 || task != pass->task.load()) return;
          std::lock_guard<std::recursive_mutex> lock(*lock_);
          OnNode(*where, *base, *site, received, produced);
        });
    hooks->hooks_.emplace_back(node, handle);
    const Scope* next = nullptr;  // a node nobody produced inherits the scope, not the source line
    for (const auto& edge : node->next_edges()) {
      if (!edge.is_valid() || !seen_.Insert(edge.function.get())) continue;
      if (next == nullptr) next = Inherited(where);
      walk.push_back({edge.function, next});
    }
  }
  // The nodes' references go with the pass's hooks; the walk keeps only its memory. (A node's
  // address may be reused by the next pass: the set is cleared before then.)
  for (Walked& walked : walk) walked.node.reset();
  return hooks;
}

void BackwardKernels::OnNode(const Scope& where, const Base& base, Site& site,
                             const std::vector<at::Tensor>& received,
                             const std::vector<at::Tensor>& produced) {
  HostWork host_work;  // the views' operators are not the program's
  DumpSession* session = where.model->session();
  if (!site.registered) {
    // A kernel is registered (given its place in the execution order) in the first step that
    // captures: registered in a step that dumps nothing, the backward's kernels would come
    // before the forward's of a dump that starts at a later iteration (docs/hunt.md).
    if (session == nullptr || !(session->StepDumps() || session->config().op_debug_mode == 4)) {
      return;
    }
    std::vector<SourceLocation> trace;
    if (where.kernel >= 0) trace = where.model->graph().kernels[where.kernel].source_trace;
    site.kernel = where.model->AddHostKernel("Gradients/" + where.name->scope, base.name,
                                             where.module_path, std::move(trace));
    site.registered = true;
  }
  const KernelInfo& kernel = site.kernel;
  if (session && session->Wants(kernel)) {
    Slots in, out;
    std::vector<TensorView> inputs = SlotViews(received, &in);
    std::vector<TensorView> outputs = SlotViews(produced, &out);
    ReportSkipped(*session, kernel, /*input=*/true, in);
    ReportSkipped(*session, kernel, /*input=*/false, out);
    session->OnKernelDone(kernel, inputs, outputs);
  }
}

UpdateCapture::UpdateCapture(DumpSession* session, const KernelInfo& kernel,
                             const at::Tensor& param, const at::Tensor& grad,
                             const std::vector<at::Tensor>& state)
    : session_(session && session->Wants(kernel) ? session : nullptr), kernel_(&kernel) {
  if (!session_) return;
  HostWork host_work;
  // Slots: 0 the parameter, 1 its gradient, then the state tensors, whether or not each has a
  // view (a sparse gradient has none).
  Slots slots;
  inputs_.reserve(2 + state.size());
  // The inputs the update writes, as they are before it (copies, unless not read).
  auto add_before_update = [&](const at::Tensor& original) {
    const int32_t slot = slots.next++;
    if (!original.defined()) return;
    TensorView view;
    if (MakeViewBeforeWrite(*session_, *kernel_, Detached(original), slot,
                            /*logical_layout=*/true, &view)) {
      inputs_.push_back(std::move(view));
    } else {
      slots.Skip(slot, original);
    }
  };
  add_before_update(param);
  AppendSlot(Detached(grad), /*logical_layout=*/true, &inputs_, &slots);
  for (const at::Tensor& s : state) add_before_update(s);
  ReportSkipped(*session_, *kernel_, /*input=*/true, slots);
}

void UpdateCapture::Finish(const at::Tensor& param, const std::vector<at::Tensor>& state) {
  if (!session_) return;
  HostWork host_work;
  std::vector<at::Tensor> outputs;
  outputs.reserve(1 + state.size());
  outputs.push_back(param);
  outputs.insert(outputs.end(), state.begin(), state.end());
  Slots slots;
  std::vector<TensorView> views = SlotViews(outputs, &slots);
  ReportSkipped(*session_, *kernel_, /*input=*/false, slots);
  session_->OnKernelDone(*kernel_, inputs_, views);
  session_ = nullptr;
}

}  // namespace torch_internal

}  // namespace graphdump
