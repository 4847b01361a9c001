#include "eager/eager_capture.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <sstream>
#include <string_view>

#include "torchscript/graph_compiler.h"
#include "graphdump/selector.h"
#include "host/tensor_views.h"
#include "torch_compat.h"

namespace graphdump::torch_internal {
namespace {

// The capture the callback serves (RecordFunction callbacks are plain functions).
std::atomic<EagerCapture*> g_capture{nullptr};
// HostWork scopes open on this thread.
thread_local int t_host_work = 0;
// The scope prefix of a module run again by a backward pass.
constexpr std::string_view kRecompute = "Recompute/";

// Calls of an operator inside one scope are counted under one key.
uint64_t OccurrenceKey(uint32_t scope_id, uint32_t op_id) {
  return uint64_t{scope_id} << 32 | op_id;
}

}  // namespace

// One outermost operator call in flight, from its start callback to its end callback.
struct EagerCapture::KernelCall : at::ObserverContext {
  // Made and freed once per outermost operator call: the memory of freed calls is kept on the
  // thread for the next ones (a RecordFunction deletes its context through the base class,
  // whose virtual destructor makes these the functions that free it).
  static void* operator new(size_t size);
  static void operator delete(void* memory, size_t size) noexcept;

  EagerGraph* graph = nullptr;
  uint32_t index = 0;
  bool wants = false;
  DumpSession* session = nullptr;  // the graph's session while the capture dumps, else null
  bool discovering = false;
  int exceptions = 0;  // std::uncaught_exceptions() at the start: more at the end = it raised
  std::vector<TensorView> inputs;
  Slots input_slots;
  // Tensors the operator writes in place whose statistics must not be reused afterwards.
  std::vector<at::Tensor> unannotated_writes;
};

namespace {

// Freed KernelCalls' memory, per thread (a call is made and freed on the watched thread); plain
// arrays, so that no destructor runs at the thread's end before a last call is freed.
constexpr size_t kMaxFreeCalls = 64;
thread_local void* t_free_calls[kMaxFreeCalls];
thread_local size_t t_free_call_count = 0;

// The operator last seen at each of a few slots picked by its name's address (OperatorOf runs
// twice per operator call; most calls find it here before the hash map). Only the watched
// thread reads and writes it, and a new capture empties it (one capture at a time).
struct OpCacheEntry {
  const char* name = nullptr;
  uint32_t op_id = 0;
};
constexpr int kOpCacheBits = 8;
OpCacheEntry g_op_cache[size_t{1} << kOpCacheBits];

OpCacheEntry& OpCacheSlot(const char* name) {
  return g_op_cache[(reinterpret_cast<uintptr_t>(name) * 0x9E3779B97F4A7C15ull) >>
                    (64 - kOpCacheBits)];
}

// The watched thread's callbacks (the capture made on this thread registered them).
thread_local std::vector<at::CallbackHandle> t_thread_handles;

// This thread's entry of callback `handle`, or null. PyTorch keeps a thread's callbacks in its
// thread-local state, which the autograd engine swaps while it runs a node: only what the state
// holds now is found.
const at::RecordFunctionCallbacksEntry* ThreadCallback(at::CallbackHandle handle) {
  for (const at::RecordFunctionCallbacksEntry& entry :
       at::get_record_function_tls_().sorted_tls_callbacks_) {
    if (entry.handle_ == handle) return &entry;
  }
  return nullptr;
}

// Turns this thread's callback `handle` on or off, when it has it and it is not so already.
void SetThreadCallback(at::CallbackHandle handle, bool on) {
  const at::RecordFunctionCallbacksEntry* entry = ThreadCallback(handle);
  if (entry == nullptr || entry->enabled_ == on) return;
  if (on) {
    at::reenableCallback(handle);
  } else {
    at::disableCallback(handle);
  }
}

// Removes the callbacks a capture registered on this thread, once it is gone.
void RemoveStaleThreadCallbacks() {
  for (at::CallbackHandle handle : std::exchange(t_thread_handles, {})) {
    if (ThreadCallback(handle) != nullptr) at::removeCallback(handle);
  }
}

}  // namespace

void* EagerCapture::KernelCall::operator new(size_t size) {
  if (size != sizeof(KernelCall) || t_free_call_count == 0) return ::operator new(size);
  return t_free_calls[--t_free_call_count];
}

void EagerCapture::KernelCall::operator delete(void* memory, size_t size) noexcept {
  if (size != sizeof(KernelCall) || t_free_call_count == kMaxFreeCalls) {
    return ::operator delete(memory);
  }
  t_free_calls[t_free_call_count++] = memory;
}

HostWork::HostWork() { ++t_host_work; }
HostWork::~HostWork() { --t_host_work; }

EagerCapture::EagerCapture(Callbacks callbacks, std::recursive_mutex* lock)
    : callbacks_(std::move(callbacks)), lock_(lock) {
  // A forked child (a DataLoader worker) keeps the callbacks and this thread's id, but never
  // the dump: it captures nothing.
  static const int registered =
      pthread_atfork(nullptr, nullptr, [] { g_capture.store(nullptr, std::memory_order_release); });
  (void)registered;
  thread_id_ = at::RecordFunction::currentThreadId();
  for (OpCacheEntry& entry : g_op_cache) entry = OpCacheEntry{};  // an earlier capture's ids
  script_frame_.scope = "Default/script";
  script_frame_.scope_id = ScopeId(script_frame_.scope);
  RemoveStaleThreadCallbacks();  // an earlier capture's, ended on another thread
  g_capture.store(this, std::memory_order_release);
  operator_handle_ = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&EagerCapture::OnThreadStart, &EagerCapture::OnThreadEnd)
          .needsInputs(true)
          .needsOutputs(true)
          .scopes({at::RecordScope::FUNCTION}));
  backward_handle_ = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&EagerCapture::OnThreadStart, &EagerCapture::OnThreadEnd)
          .scopes({at::RecordScope::BACKWARD_FUNCTION}));
  t_thread_handles = {operator_handle_, backward_handle_};
  SetThreadCallbacks(false);
}

