// DumpHost: dumps a training that a program outside graphdump drives: the Python package's
// engine (docs/python.md). The program calls modules, runs backward passes and optimizer steps
// itself. Two front ends feed the host's one session, with graph ids in the order modules are
// registered:
//   - a TorchScript module's forward runs through graphdump's executor (ModelFor, Call);
//   - a plain module (eager PyTorch) runs as it is, and its operators are seen at the
//     dispatcher (AddEagerGraph, EnterModule/ExitModule around each module call; the capture
//     is src/torch/eager/eager_capture.h), named like the executor's kernels.
// For both, the host
//   - names and dumps the autograd nodes of the backward passes it is told about (HookBackward)
//     as kernels of the graphs that produced them;
//   - dumps each optimizer update of a parameter as a kernel
//     Default/optimizer-{Class}/{parameter}/{Class}-op{N} (inputs: the parameter before, its
//     gradient, the tensors of its optimizer state before; outputs: the parameter and the state
//     after), in the graph of the module that owns the parameter;
//   - dumps each gradient all-reduce of data parallelism as a kernel
//     Default/allreduce-DataParallel/{parameter}/AllReduce-op{N} (input: the local gradient;
//     output: the reduced one), as `graphdump train` does;
//   - ends iterations: once an optimizer step has been seen (or TrackOptimizers was called),
//     each optimizer step ends one; until then each call of the first module registered starts
//     a new one.
//
//   auto host = DumpHost::Create(std::move(session));
//   auto model = host->ModelFor(module);                     // registers graph 0
//   auto out = host->Call(*model, {x});                      // forward, dumped
//   { auto hooks = host->HookBackward({loss}); loss.backward(); }   // backward kernels
//   auto step = host->BeginOptimizerStep("AdamW", params, states);  // before the update
//   ...update...
//   host->EndOptimizerStep(*step, states_after);             // dumps, ends the iteration
//   host->Close();
//
// Threading (docs/reliability.md, "Threads"): the host captures one thread's training, the
// thread that drives it (the eager capture watches the thread that made it). Its backward
// observers run on whichever thread the autograd engine runs a node on, and only for the
// backward passes HookBackward hooked. Every member function, observer and capture callback
// that reads or writes the host's state or the session holds the host's lock (a recursive
// mutex), so the session is never touched from two threads at once. The eager capture never
// holds it while it reads the caller's Python frames (that takes the GIL); Call holds it while
// the TorchScript module runs. Never throws: LibTorch errors come back as a Status naming the
// kernel.
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "graphdump/session.h"
#include "graphdump/status.h"
#include "graphdump/torch/host_graph.h"
#include "graphdump/torch/torch_model.h"

namespace graphdump {

namespace torch_internal {
class BackwardKernels;
class CompiledGraph;
class EagerCapture;
class EagerGraph;
class EagerPrecision;
class UpdateCapture;
}  // namespace torch_internal

// One module of an eager root's tree, for AddEagerGraph: an identity the program's module
// calls are known by (the Python object's address), its attribute path ("" for the root) and
// class name.
struct EagerModuleInfo {
  const void* key = nullptr;
  std::string path;
  std::string class_name;
};

class DumpHost {
 public:
  // The host owns and closes `session`. With a null session nothing is dumped, but modules
  // still run through the executor, so a program computes the same whether or not (and
  // whatever) it dumps; the other calls then do nothing.
  explicit DumpHost(std::unique_ptr<DumpSession> session);
  ~DumpHost();
  DumpHost(const DumpHost&) = delete;
  DumpHost& operator=(const DumpHost&) = delete;

  // The model running `module`'s forward, compiled and registered at the first request (graph
  // id: the number of models registered before). The module is shared, not copied. Errors name
  // a graph node the executor cannot run.
  StatusOr<TorchModel*> ModelFor(const torch::jit::Module& module);
  // The registered model of `module`, or null.
  TorchModel* FindModel(const torch::jit::Module& module) const;
  // The registered model holding `submodule` (the same object), and its path in it; null when
  // no registered model holds it.
  TorchModel* FindOwner(const torch::jit::Module& submodule, std::string* path) const;

