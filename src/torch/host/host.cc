#include "graphdump/torch/host.h"

#include <cstdio>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "compiled/compiled_graph.h"
#include "eager/eager_capture.h"
#include "eager/eager_graph.h"
#include "eager/eager_precision.h"
#include "host/host_kernels.h"
#include "host/tensor_views.h"

namespace graphdump {

using torch_internal::BackwardKernels;
using torch_internal::EagerCapture;
using torch_internal::EagerGraph;
using torch_internal::ModuleOfParameter;
using torch_internal::Underscored;
using torch_internal::UpdateCapture;

namespace {

// Sets an attribute of `kernel`; returns whether its value changed.
bool SetAttribute(KernelInfo& kernel, const char* name, std::string value) {
  std::string& now = kernel.attributes[name];
  if (now == value) return false;
  now = std::move(value);
  return true;
}

// One parameter group's line of graphs/hyperparameters.jsonl (docs/python.md, "Optimizer update
// kernels"): {"iteration": ..., "optimizer": ..., "param_group": ..., then `values`' keys}, or ""
// when `values` is not a JSON object's text.
std::string HyperparameterLine(uint64_t iteration, int64_t optimizer, int64_t group,
                               const std::string& values) {
  using nlohmann::ordered_json;
  ordered_json parsed = ordered_json::parse(values, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) return "";
  ordered_json line = {{"iteration", iteration}, {"optimizer", optimizer}, {"param_group", group}};
  for (const auto& item : parsed.items()) {
    if (!line.contains(item.key())) line[item.key()] = item.value();
  }
  return line.dump(-1, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace

class DumpHost::BackwardPass {
 public:
  BackwardPass(std::recursive_mutex* lock, BackwardKernels* kernels,
               std::unique_ptr<BackwardKernels::Hooks> hooks)
      : lock_(lock), kernels_(kernels), hooks_(std::move(hooks)) {}
  ~BackwardPass() {
    std::lock_guard<std::recursive_mutex> lock(*lock_);
    hooks_.reset();
    // The pass freed the nodes it consumed (unless retain_graph); nodes of forward calls whose
    // backward is still to come stay noted.
    kernels_->ForgetDeadNodes();
  }

 private:
  std::recursive_mutex* lock_;
  BackwardKernels* kernels_;
  std::unique_ptr<BackwardKernels::Hooks> hooks_;
};

class DumpHost::OptimizerStep {
 public:
  std::vector<at::Tensor> params;  // those with a gradient
  std::vector<UpdateCapture> captures;
  std::vector<size_t> indexes;  // of `params` in the caller's list
};

class DumpHost::AllReduceStep {
 public:
  struct Reduced {
    KernelInfo kernel;
    at::Tensor local;  // a copy of the local gradient
    TensorOrigin local_origin;
    at::Tensor original;  // the gradient before, for the copy's layout
    size_t index = 0;     // in the caller's list
  };
  std::vector<Reduced> wanted;
};

DumpHost::DumpHost(std::unique_ptr<DumpSession> session)
    : session_(std::move(session)), backward_(std::make_unique<BackwardKernels>(&mutex_)) {
  // Statistics are read later only while the eager capture reports in-place writes
  // (EnsureCapture): without it, gradient accumulation would be unseen.
  if (session_) session_->DeferReads(false);
}

DumpHost::~DumpHost() {
  (void)Close();
  precision_.reset();  // before the capture it asks
  capture_.reset();    // before the graphs its callback reaches
}

TorchModel* DumpHost::FindModel(const torch::jit::Module& module) const {
  auto it = by_object_.find(module._ivalue().get());
  return it == by_object_.end() ? nullptr : it->second;
}

TorchModel* DumpHost::FindOwner(const torch::jit::Module& submodule, std::string* path) const {
  for (const auto& model : models_) {
    if (model->module()._ivalue().get() == submodule._ivalue().get()) {
      *path = "";
      return model.get();
    }
    for (const auto& named : model->module().named_modules()) {
      if (named.value._ivalue().get() == submodule._ivalue().get()) {
        *path = named.name;
        return model.get();
      }
    }
  }
  return nullptr;
}

StatusOr<TorchModel*> DumpHost::ModelFor(const torch::jit::Module& module) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (TorchModel* known = FindModel(module)) return known;
  TorchModelOptions options;
  options.graph_id = static_cast<uint32_t>(graphs_.size());
  GRAPHDUMP_ASSIGN_OR_RETURN(std::unique_ptr<TorchModel> model,
                             TorchModel::FromModule(module, session_.get(), options));
  TorchModel* raw = model.get();
  if (precision_) GRAPHDUMP_RETURN_IF_ERROR(SetModelPrecision(raw));
  if (session_) {
    raw->SetKernelObserver(
        [this, raw](const KernelInfo& kernel, const std::vector<c10::IValue>& outputs) {
          backward_->NoteForward(raw, kernel, outputs);
        });
    std::vector<std::pair<std::string, at::Tensor>> parameters;
    for (const auto& p : raw->module().named_parameters(/*recurse=*/true)) {
      parameters.emplace_back(p.name, p.value);
    }
    AddParameters(raw, parameters);
  }
  by_object_[module._ivalue().get()] = raw;
  models_.push_back(std::move(model));
  graphs_.push_back(raw);
  return raw;
}

void DumpHost::AddParameters(HostGraph* graph,
                             const std::vector<std::pair<std::string, at::Tensor>>& parameters) {
  for (const auto& [name, value] : parameters) {
    backward_->AddParameter(value, graph, name);
    owners_.emplace(value.unsafeGetTensorImpl(), Owner{graph, name});
  }
}

uint32_t DumpHost::AddEagerGraph(std::vector<EagerModuleInfo> modules,
                                 std::vector<std::pair<std::string, at::Tensor>> parameters,
                                 std::vector<std::pair<std::string, at::Tensor>> buffers) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  const auto id = static_cast<uint32_t>(graphs_.size());
  std::vector<torch_internal::EagerModule> tree;
  for (const EagerModuleInfo& m : modules) tree.push_back({m.path, m.class_name});
  if (precision_) {
    precision_->AddStates(parameters);
    precision_->AddStates(buffers);
  }
  auto graph = std::make_unique<EagerGraph>(id, session_.get(), tree, parameters, std::move(buffers));
  EagerGraph* raw = graph.get();
  for (const EagerModuleInfo& m : modules) modules_.emplace(m.key, std::make_pair(raw, m.path));
  if (session_) {
    Status registered = raw->Register();
    if (!registered.ok()) std::fprintf(stderr, "graphdump: %s\n", registered.message().c_str());
    AddParameters(raw, parameters);
  }
  eager_graphs_.push_back(std::move(graph));
  graphs_.push_back(raw);
  if (session_ || precision_) {
    EnsureCapture();
    if (eager_graphs_.size() == 1) capture_->set_script_graph(raw);
  }
  return id;
}

void DumpHost::EnsureCapture() {
  if (capture_) return;
  EagerCapture::Callbacks callbacks;
  callbacks.source_trace = source_trace_;
  callbacks.forward = [this](EagerGraph* g, const KernelInfo& kernel,
                             const std::vector<c10::IValue>& outputs) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    backward_->NoteForward(g, kernel, outputs);
  };
  callbacks.function = [this](EagerGraph* g, const std::string& scope,
                              const std::string& module_path, uint64_t sequence_nr,
                              uint64_t thread_id) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    backward_->NoteFunction(g, scope, module_path, sequence_nr, thread_id);
  };
  callbacks.before_write = [this](const void* storage) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    if (session_) session_->BeforeWrite(storage);
  };
  capture_ = std::make_unique<EagerCapture>(std::move(callbacks), &mutex_);
  if (session_) session_->DeferReads(true);
  UpdateEagerActive();
}