EagerCapture::~EagerCapture() {
  if (global_handle_ != 0) at::removeCallback(global_handle_);
  // Another thread cannot reach the watched thread's callbacks: they remove themselves when
  // next called there (RemoveStaleThreadCallbacks).
  if (at::RecordFunction::currentThreadId() == thread_id_) RemoveStaleThreadCallbacks();
  g_capture.store(nullptr, std::memory_order_release);
}

void EagerCapture::SetActive(bool active, bool writes) { Switch(active, naming_, writes); }

void EagerCapture::SetNaming(bool naming) { Switch(active_, naming, writes_); }

void EagerCapture::Switch(bool active, bool naming, bool writes) {
  const bool was_on = Captures() || writes_;
  active_ = active;
  naming_ = naming;
  writes_ = writes;
  const bool on = Captures() || writes_;
  if (was_on == on) return;
  // Depths are counted only while the callback runs; it is switched between operator calls.
  op_depth_ = 0;
  nested_off_ = false;
  backward_depth_ = 0;
  on_.store(on, std::memory_order_release);
  const bool watched = at::RecordFunction::currentThreadId() == thread_id_;
  if (watched && !global_mode_.load(std::memory_order_acquire)) {
    SetThreadCallbacks(on);
    return;
  }
  // A switch on another thread: the global callback serves from now on (the watched thread's
  // callbacks turn themselves off when next called, OnThreadStart).
  if (global_handle_ == 0) {
    global_handle_ = at::addGlobalCallback(
        at::RecordFunctionCallback(&EagerCapture::OnGlobalStart, &EagerCapture::OnGlobalEnd)
            .needsInputs(true)
            .needsOutputs(true)
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
    at::disableCallback(global_handle_);
  }
  global_mode_.store(true, std::memory_order_release);
  if (on) {
    at::reenableCallback(global_handle_);
  } else {
    at::disableCallback(global_handle_);
  }
  if (watched) SetThreadCallbacks(false);
}

void EagerCapture::SetThreadCallbacks(bool on) {
  SetThreadCallback(backward_handle_, on);
  SetThreadCallback(operator_handle_, on);
}

void EagerCapture::SetOperatorCallback(bool on) { SetThreadCallback(operator_handle_, on); }

bool EagerCapture::TakeKernel(EagerGraph** graph, uint32_t* index) {
  taken_call_ = nullptr;
  if (starting_graph_ == nullptr) return false;
  *graph = std::exchange(starting_graph_, nullptr);
  *index = starting_index_;
  taken_call_ = std::exchange(starting_call_, nullptr);
  return true;
}

void EagerCapture::SetComputedInputs(c10::ArrayRef<c10::IValue> args) {
  KernelCall* call = std::exchange(taken_call_, nullptr);
  if (call == nullptr || call->session == nullptr || call->inputs.empty()) return;
  std::lock_guard<std::recursive_mutex> lock(*lock_);
  call->inputs.clear();
  call->input_slots = Slots();
  AppendInputViews(*call->session, call->graph->kernel(call->index), args,
                   call->graph->writes(call->index).annotated, /*logical_layout=*/true,
                   &call->inputs, &call->input_slots);
}

const std::string& EagerCapture::current_path() const {
  return frames_.empty() ? script_frame_.module_path : frames_.back().module_path;
}

const std::string& EagerCapture::current_scope() const {
  return frames_.empty() ? script_frame_.scope : frames_.back().scope;
}

bool EagerCapture::InBackward() const { return backward_depth_ > 0 || autograd_calls_ > 0; }

void EagerCapture::PushModule(EagerGraph* graph, const std::string& module_path,
                              const std::string& scope) {
  Frame frame;
  frame.graph = graph;
  frame.module_path = module_path;
  // A module run again by a backward pass recomputes what its forward computed.
  const bool recompute = InBackward() || (!frames_.empty() &&
                                          frames_.back().scope.starts_with(kRecompute));
  frame.scope =
      recompute && !scope.starts_with(kRecompute) ? std::string(kRecompute) + scope : scope;
  frame.scope_id = ScopeId(frame.scope);
  frames_.push_back(std::move(frame));
}

void EagerCapture::Pop() {
  if (!frames_.empty()) frames_.pop_back();
}

void EagerCapture::StartRootCall() { occurrences_.clear(); }

void EagerCapture::StartIteration() {
  occurrences_.clear();
  producers_.Clear();
  unwritten_.Clear();
}

std::string EagerCapture::TakeFailure() { return std::exchange(failure_, std::string()); }

uint32_t EagerCapture::ScopeId(const std::string& scope) {
  auto [it, added] = scope_ids_.emplace(scope, static_cast<uint32_t>(scope_ids_.size()));
  return it->second;
}

bool EagerCapture::OperatorOf(const at::RecordFunction& fn, uint32_t* op_id) {
  // An operator's name lives in its schema, so its address identifies it: one lookup per call.
  const char* name = fn.name();
  OpCacheEntry& cached = OpCacheSlot(name);
  if (cached.name == name) {
    *op_id = cached.op_id;
    return true;
  }
  auto it = op_by_address_.find(name);
  if (it != op_by_address_.end()) {
    cached = {name, it->second};
    *op_id = it->second;
    return true;
  }
  if (!fn.operator_name()) return false;  // a label or an autograd Function: transparent
  // Overloads (add.Tensor, add.Scalar) share one name, and so one op type.
  auto [named, added] = op_by_name_.emplace(name, static_cast<uint32_t>(op_types_.size()));
  if (added) {
    const std::string qualified = name;
    const size_t colons = qualified.rfind("::");
    op_types_.push_back(colons == std::string::npos ? qualified : qualified.substr(colons + 2));
  }
  op_by_address_.emplace(name, named->second);
  cached = {name, named->second};
  *op_id = named->second;
  return true;
}

std::unique_ptr<at::ObserverContext> EagerCapture::OnThreadStart(const at::RecordFunction& fn) {
  EagerCapture* self = g_capture.load(std::memory_order_acquire);
  if (self == nullptr) {
    RemoveStaleThreadCallbacks();
    return nullptr;
  }
  if (fn.threadId() != self->thread_id_) return nullptr;
  // Switched off, or the global callback serves: a state the autograd engine restored, or a
  // switch on another thread, left them on.
  if (!self->on_.load(std::memory_order_acquire) ||
      self->global_mode_.load(std::memory_order_acquire)) {
    self->SetThreadCallbacks(false);
    return nullptr;
  }
  return self->Start(fn, /*per_thread=*/true);
}

void EagerCapture::OnThreadEnd(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  EagerCapture* self = g_capture.load(std::memory_order_acquire);
  if (self == nullptr || fn.threadId() != self->thread_id_) return;
  self->End(fn, ctx, /*per_thread=*/true);
}

std::unique_ptr<at::ObserverContext> EagerCapture::OnGlobalStart(const at::RecordFunction& fn) {
  EagerCapture* self = g_capture.load(std::memory_order_acquire);
  if (self == nullptr || fn.threadId() != self->thread_id_) return nullptr;
  return self->Start(fn, /*per_thread=*/false);
}

void EagerCapture::OnGlobalEnd(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  EagerCapture* self = g_capture.load(std::memory_order_acquire);
  if (self == nullptr || fn.threadId() != self->thread_id_) return;
  self->End(fn, ctx, /*per_thread=*/false);
}

std::unique_ptr<at::ObserverContext> EagerCapture::Start(const at::RecordFunction& fn,
                                                         bool per_thread) {
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    ++backward_depth_;
    return nullptr;
  }
  uint32_t op_id = 0;
  if (!OperatorOf(fn, &op_id)) {
    if (torch_compat::IsAutogradEvaluation(fn)) {
      ++backward_depth_;
    } else {
      NoteFunction(fn);
    }
    return nullptr;
  }
  const bool outermost = op_depth_++ == 0;
  if (!outermost) {
    // The operators an operator calls are not kernels: none is recorded until the outermost
    // one ends (End). Switched off at the first nested call, not at every outermost start:
    // switching costs PyTorch a lock and a rebuild of the thread's callbacks, and most
    // operators of a training call none.
    if (per_thread && !nested_off_) {
      SetOperatorCallback(false);
      nested_off_ = true;
    }
    return nullptr;
  }
  if (callbacks_.before_write) {
    try {
      ReportWrites(fn, op_id);
    } catch (const std::exception&) {
    }
  }
  starting_graph_ = nullptr;
  starting_call_ = nullptr;
  failure_.clear();  // one caught before: the program went on
  if (t_host_work > 0 || !Captures()) return nullptr;  // writes reported only
  // Operators inside an autograd node belong to the backward pass, unless a module is being
  // recomputed there.
  if (InBackward() && (frames_.empty() || !frames_.back().scope.starts_with(kRecompute))) {
    return nullptr;
  }
  try {
    return StartKernel(fn, op_id);
  } catch (const std::exception&) {
    return nullptr;  // never disturb the program: this call is not dumped
  }
}

