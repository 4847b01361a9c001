// What one outermost operator call becomes (eager_capture.h): its kernel, found again or
// discovered (name, schema, arguments, source line), the views of its inputs before it runs and
// of its outputs after, and the session's calls; the in-place writes it reports.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <algorithm>
#include <exception>
#include <sstream>

#include "eager/eager_capture.h"
#include "eager/eager_kernel_call.h"
#include "host/tensor_views.h"
#include "torch_compat.h"
#include "torchscript/graph_compiler.h"

namespace graphdump::torch_internal {
namespace {

// Freed KernelCalls' memory, per thread (a call is made and freed on the watched thread); plain
// arrays, so that no destructor runs at the thread's end before a last call is freed.
constexpr size_t kMaxFreeCalls = 64;
thread_local void* t_free_calls[kMaxFreeCalls];
thread_local size_t t_free_call_count = 0;

// Calls of an operator inside one scope are counted under one key.
uint64_t OccurrenceKey(uint32_t scope_id, uint32_t op_id) {
  return uint64_t{scope_id} << 32 | op_id;
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
