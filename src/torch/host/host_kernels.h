// Kernels a host runs itself around the models' graphs: backward nodes and parameter updates.
//
// BackwardKernels: names and dumps the autograd nodes a backward pass runs, as kernels of the
// models whose forward kernels produced them (docs/executor.md):
//   Gradients/<forward kernel's scope>/<BackwardNode>-op{N}     e.g. ConvolutionBackward0
//   Gradients/<module scope>/<parameter>/AccumulateGrad-op{N}   one per parameter
// A Python autograd Function's node is named where the Function was applied (NoteFunction). A
// node no forward kernel produced (a loss computed outside the models) takes the scope of the
// node that reaches it in the backward graph; a root nobody produced is "Gradients/Default" of
// the fallback model. A node carries the source trace of the forward kernel that produced it,
// so a script line leads to its backward kernels too. Each kernel is registered once
// (HostGraph::AddHostKernel) and dumped
// when its model's session wants it, with slots numbered as autograd numbers them (an undefined
// gradient leaves a gap).
//
//   BackwardKernels backward;
//   model->SetKernelObserver([&](auto& k, auto& outs) { backward.NoteForward(model, k, outs); });
//   auto hooks = backward.Hook({loss}, model);   // before backward
//   torch::autograd::backward({loss});
//   hooks.reset();                               // removes the hooks
//   backward.ClearForward();
//
// Threads: a hooked node is dumped only when the backward pass that hooked it runs it (the
// engine's graph task, on whichever thread runs the node): another thread's backward pass that
// reaches a node it shares (a parameter's gradient accumulator) is left alone. Every observer
// holds `lock` (the host's) while it reads or writes this object or the session; the other
// members are called with it held.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>

#include <map>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graphdump/internal/pointer_map.h"
#include "graphdump/torch/host_graph.h"
#include "torch_compat.h"

namespace graphdump::torch_internal {

// "features.0.weight" -> "features_0_weight" (docs/layout.md: names in file names).
std::string Underscored(std::string name);
// "features.0.weight" -> "features.0".
std::string ModuleOfParameter(const std::string& name);

class BackwardKernels {
 public:
  // `lock` (not null) serialises the observers with the rest of the host; null: an own one.
  explicit BackwardKernels(std::recursive_mutex* lock = nullptr)
      : lock_(lock != nullptr ? lock : &own_lock_) {}

  // One backward pass's hooks: removes them when destroyed (with the lock held).
  class Hooks {
   public:
    ~Hooks();

   private:
    friend class BackwardKernels;
    // The engine's graph task running this pass: -1 until one of its roots has run.
    struct Pass {
      std::atomic<int> task{-1};
    };
    BackwardKernels* owner_ = nullptr;
    std::shared_ptr<Pass> pass_ = std::make_shared<Pass>();
    std::vector<std::pair<torch_compat::AutogradNodePtr, uintptr_t>> hooks_;
  };

  // Remembers `kernel` of `model` as the producer of the grad_fn of each tensor in `outputs`.
  // The first producer wins: a later kernel returning its input unchanged (eval dropout) does
  // not take the node over. Does nothing when grad mode is off.
  void NoteForward(HostGraph* model, const KernelInfo& kernel,
                   const std::vector<c10::IValue>& outputs);
  // Attributes the grad_fn of `tensor` to `scope` (without "Gradients/") of `model`: a host's
  // own forward kernel, such as the CLI trainer's loss.
  void NoteNode(const at::Tensor& tensor, HostGraph* model, const std::string& scope,
                const std::string& module_path);
  // Attributes the backward node with `sequence_nr` made on thread `thread_id` (a Python
  // autograd Function's, which no forward kernel produced) to `scope` of `model`, where the
  // Function was applied. The most recent kMaxFunctions are kept.
  void NoteFunction(HostGraph* model, const std::string& scope, const std::string& module_path,
                    uint64_t sequence_nr, uint64_t thread_id);
  // Names the AccumulateGrad node of `param` after `name`, its path in `model`.
  void AddParameter(const at::Tensor& param, HostGraph* model, const std::string& name);
  // Forgets the forward producers (after each backward pass: the nodes are gone).
  void ClearForward() { producers_.clear(); }
  // Forgets the producers of nodes that no longer exist (when other nodes noted may still be
  // ahead of a backward pass: two forward calls, then their backward passes).
  void ForgetDeadNodes();

  // Hooks every node reachable from the grad_fns of `roots`. `fallback` (not null) owns the
  // nodes no model produced. Without `names`, in a step that neither dumps nor watches for
  // exceptions (where no node would register or dump a kernel), only the roots are hooked, so
  // that InHookedPass still knows the pass: the graph is neither walked nor named.
  std::unique_ptr<Hooks> Hook(const std::vector<at::Tensor>& roots, HostGraph* fallback,
                              bool names = true);
  // Is the calling thread running a node of a backward pass hooked now (its own thread, or a
  // device thread the engine runs it on)?
  bool InHookedPass() const;

