// EagerCapture's callbacks (eager_capture.h): registering and switching them on the watched
// thread, the module frames, the operators told apart from other records, the autograd nodes;
// what an operator call becomes is eager_kernel.cc's.
#include "eager/eager_capture.h"

#include <pthread.h>

#include <atomic>
#include <exception>
#include <string_view>

#include "eager/eager_kernel_call.h"
#include "torch_compat.h"

namespace graphdump::torch_internal {
namespace {

// The capture the callback serves (RecordFunction callbacks are plain functions).
std::atomic<EagerCapture*> g_capture{nullptr};
// HostWork scopes open on this thread.
thread_local int t_host_work = 0;

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

}  // namespace graphdump::torch_internal
