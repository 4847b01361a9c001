// EagerGraph (eager_graph.h): the graph of one eagerly called module, built as its operators run.
#include "eager/eager_graph.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "graphdump/selector.h"
#include "host/tensor_views.h"

namespace graphdump::torch_internal {

EagerGraph::EagerGraph(uint32_t graph_id, DumpSession* session,
                       const std::vector<EagerModule>& modules,
                       std::vector<std::pair<std::string, at::Tensor>> parameters,
                       std::vector<std::pair<std::string, at::Tensor>> buffers)
    : session_(session), parameters_(std::move(parameters)), buffers_(std::move(buffers)) {
  info_.graph_id = graph_id;
  info_.name = "forward";
  // named_modules() lists a parent before its children, so each parent's scope is known.
  for (const EagerModule& m : modules) {
    if (m.path.empty()) {
      scopes_[""] = "Default";
      continue;
    }
    const size_t dot = m.path.rfind('.');
    const std::string parent = dot == std::string::npos ? "" : m.path.substr(0, dot);
    const std::string attr = dot == std::string::npos ? m.path : m.path.substr(dot + 1);
    auto it = scopes_.find(parent);
    const std::string parent_scope = it == scopes_.end() ? "Default" : it->second;
    scopes_[m.path] = parent_scope + "/" + attr + "-" + m.class_name;
  }
  scopes_.emplace("", "Default");
  for (const auto& [name, t] : parameters_) tensor_names_.emplace(t.unsafeGetTensorImpl(), name);
  for (const auto& [name, t] : buffers_) tensor_names_.emplace(t.unsafeGetTensorImpl(), name);
}

Status EagerGraph::Register() {
  if (registered_ || session_ == nullptr) return Status::Ok();
  GRAPHDUMP_RETURN_IF_ERROR(session_->OnGraphCompiled(info_));
  registered_ = true;
  return Status::Ok();
}

std::string EagerGraph::ScopeOf(const std::string& module_path) const {
  auto it = scopes_.find(module_path);
  return it == scopes_.end() ? "Default" : it->second;
}

std::string EagerGraph::ScopeOfUnlisted(const std::string& parent_scope,
                                        const std::string& class_name) const {
  return parent_scope + "/" + class_name;
}

bool EagerGraph::UnderSetDump(const std::string& module_path) const {
  return UnderMarkedModule(set_dump_paths_, module_path);
}

KernelInfo EagerGraph::AppendKernel(KernelInfo kernel) {
  // A kernel the host adds (a backward node, an update, an all-reduce).
  return AppendNumbered(std::move(kernel), kHostNumbers + host_kernels_++);
}

const KernelInfo& EagerGraph::AppendNumbered(KernelInfo kernel, uint64_t number) {
  kernel.graph_id = info_.graph_id;
  kernel.index = static_cast<uint32_t>(info_.kernels.size());
  kernel.full_name += "-op" + std::to_string(number);
  kernel.marked_for_dump = UnderSetDump(kernel.module_path);
  if (registered_) kernel.index = session_->AddKernel(kernel.graph_id, kernel);
  writes_.emplace_back();
  keys_.push_back(kNoKey);
  return info_.kernels.emplace_back(std::move(kernel));
}

int64_t EagerGraph::Find(uint32_t scope_id, uint32_t op_id, uint32_t occurrence) const {
  const Key key{scope_id, op_id, occurrence};
  if (next_guess_ < keys_.size() && keys_[next_guess_] == key) {
    return static_cast<int64_t>(next_guess_++);
  }
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return -1;
  next_guess_ = it->second + 1;
  return static_cast<int64_t>(it->second);
}

const KernelInfo& EagerGraph::Add(uint32_t scope_id, uint32_t op_id, uint32_t occurrence,
                                  KernelInfo kernel) {
  // A kernel the program's code called.
  const uint32_t index = AppendNumbered(std::move(kernel), forward_kernels_++).index;
  by_key_.emplace(Key{scope_id, op_id, occurrence}, index);
  keys_[index] = Key{scope_id, op_id, occurrence};
  next_guess_ = index + 1;
  return info_.kernels[index];
}

void EagerGraph::SetOutputs(size_t index, std::vector<TensorMeta> outputs) {
  info_.kernels[index].outputs = std::move(outputs);
  metas_dirty_ = true;
}

void EagerGraph::MarkUninitializedInputs(size_t index, const std::vector<uint32_t>& slots) {
  AddSlots(slots, &info_.kernels[index].uninitialized_inputs);
}

void EagerGraph::MarkUninitializedOutputs(size_t index, const std::vector<uint32_t>& slots) {
  AddSlots(slots, &info_.kernels[index].uninitialized_outputs);
}

void EagerGraph::AddSlots(const std::vector<uint32_t>& slots, std::vector<uint32_t>* sorted) {
  std::vector<uint32_t>& known = *sorted;
  for (uint32_t slot : slots) {
    auto at = std::lower_bound(known.begin(), known.end(), slot);
    if (at != known.end() && *at == slot) continue;
    known.insert(at, slot);
    metas_dirty_ = true;
  }
}

Status EagerGraph::SetDump(const std::string& module_path) {
  if (!scopes_.count(module_path)) {
    return Status::InvalidArgument("set_dump: the module is not part of graph " +
                                   std::to_string(info_.graph_id) + "'s module tree");
  }
  set_dump_paths_.push_back(module_path);
  MarkKernelsUnder(set_dump_paths_, &info_.kernels);
  if (registered_) session_->UpdateKernels(info_.graph_id, info_.kernels);
  return Status::Ok();
}

void EagerGraph::BeginCall() {
  if (!registered_) return;
  session_->BeginStep(info_.graph_id);
  const int64_t iteration = static_cast<int64_t>(session_->CurrentIteration());
  if (!session_->StepDumps() || !session_->WantsParameters() ||
      parameters_iteration_ == iteration) {
    return;
  }
  parameters_iteration_ = iteration;
  const bool logical = true;  // the session applies trans_flag
  for (const auto* named : {&parameters_, &buffers_}) {
    for (const auto& [name, value] : *named) {
      TensorView view;
      if (MakeView(value.detach(), logical, &view)) {
        session_->OnParameter(info_.graph_id, name, view);
      }
    }
  }
}

void EagerGraph::EndCall() {
  if (!registered_) return;
  SendMetas();
  session_->EndStep(info_.graph_id);
}

void EagerGraph::SendMetas() {
  if (!registered_ || !metas_dirty_) return;
  session_->UpdateKernels(info_.graph_id, info_.kernels);
  metas_dirty_ = false;
}

std::string EagerGraph::TensorName(const at::TensorImpl* impl) const {
  auto it = tensor_names_.find(impl);
  return it == tensor_names_.end() ? "" : it->second;
}

}  // namespace graphdump::torch_internal