void DumpHost::BeforeStorageChange(const void* storage) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (!session_) return;
  session_->BeforeWrite(storage);
  session_->ForgetStatistics(storage);
}

void DumpHost::SetSourceTraceProvider(std::function<std::vector<SourceLocation>()> provider) {
  source_trace_ = std::move(provider);
}

bool DumpHost::EnterModule(const void* key, const std::string& class_name) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto it = modules_.find(key);
  if (it == modules_.end()) {
    if (root_calls_.empty()) return false;
    // A module made during the call, or held outside the root's tree: a scope of its own
    // under the calling module's.
    EagerGraph* graph = capture_ ? capture_->current_graph() : nullptr;
    const std::string path = capture_ ? capture_->current_path() : "";
    if (capture_) {
      capture_->PushModule(graph, path,
                           graph ? graph->ScopeOfUnlisted(capture_->current_scope(), class_name)
                                 : "");
    }
    root_calls_.push_back(false);
    return true;
  }
  auto [graph, path] = it->second;
  const bool root_call = path.empty() && root_calls_.empty() && !(capture_ && capture_->InBackward());
  if (root_call) BeginRootCall(graph);
  if (capture_) capture_->PushModule(graph, path, graph->ScopeOf(path));
  root_calls_.push_back(root_call);
  return true;
}