void EagerCapture::End(const at::RecordFunction& fn, at::ObserverContext* ctx, bool per_thread) {
  // The global callback serves now (a switch on another thread while this call ran): only the
  // kernel this callback started is finished here.
  const bool served = !per_thread || !global_mode_.load(std::memory_order_acquire);
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    if (served && backward_depth_ > 0) --backward_depth_;
    return;
  }
  uint32_t op_id = 0;
  if (!OperatorOf(fn, &op_id)) {
    if (served && torch_compat::IsAutogradEvaluation(fn) && backward_depth_ > 0) {
      --backward_depth_;
    }
    return;
  }
  if (ctx != nullptr) {
    try {
      // Operators graphdump runs here (a view's copy) are nested in this one: not kernels.
      EndKernel(fn, *static_cast<KernelCall*>(ctx));
    } catch (const std::exception&) {
    }
  }
  if (!served) return;
  if (op_depth_ > 0) --op_depth_;
  if (op_depth_ == 0) {
    // A kernel no dispatcher call took (its operator never reached the precision run's key)
    // is not handed to the next call.
    starting_graph_ = nullptr;
    starting_call_ = nullptr;
    if (per_thread && std::exchange(nested_off_, false) && on_.load(std::memory_order_acquire)) {
      SetOperatorCallback(true);
    }
  }
}