 private:
  // What is the same for a node's kernel every step is interned once, so that hooking a
  // backward pass builds no names and a node's kernel is found without a lookup by name.
  //
  // One registered (or not yet) kernel: the ordinal-th node of its base in a pass.
  struct Site {
    bool registered = false;
    KernelInfo kernel;
  };
  // "Gradients/<scope>/<node name>": the nodes of a pass with this base are numbered in the
  // order the pass is walked, and the ordinal-th is the same kernel (of its model) every step.
  struct Base {
    std::string name;  // the node name
    std::map<std::pair<HostGraph*, int>, Site> sites;  // by (model, ordinal)
    uint64_t pass = 0;  // the last pass (passes_) that walked a node of this base
    int walked = 0;     // how many nodes of this base that pass has walked
  };
  // A scope's name ("Default/fc1-Linear") and, by backward node name, the kernels under it.
  struct ScopeName {
    std::string scope;
    std::unordered_map<std::string, Base> bases;  // by node name ("ConvolutionBackward0")
  };
  // Where a node's kernel goes: the model and scope, and the forward kernel (-1 when none)
  // whose source trace it takes.
  struct Scope {
    HostGraph* model = nullptr;
    ScopeName* name = nullptr;
    std::string module_path;
    int64_t kernel = -1;  // the forward kernel's index in `model`'s graph; -1 when none
    mutable const Scope* inherited = nullptr;  // as a node nobody produced inherits it
  };
  struct Producer {
    // expired: the address was reused (null: a node no forward kernel produced)
    torch_compat::WeakAutogradNodePtr node{torch_compat::AutogradNodePtr()};
    const Scope* where = nullptr;
  };
  struct Parameter {
    HostGraph* model = nullptr;
    std::string name;
    const Scope* where = nullptr;  // its AccumulateGrad's, made at the first pass
  };

  // The interned scope (kernel -1: no forward kernel's source trace).
  const Scope* InternScope(HostGraph* model, const std::string& scope,
                           const std::string& module_path, int64_t kernel);
  const Scope* Inherited(const Scope* scope);
  const Producer* ProducerOf(const torch_compat::AutogradNodePtr& node) const;
  // The Function NoteFunction attributed `node` to, or null.
  const Producer* FunctionOf(const torch::autograd::Node& node) const;
  void OnNode(const Scope& where, const Base& base, Site& site,
              const std::vector<at::Tensor>& received, const std::vector<at::Tensor>& produced);

  std::unordered_map<const torch::autograd::Node*, Producer> producers_;
  // Sequence numbers never repeat on a thread: an old entry can name no later node.
  static constexpr size_t kMaxFunctions = 1 << 14;
  std::map<std::pair<uint64_t, uint64_t>, Producer> functions_;  // by (thread, sequence_nr)
  std::unordered_map<const at::TensorImpl*, Parameter> parameters_;
  std::unordered_map<std::string, std::unique_ptr<ScopeName>> scope_names_;
  std::map<std::tuple<HostGraph*, const ScopeName*, std::string, int64_t>, std::unique_ptr<Scope>>
      scopes_;
  // The scope of each forward kernel (by model, then kernel index), as NoteForward last saw it.
  std::unordered_map<HostGraph*, std::vector<const Scope*>> kernel_scopes_;
  std::recursive_mutex own_lock_;
  std::recursive_mutex* lock_;
  std::vector<const Hooks*> open_;  // passes hooked now
  uint64_t passes_ = 0;             // passes walked (Hook with names)
  // The nodes a pass walks, in order (breadth first from the roots, which come first), each
  // with the scope it inherits where no forward kernel produced it (the scope of the node that
  // reaches it); kept between passes (under lock_) so that a pass allocates neither.
  struct Walked {
    torch_compat::AutogradNodePtr node;
    const Scope* inherited;
  };
  std::vector<Walked> walk_;
  PointerSet seen_;  // the addresses of the nodes the pass has reached (only compared)
};

// An optimizer's update of one parameter as a kernel: inputs are the parameter before, its
// gradient and the optimizer state before (each copied first when the session reads it: the
// update writes them in place); outputs are the parameter and the state after.
//
//   UpdateCapture capture(kernel, p, p.grad(), {exp_avg, exp_avg_sq});   // before the update
//   ... update p, exp_avg, exp_avg_sq in place ...
//   capture.Finish(p, {exp_avg, exp_avg_sq});                            // dumps
class UpdateCapture {
 public:
  // Does nothing (and copies nothing) unless `kernel`'s session wants it in this step.
  // REQUIRES: `session` is the session `kernel` was registered with, or null; `kernel` lives
  // until Finish (it is not copied).
  UpdateCapture(DumpSession* session, const KernelInfo& kernel, const at::Tensor& param,
                const at::Tensor& grad, const std::vector<at::Tensor>& state);
  void Finish(const at::Tensor& param, const std::vector<at::Tensor>& state);

 private:
  DumpSession* session_;  // null: not wanted
  const KernelInfo* kernel_;  // the caller's, which outlives the capture
  std::vector<TensorView> inputs_;
};

// Views of the defined tensors (undefined ones are left out, the others numbered in order).
std::vector<TensorView> DefinedViews(const std::vector<at::Tensor>& tensors);

}  // namespace graphdump::torch_internal
