#include "graphdump/torch/torch_model.h"

#include <torch/csrc/jit/serialization/import.h>

#include <filesystem>

#include "graph_compiler.h"
#include "graph_executor.h"
#include "tensor_views.h"

namespace graphdump {

using torch_internal::CompiledGraph;
using torch_internal::GraphExecutor;

TorchModel::TorchModel(torch::jit::Module module, DumpSession* session,
                       std::unique_ptr<CompiledGraph> compiled)
    : module_(std::move(module)),
      session_(session),
      compiled_(std::move(compiled)),
      metas_known_(compiled_->info.kernels.size(), 0) {}

TorchModel::~TorchModel() = default;

StatusOr<std::unique_ptr<TorchModel>> TorchModel::Load(const std::string& path,
                                                       DumpSession* session,
                                                       TorchModelOptions options) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Status::NotFound("model file " + path + " does not exist or is not a file");
  }
  torch::jit::Module module;
  try {
    module = torch::jit::load(path);
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    return Status::InvalidArgument(
        "model file " + path +
        " is not a TorchScript archive (torch.jit.save): " + what.substr(0, what.find('\n')));
  } catch (const std::exception& e) {
    return Status::InvalidArgument("model file " + path +
                                   " is not a TorchScript archive (torch.jit.save): " + e.what());
  }
  return FromModule(std::move(module), session, std::move(options));
}

StatusOr<std::unique_ptr<TorchModel>> TorchModel::FromModule(torch::jit::Module module,
                                                             DumpSession* session,
                                                             TorchModelOptions options) {
  GRAPHDUMP_ASSIGN_OR_RETURN(
      auto compiled, torch_internal::CompileGraph(module, options.method, options.graph_id));
  return std::unique_ptr<TorchModel>(
      new TorchModel(std::move(module), session, std::move(compiled)));
}

const GraphInfo& TorchModel::graph() const { return compiled_->info; }

std::vector<std::string> TorchModel::ModulePaths() const {
  std::vector<std::string> paths;
  for (const auto& [path, scope] : compiled_->module_scopes) paths.push_back(path);
  return paths;
}

std::string TorchModel::ScopeOf(const std::string& module_path) const {
  auto it = compiled_->module_scopes.find(module_path);
  if (it == compiled_->module_scopes.end() || it->second.empty()) return "Default";
  return "Default/" + it->second;
}

Status TorchModel::SetDump(const std::string& module_path) {
  if (!compiled_->module_scopes.count(module_path)) {
    std::string known;
    for (const auto& [path, scope] : compiled_->module_scopes) {
      if (path.empty()) continue;
      if (known.size() > 600) {
        known += ", ...";
        break;
      }
      known += (known.empty() ? "" : ", ") + path;
    }
    return Status::InvalidArgument("set_dump: the model has no module '" + module_path +
                                   "'; module paths are: " + known);
  }
  set_dump_paths_.push_back(module_path);
  for (KernelInfo& k : compiled_->info.kernels) {
    if (UnderSetDump(k.module_path)) k.marked_for_dump = true;
  }
  if (registered_) session_->UpdateKernels(compiled_->info.graph_id, compiled_->info.kernels);
  return Status::Ok();
}

bool TorchModel::UnderSetDump(const std::string& module_path) const {
  for (const std::string& path : set_dump_paths_) {
    if (path.empty() || module_path == path || module_path.rfind(path + ".", 0) == 0) return true;
  }
  return false;
}

void TorchModel::SetKernelObserver(KernelObserver observer) { observer_ = std::move(observer); }