void EagerCapture::NoteFunction(const at::RecordFunction& fn) {
  // torch.autograd.Function.apply records its class's name with the sequence number its
  // backward node is about to take (THPFunction_apply); labels carry none.
  if (!callbacks_.function || !Captures() || fn.seqNr() < 0 || op_depth_ != 0 ||
      t_host_work > 0 ||
      InBackward() || !at::GradMode::is_enabled()) {
    return;
  }
  const Frame& frame = frames_.empty() ? script_frame_ : frames_.back();
  EagerGraph* graph = frames_.empty() ? script_graph_ : frame.graph;
  if (graph == nullptr) return;
  try {
    callbacks_.function(graph, frame.scope, frame.module_path,
                        static_cast<uint64_t>(fn.seqNr()), fn.threadId());
  } catch (const std::exception&) {
  }
}

void EagerCapture::ReportWrites(const at::RecordFunction& fn, uint32_t op_id) {
  const c10::ArrayRef<const c10::IValue> args = fn.inputs();
  if (op_id >= op_writes_.size()) op_writes_.resize(op_id + 1);
  auto [it, added] = op_writes_[op_id].try_emplace(args.size());
  std::vector<uint32_t>& writes = it->second;
  if (added) {
    // Overloads share the operator's name (add.Tensor, add.out): the call is one of those
    // taking as many arguments.
    for (const auto& op : torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(fn.name()))) {
      const c10::FunctionSchema& schema = op->schema();
      if (schema.arguments().size() != args.size()) continue;
      for (uint32_t i = 0; i < args.size(); ++i) {
        if ((torch_compat::SchemaWritesArgument(schema, i) ||
             torch_compat::SchemaWritesUnannotated(schema, i)) &&
            std::find(writes.begin(), writes.end(), i) == writes.end()) {
          writes.push_back(i);
        }
      }
    }
  }
  for (uint32_t i : writes) {
    ForEachTensor(args[i], [&](const at::Tensor& t) {
      if (t.defined() && t.has_storage()) {
        callbacks_.before_write(t.storage().unsafeGetStorageImpl());
      }
    });
  }
}

