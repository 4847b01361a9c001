#include "graphdump/torch/torch_model.h"

#include <re2/re2.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "torchscript/graph_compiler.h"
#include "torchscript/graph_executor.h"
#include "graphdump/internal/kernel_entry.h"
#include "graphdump/layout.h"
#include "graphdump/selector.h"
#include "host/tensor_views.h"

namespace graphdump {

using torch_internal::CompiledGraph;
using torch_internal::GraphExecutor;

TorchModel::TorchModel(torch::jit::Module module, DumpSession* session,
                       std::unique_ptr<CompiledGraph> compiled)
    : module_(std::move(module)),
      session_(session),
      compiled_(std::move(compiled)),
      metas_known_(compiled_->info.kernels.size(), 0) {
  for (const auto& p : module_.named_parameters(/*recurse=*/true)) {
    if (p.value.defined() && p.value.is_floating_point()) state_names_.push_back(p.name);
  }
  for (const auto& b : module_.named_buffers(/*recurse=*/true)) {
    if (b.value.defined() && b.value.is_floating_point()) state_names_.push_back(b.name);
  }
}

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
  MarkKernelsUnder(set_dump_paths_, &compiled_->info.kernels);
  if (registered_) session_->UpdateKernels(compiled_->info.graph_id, compiled_->info.kernels);
  return Status::Ok();
}

bool TorchModel::UnderSetDump(const std::string& module_path) const {
  return UnderMarkedModule(set_dump_paths_, module_path);
}

void TorchModel::SetKernelObserver(KernelObserver observer) { observer_ = std::move(observer); }