KernelInfo TorchModel::AddHostKernel(const std::string& scope, const std::string& op_type,
                                     const std::string& module_path,
                                     std::vector<SourceLocation> source_trace) {
  KernelInfo k;
  k.graph_id = compiled_->info.graph_id;
  k.index = static_cast<uint32_t>(compiled_->info.kernels.size());
  k.op_type = op_type;
  k.full_name = scope + "/" + op_type + "-op" + std::to_string(k.index);
  k.module_path = module_path;
  k.source_trace = std::move(source_trace);
  k.marked_for_dump = UnderSetDump(module_path);
  if (registered_ && session_) k = session_->AddKernel(k.graph_id, k);
  compiled_->info.kernels.push_back(k);
  return k;
}

// Registers the graph as compiled. Kernel dtypes and shapes are not known yet: the executor
// records them as the kernels first run, and EndStep sends them (UpdateKernels), so the first
// step costs what the others do and the module is neither copied nor run twice.
Status TorchModel::RegisterGraph() {
  GRAPHDUMP_RETURN_IF_ERROR(session_->OnGraphCompiled(compiled_->info));
  const bool logical = true;  // the session applies trans_flag
  for (size_t i = 0; i < compiled_->constants.size(); ++i) {
    const c10::IValue& c = compiled_->constants[i];
    at::Tensor t = c.isTensor() ? c.toTensor()
                   : c.isInt()  ? at::scalar_tensor(c.toInt(), at::kLong)
                   : c.isBool() ? at::scalar_tensor(c.toBool(), at::kBool)
                                : at::scalar_tensor(c.toDouble(), at::kDouble);
    TensorView view;
    if (torch_internal::MakeView(t, logical, &view)) {
      session_->OnConstant(compiled_->info.graph_id, static_cast<uint32_t>(i), view);
    }
  }
  registered_ = true;
  return Status::Ok();
}

void TorchModel::DumpParameters() {
  const bool logical = true;  // the session applies trans_flag
  auto dump = [&](const std::string& name, const at::Tensor& value) {
    TensorView view;
    if (torch_internal::MakeView(value.detach(), logical, &view)) {
      session_->OnParameter(compiled_->info.graph_id, name, view);
    }
  };
  for (const auto& p : module_.named_parameters(/*recurse=*/true)) dump(p.name, p.value);
  for (const auto& b : module_.named_buffers(/*recurse=*/true)) dump(b.name, b.value);
}

Status TorchModel::BeginStep(const std::vector<c10::IValue>& inputs) {
  in_step_ = true;
  if (!session_) return Status::Ok();
  if (!registered_) GRAPHDUMP_RETURN_IF_ERROR(RegisterGraph());
  session_->BeginStep(compiled_->info.graph_id);
  if (session_->StepDumps() && session_->WantsParameters() &&
      parameters_iteration_ != session_->CurrentIteration()) {
    DumpParameters();
    parameters_iteration_ = session_->CurrentIteration();
  }
  return Status::Ok();
}

StatusOr<c10::IValue> TorchModel::RunMethod(std::vector<c10::IValue> inputs) {
  GraphExecutor executor(compiled_.get(), registered_ ? session_ : nullptr);
  executor.set_observer(observer_);
  executor.set_meta_recorder(&compiled_->info.kernels, &metas_known_, &metas_learned_);
  inputs.insert(inputs.begin(), module_._ivalue());
  return executor.Run(std::move(inputs));
}

void TorchModel::EndStep() {
  if (session_ && in_step_) {
    if (metas_learned_) {
      for (size_t i = 0; i < metas_known_.size(); ++i) {
        compiled_->info.kernels[i].not_run = !metas_known_[i];
      }
      session_->UpdateKernels(compiled_->info.graph_id, compiled_->info.kernels);
      metas_learned_ = false;
    }
    session_->EndStep(compiled_->info.graph_id);
  }
  in_step_ = false;
}

StatusOr<c10::IValue> TorchModel::Forward(std::vector<c10::IValue> inputs) {
  GRAPHDUMP_RETURN_IF_ERROR(BeginStep(inputs));
  auto result = RunMethod(std::move(inputs));
  EndStep();
  return result;
}

}  // namespace graphdump
