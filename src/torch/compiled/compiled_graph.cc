#include "compiled/compiled_graph.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <utility>

#include "eager/eager_capture.h"
#include "graphdump/selector.h"
#include "graphdump/torch/host.h"
#include "host/tensor_views.h"

namespace graphdump::torch_internal {

// torchscript/graph_compiler.h's (whose CompiledGraph, the TorchScript executor's, is another
// type): "file:line `code`" of the kernel's user frame.
std::string DescribeSource(const KernelInfo& kernel);

namespace {

// Generated kernels write their buffers through raw pointers, never through a version counter,
// and Inductor reuses a buffer's storage for later values: the version counter of a compiled
// kernel's buffer says nothing of its bytes (TensorOrigin). CompiledGraph versions the buffers
// its kernels write, and the graph inputs they read, itself, within one call (InputOrigins,
// OutputOrigins).

// The versions CompiledGraph gives the bytes its kernels write: one sequence for every graph
// (a forward's buffer is a backward's input), far above any version counter's value.
uint64_t NextVersion() {
  static std::atomic<uint64_t> next{uint64_t{1} << 62};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// Kernels that write only what the generated code reports: Inductor's C++ kernels (through
// their out and in_out pointers) and extern calls into an `out` buffer (mm, addmm, bmm, ...).
bool ReportsWrites(const KernelInfo& kernel) {
  auto kind = kernel.attributes.find("inductor_kernel");
  if (kind == kernel.attributes.end()) return false;
  return kind->second.rfind("cpp_", 0) == 0 || kind->second.rfind("extern_kernels.", 0) == 0;
}

}  // namespace

CompiledGraph::CompiledGraph(uint32_t graph_id, DumpSession* session, const std::string& name,
                             std::vector<KernelInfo> kernels)
    : session_(session) {
  info_.graph_id = graph_id;
  info_.name = name;
  for (KernelInfo& k : kernels) AppendKernel(std::move(k));
}

Status CompiledGraph::Register() {
  if (registered_ || session_ == nullptr) return Status::Ok();
  GRAPHDUMP_RETURN_IF_ERROR(session_->OnGraphCompiled(info_));
  registered_ = true;
  return Status::Ok();
}

void CompiledGraph::SetDump(const std::string& module_path) {
  set_dump_paths_.push_back(module_path);
  MarkKernelsUnder(set_dump_paths_, &info_.kernels);
  if (registered_) session_->UpdateKernels(info_.graph_id, info_.kernels);
}

KernelInfo CompiledGraph::AppendKernel(KernelInfo kernel) {
  kernel.graph_id = info_.graph_id;
  kernel.index = static_cast<uint32_t>(info_.kernels.size());
  kernel.full_name += "-op" + std::to_string(kernel.index);
  if (UnderMarkedModule(set_dump_paths_, kernel.module_path)) kernel.marked_for_dump = true;
  if (registered_) kernel.index = session_->AddKernel(kernel.graph_id, kernel);
  reports_writes_.push_back(ReportsWrites(kernel));
  return info_.kernels.emplace_back(std::move(kernel));
}

void CompiledGraph::BeginCall() {
  if (!registered_ || in_call_) return;
  in_call_ = true;
  running_.reset();
  session_->BeginStep(info_.graph_id);
  // A call that dumps reports what its kernels write (CompiledKernelInputs); one that dumps
  // nothing reports nothing: what is queued is read before it runs.
  if (!session_->StepDumps()) session_->FinishReads();
  // Statistics alone are computed as each kernel ends, from the buffers as they are then: a
  // buffer a kernel of this call wrote, read by a later one with no write between, has the
  // statistics its writer's output had. Tensor files are left as they were (an asynchronous
  // dump writes from the buffer later, and Inductor reuses buffers behind the host's back).
  written_.clear();
  reuse_ = session_->StepDumps() && session_->config().op_debug_mode == 0 &&
           session_->config().saved_data == SavedData::kStatistic;
}

void CompiledGraph::InputOrigins(uint32_t index, std::vector<TensorView>* views) {
  const bool reports = reuse_ && reports_writes_[index];
  for (TensorView& v : *views) {
    const void* storage = v.origin.storage.get();
    auto it = storage != nullptr ? written_.find(storage) : written_.end();
    if (it == written_.end()) {
      if (reports && storage != nullptr) {
        // A graph input, or a buffer of an earlier call, read first in this call: its bytes
        // get a version of the call's own, found again by the kernels after this one until
        // one writes them (its version counter says nothing of what generated kernels wrote,
        // but still tells a PyTorch operator's write).
        Seen& seen = written_[storage];
        seen = {v.origin.storage, NextVersion(), v.origin.version};
        v.origin.version = seen.version;
      } else if (reuse_) {
        // Read by a fallback operator: never found again; its storage still names the
        // allocation whose writes wait for the queued read.
        v.origin.versioned = false;
      } else {
        v.origin = TensorOrigin{};
      }
    } else if (reports) {
      Seen& seen = it->second;
      if (seen.counter && *seen.counter != v.origin.version) {
        seen = {seen.storage, NextVersion(), v.origin.version};  // an operator wrote it
      }
      v.origin.version = seen.version;
    } else {
      // A fallback operator may write the buffers it reads: they are unknown from now on.
      v.origin = TensorOrigin{};
      written_.erase(it);
    }
  }
}

void CompiledGraph::OutputOrigins(std::vector<TensorView>* views) {
  for (TensorView& v : *views) {
    if (!reuse_ || v.origin.storage == nullptr) {
      v.origin = TensorOrigin{};
      continue;
    }
    Seen& seen = written_[v.origin.storage.get()];
    if (!seen.storage) seen.storage = v.origin.storage;
    // Every view of the allocation sees the write: the new bytes get a new version.
    seen.version = NextVersion();
    v.origin.version = seen.version;
  }
}

std::string CompiledGraph::EndCall() {
  if (!in_call_) return "";
  in_call_ = false;
  std::string failure;
  if (running_ && running_index_ < info_.kernels.size()) {
    // The kernel raised (the generated code's try/finally, the interpreter's, ended the call
    // between its two lines): the script gets PyTorch's exception as it was raised.
    const KernelInfo& kernel = info_.kernels[running_index_];
    auto kind = kernel.attributes.find("inductor_kernel");
    failure = "kernel " + kernel.full_name + " (" +
              (kind != kernel.attributes.end() ? kind->second : "aten::" + kernel.op_type) +
              ") failed at " + DescribeSource(kernel);
    session_->OnKernelFailed(kernel, *running_, failure);
  }
  running_.reset();
  session_->EndStep(info_.graph_id);
  return failure;
}

bool CompiledGraph::Wants(uint32_t index) const {
  // The session's Wants answers false in a step that dumps nothing.
  return in_call_ && index < info_.kernels.size() && session_->Wants(info_.graph_id, index);
}

bool CompiledGraph::WatchesFailure(uint32_t index) const {
  return in_call_ && index < info_.kernels.size() && session_->config().op_debug_mode == 4;
}

void CompiledGraph::Starting(uint32_t index,
                             std::shared_ptr<const std::vector<TensorView>> inputs) {
  running_index_ = index;
  running_ = std::move(inputs);
}

std::vector<TensorView> CompiledGraph::Inputs(uint32_t index,
                                              const std::vector<at::Tensor>& inputs,
                                              const std::vector<uint32_t>& written) {
  HostWork host_work;  // the copies are graphdump's, not kernels
  const KernelInfo& kernel = info_.kernels[index];
  std::vector<TensorView> views;
  views.reserve(inputs.size());
  Slots slots;
  for (const at::Tensor& t : inputs) AppendSlot(t, /*logical_layout=*/true, &views, &slots);
  ReportSkipped(*session_, kernel, /*input=*/true, slots);
  // The origins of the call's own (InputOrigins) are those OnKernelDone finds statistics by: an
  // input the kernel writes in place is kept as it is before the write under its origin.
  InputOrigins(index, &views);
  for (TensorView& view : views) {
    if (std::find(written.begin(), written.end(), view.slot) == written.end()) continue;
    KeepBeforeWrite(*session_, kernel, inputs[view.slot], /*logical_layout=*/true, &view);
  }
  return views;
}

void CompiledGraph::Done(uint32_t index, const std::vector<TensorView>& inputs,
                         const std::vector<at::Tensor>& outputs) {
  HostWork host_work;
  std::vector<TensorView> views;
  Slots slots;
  for (const at::Tensor& t : outputs) AppendViews(t, /*logical_layout=*/true, &views, &slots);
  ReportSkipped(*session_, info_.kernels[index], /*input=*/false, slots);
  OutputOrigins(&views);
  session_->OnKernelDone(info_.kernels[index], inputs, views);
}

}  // namespace graphdump::torch_internal

// --- DumpHost's compiled front end (host.h), beside the graph it drives ---
namespace graphdump {

using torch_internal::CompiledGraph;

CompiledGraph* DumpHost::Compiled(uint32_t graph_id) const {
  return graph_id < compiled_by_id_.size() ? compiled_by_id_[graph_id] : nullptr;
}

uint32_t DumpHost::AddCompiledGraph(const std::string& name, std::vector<KernelInfo> kernels) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  const auto id = static_cast<uint32_t>(graphs_.size());
  auto graph = std::make_unique<CompiledGraph>(id, session_.get(), name, std::move(kernels));
  for (const std::string& path : compiled_set_dump_) graph->SetDump(path);
  if (session_) {
    Status registered = graph->Register();
    if (!registered.ok()) std::fprintf(stderr, "graphdump: %s\n", registered.message().c_str());
  }
  compiled_by_id_.resize(id + 1, nullptr);
  compiled_by_id_[id] = graph.get();
  graphs_.push_back(graph.get());
  compiled_graphs_.push_back(std::move(graph));
  return id;
}

void DumpHost::SetCompiledDump(const std::string& module_path) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (std::find(compiled_set_dump_.begin(), compiled_set_dump_.end(), module_path) !=
      compiled_set_dump_.end()) {
    return;
  }
  compiled_set_dump_.push_back(module_path);
  for (const auto& graph : compiled_graphs_) graph->SetDump(module_path);
}