void DumpHost::EnterUncaptured() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (capture_) capture_->PushModule(nullptr, "", "");
  root_calls_.push_back(false);
}

void DumpHost::ExitModule() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (root_calls_.empty()) return;
  const bool root_call = root_calls_.back();
  root_calls_.pop_back();
  EagerGraph* graph = capture_ ? capture_->current_graph() : nullptr;
  if (capture_) capture_->Pop();
  if (root_call && graph && session_) {
    torch_internal::HostWork host_work;
    graph->EndCall();
  }
}

bool DumpHost::SkipsNestedModule() const {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return !root_calls_.empty() && !(capture_ && capture_->Captures());
}

Status DumpHost::SetEagerDump(const void* key) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto it = modules_.find(key);
  if (it == modules_.end()) return Status::NotFound("the module is part of no dumped graph");
  return it->second.first->SetDump(it->second.second);
}

std::string DumpHost::TakeEagerFailure() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  std::string failure = capture_ ? capture_->TakeFailure() : "";
  return failure.empty() ? std::exchange(compiled_failure_, std::string()) : failure;
}

std::shared_ptr<void> DumpHost::PauseEager() {
  return std::make_shared<torch_internal::HostWork>();
}

std::shared_ptr<void> DumpHost::AutogradCall() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (!capture_) return nullptr;
  capture_->EnterAutograd();
  EagerCapture* capture = capture_.get();
  // The capture lives as long as the host; the handle is closed before the host is.
  return std::shared_ptr<void>(capture, [this](void*) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    if (capture_) capture_->ExitAutograd();
  });
}

// A call of an eager graph's root from outside any module: iteration bookkeeping as for a
// TorchScript model's call (Call), then the graph's step.
void DumpHost::BeginRootCall(HostGraph* graph) {
  ++calls_;
  if (!session_) {
    if (capture_) capture_->StartRootCall();  // a precision run names kernels without a dump
    return;
  }
  if (!optimizer_mode_ && graph == graphs_.front() && session_->IterationOpen()) EndIteration();
  EnsureIteration();
  torch_internal::HostWork host_work;
  if (capture_) capture_->StartRootCall();
  static_cast<EagerGraph*>(graph)->BeginCall();
}

void DumpHost::UpdateEagerActive() {
  if (!capture_) {
    // No capture reports the writes between steps (TorchScript modules alone).
    if (session_ && session_->KeepsStatisticsAcrossSteps()) session_->ForgetAllStatistics();
    return;
  }
  const bool active = session_ && session_->IterationOpen() &&
                      (session_->StepDumps() || session_->config().op_debug_mode == 4);
  // Writes are reported while the capture is on only. Between steps, while the session still
  // reads the last step's tensors or keeps their statistics for the next step, it stays on for
  // writes alone (the next step starts soon, and the training thread need not wait); else the
  // session's queued reads finish first.
  const bool writes = !active && session_ && !session_->IterationOpen() &&
                      (session_->ReadsQueued() || session_->KeepsStatisticsAcrossSteps());
  if (!active && !writes && session_) session_->FinishReads();
  capture_->SetActive(active, writes);
}

void DumpHost::FinishReads() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (session_) session_->FinishReads();
}

void DumpHost::EnsureIteration() {
  if (session_->IterationOpen()) return;
  session_->BeginIteration();
  if (capture_) capture_->StartIteration();
  UpdateEagerActive();
}

void DumpHost::SendEagerMetas() {
  // The outputs of kernels the script ran after its last module call (the loss, gradient
  // clipping) go into this iteration's graph files, not the next call's. A graph without a
  // session sends nothing.
  for (const auto& graph : eager_graphs_) graph->SendMetas();
}

void DumpHost::EndIteration() {
  if (session_->IterationOpen()) {
    SendEagerMetas();
    session_->EndIteration();
  }
  UpdateEagerActive();
}