std::unique_ptr<at::ObserverContext> EagerCapture::StartKernel(const at::RecordFunction& fn,
                                                               uint32_t op_id) {
  const Frame& frame = frames_.empty() ? script_frame_ : frames_.back();
  EagerGraph* graph = frames_.empty() ? script_graph_ : frame.graph;
  if (graph == nullptr) return nullptr;
  const uint32_t occurrence = occurrences_[OccurrenceKey(frame.scope_id, op_id)]++;
  auto call = std::make_unique<KernelCall>();
  call->graph = graph;
  call->exceptions = std::uncaught_exceptions();
  std::unique_lock<std::recursive_mutex> lock(*lock_);
  const int64_t found = graph->Find(frame.scope_id, op_id, occurrence);
  // The source trace takes the GIL, which a thread waiting for the lock may hold: it is taken
  // with the lock released. Only this thread adds eager kernels, so the kernel is still new
  // when the lock is taken again.
  std::vector<SourceLocation> trace;
  if (found < 0 && callbacks_.source_trace) {
    lock.unlock();
    trace = callbacks_.source_trace();
    lock.lock();
  }
  if (found < 0) {
    call->index = Discover(graph, frame, op_id, occurrence, fn, std::move(trace)).index;
    call->discovering = true;
  } else {
    call->index = static_cast<uint32_t>(found);
  }
  const KernelInfo& kernel = graph->kernel(call->index);
  DumpSession* session = active_ ? graph->session() : nullptr;
  call->session = session;
  call->wants = session != nullptr && session->Wants(graph->graph_id(), call->index);
  // op_debug_mode 4 dumps the inputs of a kernel that raises.
  const bool keep_inputs =
      call->wants || (session != nullptr && session->config().op_debug_mode == 4);
  const EagerGraph::Writes& writes = graph->writes(call->index);
  const c10::ArrayRef<const c10::IValue> args = fn.inputs();
  for (uint32_t i : writes.unannotated) {
    if (i < args.size() && args[i].isTensor()) call->unannotated_writes.push_back(args[i].toTensor());
  }
  if (keep_inputs && !unwritten_.empty()) {
    const std::vector<uint32_t> unwritten = unwritten_.Slots(args);
    if (!unwritten.empty()) graph->MarkUninitializedInputs(call->index, unwritten);
  }
  // An in-place operator's input is dumped as it was before the operator wrote it, batch
  // norm's running statistics too.
  if (keep_inputs) {
    std::vector<uint32_t> both;
    if (!writes.unannotated.empty()) {
      both = writes.annotated;
      both.insert(both.end(), writes.unannotated.begin(), writes.unannotated.end());
    }
    AppendInputViews(*session, kernel, args, both.empty() ? writes.annotated : both,
                     /*logical_layout=*/true, &call->inputs, &call->input_slots);
  }
  // Handed out only now: the operators the views above ran (copies) reach the dispatcher
  // before the kernel does, and are not the kernel (a precision run, TakeKernel).
  starting_graph_ = graph;
  starting_index_ = call->index;
  starting_call_ = call.get();
  return call;
}