void DumpHost::BeginCompiledCall(uint32_t graph_id) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  CompiledGraph* graph = Compiled(graph_id);
  if (graph == nullptr || !session_) return;
  compiled_failure_.clear();  // one caught before: the program went on
  // As for modules: until an optimizer step is seen, each call of the first graph registered
  // (an exported program's, a compiled function's) starts the next iteration.
  if (!optimizer_mode_ && graph == graphs_.front() && session_->IterationOpen()) EndIteration();
  EnsureIteration();
  graph->BeginCall();
}

void DumpHost::EndCompiledCall(uint32_t graph_id) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  CompiledGraph* graph = Compiled(graph_id);
  if (graph == nullptr || !session_) return;
  torch_internal::HostWork host_work;
  std::string failure = graph->EndCall();
  if (!failure.empty()) compiled_failure_ = std::move(failure);
}

std::shared_ptr<std::vector<TensorView>> DumpHost::CompiledKernelInputs(
    uint32_t graph_id, uint32_t index, const std::vector<at::Tensor>& inputs,
    const std::vector<uint32_t>& written, const std::vector<at::Tensor>& writes) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  CompiledGraph* graph = Compiled(graph_id);
  if (graph == nullptr || !session_) return nullptr;
  // The kernel is about to write these behind the dispatcher (which reports the writes of
  // extern and fallback calls): reads of them still queued finish first.
  for (const at::Tensor& t : writes) torch_internal::BeforeWrite(*session_, t);
  for (uint32_t i : written) {
    if (i < inputs.size()) torch_internal::BeforeWrite(*session_, inputs[i]);
  }
  // op_debug_mode 4 keeps every kernel's inputs until it has run: those of one that raises
  // are dumped (EndCompiledCall).
  if (!graph->Wants(index)) graph->WriteUnseen();
  if (!graph->Wants(index) && !graph->WatchesFailure(index)) return nullptr;
  auto views = std::make_shared<std::vector<TensorView>>(graph->Inputs(index, inputs, written));
  graph->Starting(index, views);
  return views;
}

void DumpHost::CompiledWriteUnseen(uint32_t graph_id) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (CompiledGraph* graph = Compiled(graph_id)) graph->WriteUnseen();
}

void DumpHost::CompiledKernelDone(uint32_t graph_id, uint32_t index,
                                  const std::vector<TensorView>& inputs,
                                  const std::vector<at::Tensor>& outputs) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  CompiledGraph* graph = Compiled(graph_id);
  if (graph == nullptr || !session_) return;
  graph->Ran();
  if (graph->Wants(index)) graph->Done(index, inputs, outputs);
}

}  // namespace graphdump
