#include "compiled/compiled_graph.h"

#include <cstdio>
#include <utility>

#include "eager/eager_capture.h"
#include "graphdump/torch/host.h"
#include "host/tensor_views.h"

namespace graphdump::torch_internal {

// torchscript/graph_compiler.h's (whose CompiledGraph, the TorchScript executor's, is another
// type): "file:line `code`" of the kernel's user frame.
std::string DescribeSource(const KernelInfo& kernel);

namespace {

// Generated kernels write their buffers through raw pointers, never through a version counter,
// and Inductor reuses a buffer's storage for later values: a statistic summarised from a
// compiled kernel's buffer is never reused (TensorOrigin).
void ForgetOrigins(std::vector<TensorView>* views) {
  for (TensorView& v : *views) v.origin = TensorOrigin{};
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

KernelInfo CompiledGraph::AppendKernel(KernelInfo kernel) {
  kernel.graph_id = info_.graph_id;
  kernel.index = static_cast<uint32_t>(info_.kernels.size());
  kernel.full_name += "-op" + std::to_string(kernel.index);
  if (registered_) kernel = session_->AddKernel(kernel.graph_id, kernel);
  info_.kernels.push_back(kernel);
  return kernel;
}

void CompiledGraph::BeginCall() {
  if (!registered_ || in_call_) return;
  in_call_ = true;
  running_.reset();
  session_->BeginStep(info_.graph_id);
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
  return in_call_ && index < info_.kernels.size() && session_->StepDumps() &&
         session_->Wants(info_.kernels[index]);
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
                                              const std::vector<uint32_t>& written) const {
  HostWork host_work;  // the copies are graphdump's, not kernels
  std::vector<c10::IValue> args(inputs.begin(), inputs.end());
  std::vector<TensorView> views;
  Slots slots;
  AppendInputViews(*session_, info_.kernels[index], args, written, /*logical_layout=*/true,
                   &views, &slots);
  ReportSkipped(*session_, info_.kernels[index], /*input=*/true, slots);
  ForgetOrigins(&views);
  return views;
}

void CompiledGraph::Done(uint32_t index, const std::vector<TensorView>& inputs,
                         const std::vector<at::Tensor>& outputs) {
  HostWork host_work;
  std::vector<TensorView> views;
  Slots slots;
  for (const at::Tensor& t : outputs) AppendViews(t, /*logical_layout=*/true, &views, &slots);
  ReportSkipped(*session_, info_.kernels[index], /*input=*/false, slots);
  ForgetOrigins(&views);
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
    const std::vector<uint32_t>& written) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  CompiledGraph* graph = Compiled(graph_id);
  if (graph == nullptr || !session_) return nullptr;
  // op_debug_mode 4 keeps every kernel's inputs until it has run: those of one that raises
  // are dumped (EndCompiledCall).
  if (!graph->Wants(index) && !graph->WatchesFailure(index)) return nullptr;
  auto views = std::make_shared<std::vector<TensorView>>(graph->Inputs(index, inputs, written));
  graph->Starting(index, views);
  return views;
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