const EagerCapture::OverloadSchema& EagerCapture::SchemaOf(const c10::OperatorName& name) {
  auto [it, added] = schemas_.try_emplace(name.name + "." + name.overload_name);
  OverloadSchema& overload = it->second;
  if (!added) return overload;
  auto handle = c10::Dispatcher::singleton().findOp(name);
  if (!handle) return overload;
  const c10::FunctionSchema& schema = handle->schema();
  std::ostringstream text;
  text << schema;
  overload.text = text.str();
  for (uint32_t i = 0; i < schema.arguments().size(); ++i) {
    overload.arguments.push_back(schema.arguments()[i].name());
    if (torch_compat::SchemaWritesArgument(schema, i)) overload.writes.annotated.push_back(i);
    if (torch_compat::SchemaWritesUnannotated(schema, i)) overload.writes.unannotated.push_back(i);
  }
  return overload;
}

const KernelInfo& EagerCapture::Discover(EagerGraph* graph, const Frame& frame, uint32_t op_id,
                                         uint32_t occurrence, const at::RecordFunction& fn,
                                         std::vector<SourceLocation> trace) {
  KernelInfo k;
  k.op_type = op_types_[op_id];
  k.full_name = frame.scope + "/" + k.op_type;  // EagerGraph::Add appends "-op{N}"
  k.module_path = frame.module_path;
  k.source_trace = std::move(trace);
  const c10::ArrayRef<const c10::IValue> args = fn.inputs();
  const OverloadSchema& overload = SchemaOf(*fn.operator_name());
  k.schema = overload.text;
  // Arguments as the run passed them (docs/graph-proto.md): each tensor is the next input slot.
  uint32_t slot = 0;
  auto name_of = [&](const at::Tensor& t) {
    const Producer* producer = producers_.Find(t.unsafeGetTensorImpl());
    if (producer != nullptr && producer->graph_id == graph->graph_id()) {
      return std::to_string(producer->index);
    }
    const std::string param = graph->TensorName(t.unsafeGetTensorImpl());
    return param.empty() ? "input" + std::to_string(slot) : param;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = args[i];
    KernelArgument arg;
    arg.name = i < overload.arguments.size() ? overload.arguments[i] : "arg" + std::to_string(i);
    if (v.isTensor()) {
      if (v.toTensor().defined()) {
        k.input_names.push_back(name_of(v.toTensor()));
        AppendMetas(v, &k.inputs);
      }
      arg.value = "input." + std::to_string(slot++);
    } else if (v.isTensorList()) {
      std::string text = "[";
      for (const at::Tensor& t : v.toTensorVector()) {
        k.input_names.push_back(name_of(t));
        text += (text.size() > 1 ? ", " : "") + ("input." + std::to_string(slot++));
      }
      AppendMetas(v, &k.inputs);
      arg.value = text + "]";
    } else {
      auto literal = ArgumentLiteral(v);
      arg.value = literal ? *literal : "<runtime>";
      k.attributes[arg.name] = arg.value;
    }
    k.arguments.push_back(std::move(arg));
  }
  // Memory the operator allocates and does not write is not data (docs/file-format.md).
  EagerGraph::Writes writes = overload.writes;
  writes.allocates = AllocatesUninitialized(k.op_type);
  if (writes.allocates) k.uninitialized_outputs = {0};
  const KernelInfo& added = graph->Add(frame.scope_id, op_id, occurrence, std::move(k));
  graph->set_writes(added.index, std::move(writes));
  return added;
}

