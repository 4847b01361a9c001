// EagerCapture: sees every ATen operator an eager PyTorch program calls, at the dispatcher, in
// C++, and turns the ones the program's own code called into kernels of EagerGraphs
// (eager_graph.h), dumped through the same DumpSession as the TorchScript executor's kernels.
//
// How it hooks in: ATen RecordFunction callbacks (the profiler's hook; with needsInputs and
// needsOutputs the dispatcher hands them each call's arguments and results), registered on the
// watched thread only (thread-local callbacks): one for operator calls, one for autograd nodes.
//   - While an outermost operator runs, the operator callback is off on the thread, so PyTorch
//     records none of the operators nested in it (a `to` inside an addition: a dtype cast, its
//     copy, its allocation), and boxes none of their arguments and results: they are never
//     kernels, and recording them cost more than the kernel's own record.
//   - The callbacks are switched on the watched thread, where PyTorch keeps them. A switch made
//     on another thread falls back to one global callback (the thread filter below) for the
//     rest of the capture, recording nested operators again.
//   - A kernel is an outermost operator call: `aten::linear`, not the `aten::addmm` inside it.
//     Nested calls only count depth. Records that are not operators (a custom autograd
//     Function's apply, profiler labels) are transparent.
//   - Backward: operators inside an autograd node (RecordScope::BACKWARD_FUNCTION), and those
//     the autograd engine runs around a node (inside its "evaluate_function" label: reducing
//     and accumulating gradients), are not forward kernels; the backward capture
//     (host_kernels.h) dumps the nodes themselves.
//   - Module scopes come from module frames the host pushes around each module call
//     (DumpHost::EnterModule, called by the Python package's nn.Module.__call__ wrapper; in a
//     step that names nothing, only around calls from outside any module). A
//     module entered during backward is recomputation (activation checkpointing): its kernels'
//     scopes start with "Recompute/" instead of "Default/".
//   - Only the thread that made the capture is watched (the thread the Python package captures,
//     which also runs its CPU backward passes; other threads' operators are left alone,
//     docs/reliability.md "Threads"), and only while it is active (SetActive: the host turns it
//     on for iterations that dump), so an iteration that dumps nothing costs no callback at all.
//   - The user's source line: `source_trace` (the Python frames, innermost first) is asked once
//     per kernel, when the kernel is first seen, never per call.
//   - In-place operators (`add_`, `masked_fill_`): inputs they write are dumped as they were
//     before the write (copied first when the session reads them).
// RecordFunction takes plain function pointers, so one capture at a time is reachable from the
// callback (one Dump at a time in a process).
#pragma once

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "eager/eager_graph.h"
#include "graphdump/internal/pointer_map.h"
#include "host/unwritten_memory.h"
#include "graphdump/graph.h"

namespace graphdump::torch_internal {

// While one lives on a thread, operators that thread calls are never eager kernels: graphdump's
// own work (copies and views for the dump, taken in autograd hooks and host kernels), the
// executor's kernels, the program's optimizer step (dumped as update kernels).
class HostWork {
 public:
  HostWork();
  ~HostWork();
  HostWork(const HostWork&) = delete;
  HostWork& operator=(const HostWork&) = delete;
};

class EagerCapture {
 public:
  struct Callbacks {
    // The caller's source frames, innermost first (the Python stack); may be null.
    std::function<std::vector<SourceLocation>()> source_trace;
    // Every kernel's outputs as it finishes, when grad mode is on (backward naming).
    std::function<void(EagerGraph*, const KernelInfo&, const std::vector<c10::IValue>&)> forward;
    // A torch.autograd.Function applied where the capture is (a library's Python Function,
    // such as torch.utils.checkpoint's CheckpointFunction), when grad mode is on: its backward
    // node will have sequence number `sequence_nr` on the watched thread `thread_id`, and has
    // no forward kernel to be named after (backward naming).
    std::function<void(EagerGraph*, const std::string& scope, const std::string& module_path,
                       uint64_t sequence_nr, uint64_t thread_id)>
        function;
    // Called before every outermost operator on the watched thread, while the capture is on,
    // for the allocation (StorageImpl) of each tensor the operator writes in place: the
    // session's queued reads of it finish first (DumpSession::BeforeWrite). May be null.
    std::function<void(const void* storage)> before_write;
  };

  // Registers the callback, inactive. The calling thread is the one watched. `lock` (the
  // host's, not null) is held while a kernel's graph and session are read or written, never
  // while `source_trace` runs.
  EagerCapture(Callbacks callbacks, std::recursive_mutex* lock);
  ~EagerCapture();  // removes the callback
  EagerCapture(const EagerCapture&) = delete;
  EagerCapture& operator=(const EagerCapture&) = delete;