  // --- eager front end ---
  // Registers the graph of a plain module the program calls from outside any other module
  // (`modules[0]`... the root's tree, itself with path ""), with its named parameters and
  // buffers. Returns its graph id. The module's calls are captured from the next EnterModule.
  uint32_t AddEagerGraph(std::vector<EagerModuleInfo> modules,
                         std::vector<std::pair<std::string, at::Tensor>> parameters,
                         std::vector<std::pair<std::string, at::Tensor>> buffers);
  // A module call begins: `key` identifies the module. Returns false, pushing nothing, when the
  // module is not part of a registered graph and no module call is open (a new root: register
  // it with AddEagerGraph, or EnterUncaptured). A call of a graph's root from outside any module
  // is one call of that graph (an iteration starts when none is open).
  bool EnterModule(const void* key, const std::string& class_name);
  // A module call whose operators are not captured (a module the program did not ask for).
  void EnterUncaptured();
  // The module call that EnterModule or EnterUncaptured began has returned (or raised).
  void ExitModule();
  // May a module call begun now go without EnterModule and ExitModule? True inside another
  // module's call while the capture names no kernel (an iteration that dumps nothing, outside
  // a precision run): the frames of nested calls would name nothing, and the outermost call
  // alone keeps the iteration's bookkeeping.
  bool SkipsNestedModule() const;
  // dump_mode 2's set_dump for a module of an eager graph: marks it and everything under it.
  // NotFound when no eager graph holds the module.
  Status SetEagerDump(const void* key);
  // The Python frames of the calling thread, innermost first: the user's source lines of eager
  // kernels (asked once per kernel).
  void SetSourceTraceProvider(std::function<std::vector<SourceLocation>()> provider);
  // "kernel NAME (aten::op) failed at FILE:LINE" for the last eager kernel that raised (or
  // compiled kernel: "(cpp_fused_...)"), then cleared; "" when none did.
  std::string TakeEagerFailure();
  // While the returned object lives, operators are not captured as eager kernels (the
  // program's optimizer step, which the host dumps as update kernels).
  std::shared_ptr<void> PauseEager();
  // While the returned object lives, the program's torch.autograd.backward (or grad) call runs
  // on the watched thread: the operators autograd runs there are not eager kernels
  // (EagerCapture::EnterAutograd). Null when nothing is captured yet.
  std::shared_ptr<void> AutogradCall();

  // --- compiled front end (torch.compile, exported programs; src/torch/compiled/) ---
  // Registers a graph Inductor compiled (or an exported program's graph, whose kernels are its
  // ATen nodes): `kernels` in execution order, each with its full name without the "-op{N}"
  // suffix. Returns its graph id.
  uint32_t AddCompiledGraph(const std::string& name, std::vector<KernelInfo> kernels);
  // dump_mode 2's set_dump for a module inside a compiled module: marks the compiled kernels
  // under `module_path`, the module's path in the module that was compiled (a compiled
  // kernel's module path is relative to it), in every compiled graph, now and later ones.
  void SetCompiledDump(const std::string& module_path);
  // A call of the compiled graph begins (starting an iteration when none is open; a call of
  // the first graph registered ends the open one first until an optimizer step is seen) and
  // ends.
  void BeginCompiledCall(uint32_t graph_id);
  void EndCompiledCall(uint32_t graph_id);
  // Before kernel `index` of compiled graph `graph_id` runs: the views of its inputs when it
  // dumps in this call (those at `written`, which it writes in place, copied first), else
  // null. `writes`: the buffers it writes without PyTorch's dispatcher (a generated C++
  // kernel's), whose statistics still queued are read first (DumpSession::BeforeWrite).
  std::shared_ptr<std::vector<TensorView>> CompiledKernelInputs(
      uint32_t graph_id, uint32_t index, const std::vector<at::Tensor>& inputs,
      const std::vector<uint32_t>& written, const std::vector<at::Tensor>& writes = {});
  // After it ran: dumps it with those inputs and the buffers it wrote.
  void CompiledKernelDone(uint32_t graph_id, uint32_t index,
                          const std::vector<TensorView>& inputs,
                          const std::vector<at::Tensor>& outputs);
  // The generated code of the graph's call wrote a buffer outside any kernel (a copy between
  // devices): the rest of the call reuses no kernel's statistics for another's input.
  void CompiledWriteUnseen(uint32_t graph_id);

  // Something other than an operator is about to change or free the bytes of the allocation
  // `storage` (a StorageImpl): `UntypedStorage.resize_`, with which FSDP frees and restores a
  // parameter's memory. Its statistics still queued are read first, and none recorded for it
  // is reused (DumpSession::BeforeWrite, ForgetStatistics).
  void BeforeStorageChange(const void* storage);

  // Runs one call of `model`'s forward (arguments without the module) in the current
  // iteration, starting one when none is open. Errors name the failing kernel and its source.
  StatusOr<c10::IValue> Call(TorchModel* model, std::vector<c10::IValue> inputs);