void EagerCapture::EndKernel(const at::RecordFunction& fn, KernelCall& call) {
  std::lock_guard<std::recursive_mutex> lock(*lock_);
  const KernelInfo& kernel = call.graph->kernel(call.index);
  DumpSession* session = call.session;
  if (std::uncaught_exceptions() > call.exceptions) {
    // A recomputation reruns calls that succeeded in the forward: one that raises is
    // torch.utils.checkpoint ending it early (use_reentrant=False stops once every saved
    // tensor is back, raising from its saved-tensor hook inside the next operator).
    if (kernel.full_name.starts_with(kRecompute)) return;
    failure_ = "kernel " + kernel.full_name + " (aten::" + kernel.op_type + ") failed at " +
               DescribeSource(kernel);
    if (session) session->OnKernelFailed(kernel, call.inputs, failure_);
    return;
  }
  const std::vector<c10::IValue>& outputs = fn.outputs();
  for (const c10::IValue& v : outputs) {
    ForEachTensor(v, [&](const at::Tensor& t) {
      if (t.defined()) {
        // An entry pins its TensorImpl's address: one found is this very tensor's.
        auto [producer, added] = producers_.Emplace(t.unsafeGetTensorImpl());
        if (added) producer->tensor = c10::weak_intrusive_ptr<c10::TensorImpl>(t.getIntrusivePtr());
        producer->graph_id = call.graph->graph_id();
        producer->index = call.index;
        if (producers_.size() >= prune_producers_at_) {
          producers_.EraseIf(
              [](const void*, const Producer& p) { return p.tensor.expired(); });
          prune_producers_at_ = std::max(kMinProducerPrune, 2 * producers_.size());
        }
      }
    });
  }
  if (call.graph->writes(call.index).allocates) {
    for (const c10::IValue& v : outputs) unwritten_.Note(v);
  }
  // A view of memory nothing wrote (`buf[0]`, `buf.view(-1)` of an `empty` buffer) is not data
  // either.
  if (call.wants && !unwritten_.empty()) {
    const std::vector<uint32_t> unwritten = unwritten_.Slots(outputs);
    if (!unwritten.empty()) call.graph->MarkUninitializedOutputs(call.index, unwritten);
  }
  if (call.discovering) {
    std::vector<TensorMeta> metas;
    for (const c10::IValue& v : outputs) AppendMetas(v, &metas);
    call.graph->SetOutputs(call.index, std::move(metas));
  }
  if (session && callbacks_.forward && at::GradMode::is_enabled()) {
    callbacks_.forward(call.graph, kernel, outputs);
  }
  if (session == nullptr) return;
  if (call.wants) {
    std::vector<TensorView> output_views;
    output_views.reserve(outputs.size());
    Slots output_slots;
    for (const c10::IValue& v : outputs) {
      AppendViews(v, /*logical_layout=*/true, &output_views, &output_slots);
    }
    ReportSkipped(*session, kernel, /*input=*/true, call.input_slots, &vmap_said_);
    ReportSkipped(*session, kernel, /*input=*/false, output_slots, &vmap_said_);
    session->OnKernelDone(kernel, call.inputs, output_views);
  }
  // Batch norm wrote its running statistics behind their version counters.
  for (const at::Tensor& t : call.unannotated_writes) ForgetStatistics(*session, t);
}

}  // namespace graphdump::torch_internal