  // Active: kernels are dumped (the host turns it on for iterations that dump). Inactive
  // with `writes`: only the in-place writes of outermost operators are reported
  // (callbacks_.before_write), while the session still reads tensors of a step that has ended.
  void SetActive(bool active, bool writes = false);
  bool active() const { return active_; }
  // Naming: kernels are found and named in every call even when nothing is dumped (a
  // precision run, eager_precision.h, asks which kernel each call is).
  void SetNaming(bool naming);
  // Are kernels captured (dumped or named), not only writes reported?
  bool Captures() const { return active_ || naming_; }
  // The kernel whose outermost operator call is starting, once: true and sets `graph` and
  // `index` when the call that reaches the dispatcher now is a kernel of a graph.
  bool TakeKernel(EagerGraph** graph, uint32_t* index);
  // The kernel TakeKernel handed out computes on `args` (its inputs as a precision run cast
  // them), not on what the program passed: its dumped inputs are taken again from them.
  void SetComputedInputs(c10::ArrayRef<c10::IValue> args);

  // Module frames. `graph` null: the module's operators are not captured (a module the host
  // does not dump). A frame pushed while a backward pass runs is recomputation.
  void PushModule(EagerGraph* graph, const std::string& module_path, const std::string& scope);
  void Pop();
  size_t depth() const { return frames_.size(); }
  // The innermost frame's graph, module path and scope (null / "" outside any module).
  EagerGraph* current_graph() const { return frames_.empty() ? nullptr : frames_.back().graph; }
  const std::string& current_path() const;
  const std::string& current_scope() const;
  // Is a backward pass running on the watched thread (an autograd node is being evaluated, or
  // the program's torch.autograd.backward/grad call is under way)?
  bool InBackward() const;
  // The program calls torch.autograd.backward or grad on the watched thread: until the matching
  // ExitAutograd, what autograd runs there outside its nodes (the seed gradient's `ones_like`,
  // the engine's casts of gradients to the dtype their node expects, which exist only when the
  // dtypes differ) is backward work, not kernels, so kernel names never depend on dtypes.
  void EnterAutograd() { ++autograd_calls_; }
  void ExitAutograd() {
    if (autograd_calls_ > 0) --autograd_calls_;
  }

  // The graph that holds operators called outside any module ("Default/script/...").
  void set_script_graph(EagerGraph* graph) { script_graph_ = graph; }
  // A call of a root module starts: occurrence counters start again.
  void StartRootCall();
  // An iteration starts: what produced which tensor is forgotten.
  void StartIteration();

  // "kernel NAME (aten::op) failed at FILE:LINE `code`" for the last kernel that raised, then
  // cleared; "" when none did since the last call, or when a kernel started since (the
  // failure was caught and the program went on).
  std::string TakeFailure();

 private:
  struct Frame {
    EagerGraph* graph = nullptr;
    std::string module_path;
    std::string scope;
    uint32_t scope_id = 0;
  };
  struct KernelCall;

  // The watched thread's callbacks, and the global one that serves instead after a switch on
  // another thread (global_mode_).
  static std::unique_ptr<at::ObserverContext> OnThreadStart(const at::RecordFunction& fn);
  static void OnThreadEnd(const at::RecordFunction& fn, at::ObserverContext* ctx);
  static std::unique_ptr<at::ObserverContext> OnGlobalStart(const at::RecordFunction& fn);
  static void OnGlobalEnd(const at::RecordFunction& fn, at::ObserverContext* ctx);
  // `per_thread`: called through the watched thread's callbacks, which turn the operator
  // callback off while an outermost operator runs.
  std::unique_ptr<at::ObserverContext> Start(const at::RecordFunction& fn, bool per_thread);
  void End(const at::RecordFunction& fn, at::ObserverContext* ctx, bool per_thread);
  // Turns the watched thread's callbacks (both, or the operator one) on or off; on that thread.
  void SetThreadCallbacks(bool on);
  void SetOperatorCallback(bool on);
  std::unique_ptr<at::ObserverContext> StartKernel(const at::RecordFunction& fn, uint32_t op_id);
  void EndKernel(const at::RecordFunction& fn, KernelCall& call);
  // `trace`: the kernel's source trace, asked before the lock was taken.
  const KernelInfo& Discover(EagerGraph* graph, const Frame& frame, uint32_t op_id,
                             uint32_t occurrence, const at::RecordFunction& fn,
                             std::vector<SourceLocation> trace);
  // Is `fn` an operator call (not a label)? Sets its operator's id, interning it when new.
  bool OperatorOf(const at::RecordFunction& fn, uint32_t* op_id);
  // `fn`, not an operator, is an autograd Function's apply when it carries a sequence number:
  // tells callbacks_.function the scope it runs in.
  void NoteFunction(const at::RecordFunction& fn);
  uint32_t ScopeId(const std::string& scope);
  // Turns the callback on while the capture dumps, names or reports writes.
  void Switch(bool active, bool naming, bool writes);
  // callbacks_.before_write for the tensors `fn` (operator `op_id`) writes in place.
  void ReportWrites(const at::RecordFunction& fn, uint32_t op_id);