  // Hooks the backward graph reachable from `roots` until the returned object is destroyed;
  // destroy it when the backward pass has returned. Null when no model has run. Only this
  // pass's evaluation of the nodes is dumped: another thread's backward pass reaching a node
  // of it (a parameter's gradient accumulator) is not.
  class BackwardPass;
  std::shared_ptr<BackwardPass> HookBackward(const std::vector<at::Tensor>& roots);
  // Is the calling thread running a node of a backward pass hooked now (a device thread of
  // autograd's engine, a DistributedDataParallel communication hook, a reentrant backward)?
  bool InHookedBackward() const;

  // One optimizer step of `optimizer_class` ("AdamW") over `params` with their optimizer state
  // tensors before the step (`states[i]` for `params[i]`, in the state's key order). Call it
  // before the step: it copies what the update kernels' inputs need. Parameters without a
  // gradient are left out (torch.optim skips them too). `optimizer` numbers the optimizer object
  // (0, 1, ... in the order of their first steps), `groups[i]` is the parameter group of
  // `params[i]` and `hyperparameters[i]` its group's hyperparameters at this step as a JSON
  // object ({"lr": 0.001, "betas": [0.9, 0.999], ...}; "" or missing: none): each update kernel
  // has the attributes `optimizer` and `param_group`, and a group's hyperparameters are appended
  // to graphs/hyperparameters.jsonl when they change (docs/python.md, "Optimizer update
  // kernels"). Its source trace is the step's caller (the provider of SetSourceTraceProvider,
  // when set, at the kernel's first step).
  class OptimizerStep;
  std::shared_ptr<OptimizerStep> BeginOptimizerStep(
      const std::string& optimizer_class, const std::vector<at::Tensor>& params,
      const std::vector<std::vector<at::Tensor>>& states,
      const std::vector<int64_t>& groups = {},
      const std::vector<std::string>& hyperparameters = {}, int64_t optimizer = 0);
  // After the step: dumps the update kernels with the parameters and `states_after`, then ends
  // the iteration unless `end_iteration` is false (another optimizer of the same training step
  // has yet to step: one iteration per training step, however many optimizers step).
  void EndOptimizerStep(OptimizerStep& step,
                        const std::vector<std::vector<at::Tensor>>& states_after,
                        bool end_iteration = true);
  // Ends the open iteration, if any (an optimizer steps a second time in one iteration: the
  // training step its first step belonged to has ended).
  void EndOpenIteration();
  // Returns once the session's queued statistics are reduced and the statistic.csv files of
  // the iterations that ended are written (they are written on a thread of their own).
  void FinishReads();
  // From now on optimizer steps end iterations (also implied by the first BeginOptimizerStep).
  void TrackOptimizers();

  // One all-reduce of gradients across ranks: `params` and their local `grads` before the
  // reduction (copied when wanted). Then EndAllReduce with the reduced gradients dumps the
  // kernels; call it on the thread that runs the other hooks.
  class AllReduceStep;
  std::shared_ptr<AllReduceStep> BeginAllReduce(const std::vector<at::Tensor>& params,
                                                const std::vector<at::Tensor>& grads);
  void EndAllReduce(AllReduceStep& step, const std::vector<at::Tensor>& reduced);

  // --- precision runs of the program (docs/precision.md, "Precision runs of a script") ---
  // Before any module is registered: every floating kernel of the eager graphs computes in
  // `options.dtype` (bf16 or fp16) from now on, their floating parameters and buffers are cast
  // to it, and the kernels and parameters `options.keep_fp32` names stay float32 (as `run
  // --precision` does for a TorchScript model, which TorchScript modules get). The calling
  // thread is the one that runs the program's kernels. InvalidArgument for another dtype or a
  // malformed entry.
  Status SetPrecision(const PrecisionOptions& options);
  // For each --keep-fp32 entry that matched no kernel that ran and no parameter or buffer so
  // far: a message naming it and what exists nearby. Empty when not a precision run.
  std::vector<std::string> PrecisionUnmatched() const;
  // The precision run so far as JSON: `precision`, `kernels` (those that ran with a floating
  // input or output, first seen first: graph_id, full_name, op_type, module_path,
  // source_trace) and `states` (the floating parameters' and buffers' dotted names). "" when
  // not a precision run.
  std::string PrecisionReport() const;
  // The dtype a precision run hands `t` to a module in: "" when `t` goes as it is (not a
  // precision run, not floating, of the run's dtype, or kept in float32), else the run's
  // dtype ("bfloat16", "float16").
  std::string PrecisionModuleInput(const at::Tensor& t) const;