StatusOr<c10::IValue> DumpHost::Call(TorchModel* model, std::vector<c10::IValue> inputs) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  ++calls_;
  if (session_) {
    if (!optimizer_mode_ && model == graphs_.front() && session_->IterationOpen()) {
      EndIteration();  // the first module's next call starts the next iteration
    }
    EnsureIteration();
  }
  // The executor's kernels are the model's; the dispatcher sees them too.
  torch_internal::HostWork host_work;
  GRAPHDUMP_RETURN_IF_ERROR(model->BeginStep(inputs));
  StatusOr<c10::IValue> out = model->RunMethod(std::move(inputs));
  model->EndStep();
  return out;
}

std::shared_ptr<DumpHost::BackwardPass> DumpHost::HookBackward(
    const std::vector<at::Tensor>& roots) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (!session_ || graphs_.empty()) return nullptr;
  EnsureIteration();
  // A step that dumps nothing registers no backward kernel (BackwardKernels::OnNode): its nodes
  // are not named.
  const bool names = session_->StepDumps() || session_->config().op_debug_mode == 4;
  return std::make_shared<BackwardPass>(&mutex_, backward_.get(),
                                        backward_->Hook(roots, graphs_.front(), names));
}

bool DumpHost::InHookedBackward() const { return backward_->InHookedPass(); }

DumpHost::Owner DumpHost::OwnerOf(const at::Tensor& param) {
  auto it = owners_.find(param.unsafeGetTensorImpl());
  if (it != owners_.end()) return it->second;
  // A parameter of no module run here: named in the order first seen, in the first graph.
  Owner owner{graphs_.front(), "unnamed_" + std::to_string(unnamed_parameters_++)};
  owners_.emplace(param.unsafeGetTensorImpl(), owner);
  return owner;
}

KernelInfo& DumpHost::HostKernel(
    const Owner& owner, const std::string& scope_prefix, const std::string& op_type,
    const std::function<std::vector<SourceLocation>()>& source_trace) {
  const std::string scope = scope_prefix + "/" + Underscored(owner.name);
  auto key = std::make_pair(owner.model, scope + "/" + op_type);
  auto it = host_kernels_.find(key);
  if (it == host_kernels_.end()) {
    it = host_kernels_
             .emplace(key, owner.model->AddHostKernel(
                               scope, op_type, ModuleOfParameter(owner.name),
                               source_trace ? source_trace() : std::vector<SourceLocation>{}))
             .first;
  }
  return it->second;
}

void DumpHost::TrackOptimizers() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  optimizer_mode_ = true;
}

std::shared_ptr<DumpHost::OptimizerStep> DumpHost::BeginOptimizerStep(
    const std::string& optimizer_class, const std::vector<at::Tensor>& params,
    const std::vector<std::vector<at::Tensor>>& states, const std::vector<int64_t>& groups,
    const std::vector<std::string>& hyperparameters, int64_t optimizer) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  optimizer_mode_ = true;
  auto step = std::make_shared<OptimizerStep>();
  // Without a session, or with no graph to hold the kernels (nothing ran here): nothing to do.
  if (!session_ || graphs_.empty()) return step;
  EnsureIteration();
  // Update kernels are registered in the first step that captures, after its forward's
  // (as the backward's: BackwardKernels::OnNode).
  if (!session_->StepDumps() && session_->config().op_debug_mode != 4) return step;
  torch_internal::HostWork host_work;
  // The caller's frames (the line of optimizer.step()), read once for the kernels added now.
  std::optional<std::vector<SourceLocation>> trace;
  auto caller = [&] {
    if (!trace) trace = source_trace_ ? source_trace_() : std::vector<SourceLocation>{};
    return *trace;
  };
  const uint64_t iteration = session_->CurrentIteration();
  // Update kernels whose attributes changed, with their graphs, and the groups' lines of
  // graphs/hyperparameters.jsonl.
  std::vector<std::pair<HostGraph*, const KernelInfo*>> changed;
  std::string lines;
  auto& by_param = update_kernels_[optimizer_class];
  step->params.reserve(params.size());
  step->indexes.reserve(params.size());
  step->captures.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    if (!p.defined() || !p.grad().defined()) continue;
    UpdateKernel& update = by_param[p.unsafeGetTensorImpl()];
    if (update.kernel == nullptr) {
      const Owner owner = OwnerOf(p);
      update.model = owner.model;
      update.kernel =
          &HostKernel(owner, "Default/optimizer-" + optimizer_class, optimizer_class, caller);
    }
    KernelInfo& kernel = *update.kernel;
    if (i < hyperparameters.size() && !hyperparameters[i].empty()) {
      const int64_t group = i < groups.size() ? groups[i] : 0;
      const bool moved = SetAttribute(kernel, "optimizer", std::to_string(optimizer));
      if (SetAttribute(kernel, "param_group", std::to_string(group)) || moved) {
        changed.emplace_back(update.model, &kernel);
      }
      std::string& written = hyperparameters_written_[{optimizer, group}];
      if (written != hyperparameters[i]) {
        lines += HyperparameterLine(iteration, optimizer, group, hyperparameters[i]);
        written = hyperparameters[i];
      }
    }
    step->params.push_back(p);
    step->indexes.push_back(i);
    step->captures.emplace_back(session_.get(), kernel, p, p.grad(),
                                i < states.size() ? states[i] : std::vector<at::Tensor>{});
  }
  // The session writes the graph files from its own copy of the kernels: it takes the new
  // attributes of the kernels that changed.
  for (const auto& [graph, kernel] : changed) {
    const std::vector<KernelInfo>& kernels = graph->graph().kernels;
    if (kernel->index < kernels.size() && kernels[kernel->index].full_name == kernel->full_name) {
      session_->UpdateAttributes(graph->graph().graph_id, kernel->index, kernel->attributes);
    }
  }
  if (!lines.empty()) session_->AppendHyperparameters(lines);
  return step;
}