  Callbacks callbacks_;
  std::recursive_mutex* lock_;
  at::CallbackHandle operator_handle_ = 0;  // the watched thread's
  at::CallbackHandle backward_handle_ = 0;  // the watched thread's
  at::CallbackHandle global_handle_ = 0;    // made at the first switch on another thread
  std::atomic<bool> global_mode_{false};
  std::atomic<bool> on_{false};  // active_ || naming_ || writes_
  uint64_t thread_id_ = 0;
  bool active_ = false;
  bool naming_ = false;
  bool writes_ = false;  // SetActive's `writes`
  // The kernel TakeKernel hands out (set when an outermost call starts).
  EagerGraph* starting_graph_ = nullptr;
  uint32_t starting_index_ = 0;
  KernelCall* starting_call_ = nullptr;  // alive until its end callback
  KernelCall* taken_call_ = nullptr;     // the one TakeKernel handed out last
  int op_depth_ = 0;        // operator calls open on the watched thread
  bool nested_off_ = false;  // the operator callback is off until the outermost call ends
  bool vmap_said_ = false;   // a tensor batched by torch.vmap was said not dumped (ReportSkipped)
  int backward_depth_ = 0;  // autograd node records (and engine evaluations) open on it
  int autograd_calls_ = 0;  // EnterAutograd calls not yet exited (not reset by Switch)
  std::vector<Frame> frames_;
  Frame script_frame_;
  EagerGraph* script_graph_ = nullptr;
  // Operators by their name's address (stable: it lives in the operator's schema), and by name.
  std::unordered_map<const char*, uint32_t> op_by_address_;
  std::unordered_map<std::string, uint32_t> op_by_name_;
  std::vector<std::string> op_types_;  // "linear"
  // Per overload ("add.Tensor"): its schema's text, its arguments' names and the arguments it
  // writes, for the kernels found calling it (worked out once, at the first).
  struct OverloadSchema {
    std::string text;  // "" when the dispatcher does not know the operator
    std::vector<std::string> arguments;
    EagerGraph::Writes writes;  // annotated and unannotated; `allocates` is the operator's
  };
  std::unordered_map<std::string, OverloadSchema> schemas_;
  const OverloadSchema& SchemaOf(const c10::OperatorName& name);
  // Per operator and number of arguments, the arguments some overload of it with that many
  // writes in place or updates unannotated (batch norm's running statistics): a superset of
  // what the call writes, found once from the operators' schemas.
  std::vector<std::unordered_map<size_t, std::vector<uint32_t>>> op_writes_;
  std::unordered_map<std::string, uint32_t> scope_ids_;
  // Calls of (scope, operator) so far in this root call.
  std::unordered_map<uint64_t, uint32_t> occurrences_;
  // Which kernel produced a tensor, for the graph files' dataflow. The weak reference keeps the
  // TensorImpl's memory (not its data) until the iteration ends or the entry is pruned after the
  // tensor died, so a tensor made later cannot get its address and be taken for this output.
  struct Producer {
    c10::weak_intrusive_ptr<c10::TensorImpl> tensor{c10::intrusive_ptr<c10::TensorImpl>()};
    uint32_t graph_id = 0;
    uint32_t index = 0;
  };
  PointerMap<Producer> producers_;  // by TensorImpl
  // When producers_ reaches this size, the entries of tensors that died are dropped (a script
  // that never ends an iteration would otherwise hold every output it ever made). An entry's
  // weak reference keeps the dead tensor's TensorImpl allocated: kept small, so that the
  // allocator reuses that memory soon (bench/eager_bench.py's capture cost per operator:
  // 1.0-1.1 us at 256, 1.2-2.6 us at 4096).
  size_t prune_producers_at_ = kMinProducerPrune;
  static constexpr size_t kMinProducerPrune = 256;
  // Memory of operators that allocate without writing (`empty`, `empty_like`...) that nothing
  // wrote yet: a kernel that reads it, or returns a view of it, holds memory that is not data.
  // Forgotten when the iteration ends.
  UnwrittenMemory unwritten_;
  std::string failure_;
};

}  // namespace graphdump::torch_internal