  // Ends the open iteration, waits for every write, reports unused kernel entries. Returns the
  // first write error. Idempotent.
  Status Close();

  DumpSession* session() const { return session_.get(); }  // null: not dumping
  // The lock every member function takes (recursive); a caller holding it may call them.
  std::recursive_mutex& lock() const { return mutex_; }
  size_t num_models() const { return graphs_.size(); }
  // Calls of modules run through the executor, and optimizer steps seen.
  uint64_t calls() const { return calls_; }
  uint64_t optimizer_steps() const { return optimizer_steps_; }

 private:
  struct Owner {
    HostGraph* model = nullptr;
    std::string name;  // the parameter's path in the model ("fc1.weight")
  };
  Owner OwnerOf(const at::Tensor& param);
  void EnsureIteration();
  void EndIteration();
  // Sends each eager graph's kernel metadata learned since its last call ended to the session.
  void SendEagerMetas();
  // Runs the eager capture in iterations that dump (and always in op_debug_mode 4).
  void UpdateEagerActive();
  void BeginRootCall(HostGraph* graph);
  void AddParameters(HostGraph* graph,
                     const std::vector<std::pair<std::string, at::Tensor>>& parameters);
  // The host kernel of `owner`'s parameter under `scope_prefix`, added (with `source_trace`)
  // the first time. The reference stays valid: host kernels are never removed.
  KernelInfo& HostKernel(const Owner& owner, const std::string& scope_prefix,
                         const std::string& op_type,
                         const std::function<std::vector<SourceLocation>()>& source_trace = {});
  // The update kernel of one parameter for one optimizer class, found once (OwnerOf and
  // HostKernel give the same kernel for a parameter every step).
  struct UpdateKernel {
    KernelInfo* kernel = nullptr;  // in host_kernels_
    HostGraph* model = nullptr;
  };

  // Before everything it guards; see "Threading" above.
  mutable std::recursive_mutex mutex_;
  std::unique_ptr<DumpSession> session_;
  std::vector<std::unique_ptr<TorchModel>> models_;
  std::vector<std::unique_ptr<torch_internal::EagerGraph>> eager_graphs_;
  // Compiled graphs by graph id (null for the other kinds).
  std::vector<torch_internal::CompiledGraph*> compiled_by_id_;
  std::vector<std::unique_ptr<torch_internal::CompiledGraph>> compiled_graphs_;
  std::vector<std::string> compiled_set_dump_;  // SetCompiledDump's paths
  torch_internal::CompiledGraph* Compiled(uint32_t graph_id) const;
  std::string compiled_failure_;  // TakeEagerFailure's, of the last compiled call that raised
  std::vector<HostGraph*> graphs_;  // both kinds, by graph id
  // Modules of eager graphs: key -> (graph, path).
  std::unordered_map<const void*, std::pair<torch_internal::EagerGraph*, std::string>> modules_;
  std::unique_ptr<torch_internal::EagerCapture> capture_;  // made with the first eager graph
  // Makes the capture (at the first eager graph, or for a precision run).
  void EnsureCapture();
  // A TorchScript model of a precision run: its parameters cast, the entries it matches kept.
  Status SetModelPrecision(TorchModel* model);
  std::unique_ptr<torch_internal::EagerPrecision> precision_;  // SetPrecision; null: off
  PrecisionOptions precision_options_;
  std::function<std::vector<SourceLocation>()> source_trace_;
  std::vector<bool> root_calls_;  // per open module frame: is it a call of its graph's root
  std::unordered_map<const void*, TorchModel*> by_object_;  // module object -> model
  std::unique_ptr<torch_internal::BackwardKernels> backward_;
  std::unordered_map<const at::TensorImpl*, Owner> owners_;  // parameters of the models
  uint64_t unnamed_parameters_ = 0;
  // Host kernels (optimizer updates, all-reduces), by (model, full name without the op id).
  std::map<std::pair<HostGraph*, std::string>, KernelInfo> host_kernels_;
  // By optimizer class, then parameter (as OwnerOf knows it).
  std::unordered_map<std::string, std::unordered_map<const at::TensorImpl*, UpdateKernel>>
      update_kernels_;
  // The hyperparameters last appended to graphs/hyperparameters.jsonl for each parameter group
  // (a JSON object's text), by (optimizer, group): a group's line is written when they change.
  std::map<std::pair<int64_t, int64_t>, std::string> hyperparameters_written_;
  bool optimizer_mode_ = false;
  uint64_t calls_ = 0;
  uint64_t optimizer_steps_ = 0;
};

}  // namespace graphdump