void DumpHost::EndOpenIteration() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (session_) EndIteration();
}

void DumpHost::EndOptimizerStep(OptimizerStep& step,
                                const std::vector<std::vector<at::Tensor>>& states_after,
                                bool end_iteration) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  torch_internal::HostWork host_work;
  for (size_t j = 0; j < step.captures.size(); ++j) {
    const size_t i = step.indexes[j];
    step.captures[j].Finish(step.params[j],
                            i < states_after.size() ? states_after[i] : std::vector<at::Tensor>{});
  }
  ++optimizer_steps_;
  if (session_ && end_iteration) EndIteration();
}

std::shared_ptr<DumpHost::AllReduceStep> DumpHost::BeginAllReduce(
    const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto step = std::make_shared<AllReduceStep>();
  if (!session_ || graphs_.empty()) return step;
  EnsureIteration();
  if (!session_->StepDumps() && session_->config().op_debug_mode != 4) return step;
  torch_internal::HostWork host_work;
  for (size_t i = 0; i < params.size() && i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    const KernelInfo kernel =
        HostKernel(OwnerOf(params[i]), "Default/allreduce-DataParallel", "AllReduce");
    if (!session_->Wants(kernel)) continue;
    step->wanted.push_back(
        {kernel, grads[i].detach().clone(), torch_internal::OriginOf(grads[i]), grads[i], i});
  }
  return step;
}

void DumpHost::EndAllReduce(AllReduceStep& step, const std::vector<at::Tensor>& reduced) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  torch_internal::HostWork host_work;
  const bool logical = true;  // the session applies trans_flag
  for (AllReduceStep::Reduced& r : step.wanted) {
    if (r.index >= reduced.size() || !reduced[r.index].defined()) continue;
    const at::Tensor& out = reduced[r.index];
    // The collective wrote the gradient behind its version counter: count it as a write, so no
    // statistic of the local values is reused for the reduced ones.
    out.unsafeGetTensorImpl()->bump_version();
    std::vector<TensorView> inputs, outputs;
    TensorView in_view, out_view;
    if (torch_internal::MakeViewOfCopy(r.local, r.original, r.local_origin, logical, &in_view)) {
      inputs.push_back(std::move(in_view));
    }
    if (torch_internal::MakeView(out.detach(), logical, &out_view)) {
      outputs.push_back(std::move(out_view));
    }
    session_->OnKernelDone(r.kernel, inputs, outputs);
  }
  step.wanted.clear();
}

Status DumpHost::Close() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (capture_) capture_->SetActive(false);
  SendEagerMetas();
  return session_ ? session_->Close() : Status::Ok();
}

}  // namespace graphdump