KernelInfo TorchModel::AppendKernel(KernelInfo k) {
  k.graph_id = compiled_->info.graph_id;
  k.index = static_cast<uint32_t>(compiled_->info.kernels.size());
  k.full_name += "-op" + std::to_string(k.index);
  k.marked_for_dump = UnderSetDump(k.module_path);
  if (registered_ && session_) k.index = session_->AddKernel(k.graph_id, k);
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

StatusOr<std::vector<size_t>> TorchModel::SelectKernels(const std::vector<std::string>& entries,
                                                        const std::string& option) const {
  const size_t compiled = metas_known_.size();  // host kernels come after these
  std::vector<uint8_t> selected(compiled, 0);
  for (const std::string& raw : entries) {
    const std::string normalized = internal::NormalizeKernelEntry(raw);
    if (normalized.empty()) {
      return Status::InvalidArgument(option + " '" + raw +
                                     "': an empty entry; give a full name, an op type or "
                                     "name-regex(REGEX) (docs/configuration.md)");
    }
    auto entry = internal::ClassifyKernelEntry(normalized);
    if (!entry.ok()) return Status::InvalidArgument(option + " " + entry.status().message());
    std::unique_ptr<RE2> regex;
    if (entry->kind == KernelPattern::Kind::kRegex) {
      RE2::Options re_options;
      re_options.set_log_errors(false);
      regex = std::make_unique<RE2>(entry->pattern, re_options);
    }
    bool any = false;
    for (size_t i = 0; i < compiled; ++i) {
      const std::string& name = compiled_->info.kernels[i].full_name;
      const bool match = entry->kind == KernelPattern::Kind::kRegex ? RE2::FullMatch(name, *regex)
                         : entry->kind == KernelPattern::Kind::kFullName
                             ? name == entry->pattern
                             : internal::OpTypeEntryMatches(entry->pattern, name);
      if (match) selected[i] = 1, any = true;
    }
    if (!any) {
      return Status::InvalidArgument(
          option + " '" + raw + "' selects no kernel of the model (" +
          (entry->kind == KernelPattern::Kind::kRegex
               ? "a name-regex, matched against whole full names"
           : entry->kind == KernelPattern::Kind::kFullName ? "a full name"
                                                           : "an op type") +
          "; `graphdump run MODEL --list-kernels` lists the kernels' full names)");
    }
  }
  std::vector<size_t> indices;
  for (size_t i = 0; i < compiled; ++i) {
    if (selected[i]) indices.push_back(i);
  }
  return indices;
}

StatusOr<KeepSet> TorchModel::SelectKeep(const std::vector<std::string>& entries,
                                         const std::string& option) const {
  KeepSet keep;
  std::vector<std::string> kernel_entries;
  for (const std::string& entry : entries) {
    // The dotted name, or the name the dump gives its Parameter file ("pos_freqs").
    auto it = std::find(state_names_.begin(), state_names_.end(), entry);
    if (it == state_names_.end()) {
      it = std::find_if(state_names_.begin(), state_names_.end(),
                        [&](const std::string& name) { return SanitizeName(name) == entry; });
    }
    if (it == state_names_.end()) {
      kernel_entries.push_back(entry);
    } else {
      keep.states.push_back(static_cast<size_t>(it - state_names_.begin()));
    }
  }
  auto kernels = SelectKernels(kernel_entries, option);
  if (!kernels.ok()) {
    // A kernel entry that selects nothing may have meant a parameter.
    if (kernels.status().code() != StatusCode::kInvalidArgument || state_names_.empty()) {
      return kernels.status();
    }
    std::string names;
    for (size_t i = 0; i < state_names_.size() && i < 8; ++i) {
      names += (i ? ", " : "") + state_names_[i];
    }
    if (state_names_.size() > 8) names += ", ...";
    return Status::InvalidArgument(kernels.status().message() +
                                   "; a parameter or buffer is kept by its dotted name (" + names +
                                   ")");
  }
  keep.kernels = std::move(*kernels);
  std::sort(keep.states.begin(), keep.states.end());
  keep.states.erase(std::unique(keep.states.begin(), keep.states.end()), keep.states.end());
  return keep;
}

Status TorchModel::SetPrecision(const PrecisionOptions& options) {
  if (!at::isFloatingType(options.dtype)) {
    return Status::InvalidArgument(std::string("precision ") + c10::toString(options.dtype) +
                                   " is not a floating dtype");
  }
  GRAPHDUMP_ASSIGN_OR_RETURN(KeepSet keep, SelectKeep(options.keep_fp32, "--keep-fp32"));
  state_values_.clear();
  try {
    torch::NoGradGuard no_grad;
    // The states by name, as StateNames lists them, each with its values before the cast.
    std::map<std::string, at::Tensor> by_name;
    for (const auto& p : module_.named_parameters(/*recurse=*/true)) by_name[p.name] = p.value;
    for (const auto& b : module_.named_buffers(/*recurse=*/true)) by_name[b.name] = b.value;
    for (const std::string& name : state_names_) {
      const at::Tensor& t = by_name[name];
      if (!t.defined() || !t.is_floating_point()) continue;
      if (options.dtype != at::kFloat) state_values_.emplace_back(t, t.detach().clone());
      if (t.scalar_type() != options.dtype) t.set_data(t.to(options.dtype));
    }
  } catch (const std::exception& e) {
    return Status::Internal(std::string("casting the model's parameters to ") +
                            c10::toString(options.dtype) + " failed: " + e.what());
  }
  precision_ = std::make_unique<torch_internal::PrecisionPlan>();
  precision_->dtype = options.dtype;
  SetKeepFp32(keep);
  return Status::Ok();
}

void TorchModel::SetKeepFp32(const KeepSet& keep) {
  if (!precision_) return;
  precision_->keep_fp32.assign(metas_known_.size(), 0);
  for (size_t i : keep.kernels) {
    if (i < precision_->keep_fp32.size()) precision_->keep_fp32[i] = 1;
  }
  precision_->kept_states.clear();
  if (state_values_.empty()) return;  // a float32 run keeps nothing apart
  torch::NoGradGuard no_grad;
  std::vector<uint8_t> kept(state_values_.size(), 0);
  for (size_t i : keep.states) {
    if (i < kept.size()) kept[i] = 1;
  }
  for (size_t i = 0; i < state_values_.size(); ++i) {
    const auto& [tensor, value] = state_values_[i];
    const at::ScalarType want = kept[i] ? at::kFloat : precision_->dtype;
    if (tensor.scalar_type() != want) tensor.set_data(value.to(want));
    if (kept[i]) precision_->kept_states.insert(tensor.unsafeGetTensorImpl());
  }
}

StatusOr<c10::IValue> TorchModel::RunMethod(std::vector<c10::IValue> inputs) {
  if (precision_) {
    // Floating inputs take the run's dtype (float32 .npy files feed a bfloat16 model).
    for (c10::IValue& v : inputs) {
      if (v.isTensor() && v.toTensor().is_floating_point() &&
          v.toTensor().scalar_type() != precision_->dtype) {
        v = v.toTensor().to(precision_->dtype);
      }
    }
  }
  GraphExecutor executor(compiled_.get(), registered_ ? session_ : nullptr);
  executor.set_precision(precision_.get());
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
