// DumpHost's precision runs of a program (host.h; docs/precision.md, "Precision runs of a
// script"): eager graphs through EagerPrecision at the dispatcher, TorchScript modules through
// the executor's own precision (TorchModel::SetPrecision), one list of --keep-fp32 entries.
#include <nlohmann/json.hpp>

#include "eager/eager_capture.h"
#include "eager/eager_graph.h"
#include "eager/eager_precision.h"
#include "graphdump/analysis/source_json.h"
#include "graphdump/dtype.h"
#include "graphdump/torch/host.h"

namespace graphdump {

Status DumpHost::SetPrecision(const PrecisionOptions& options) {
  if (!graphs_.empty()) {
    return Status::InvalidArgument("a precision run starts before the first module call");
  }
  EnsureCapture();
  GRAPHDUMP_ASSIGN_OR_RETURN(
      precision_,
      torch_internal::EagerPrecision::Create(capture_.get(), options.dtype, options.keep_fp32));
  precision_options_ = options;
  capture_->SetNaming(true);
  precision_->Enable();
  return Status::Ok();
}

Status DumpHost::SetModelPrecision(TorchModel* model) {
  PrecisionOptions options;
  options.dtype = precision_options_.dtype;
  for (const std::string& entry : precision_options_.keep_fp32) {
    // The entries this model has kernels or parameters for; the others are the eager graphs'.
    if (model->SelectKeep({entry}, "--keep-fp32").ok()) {
      options.keep_fp32.push_back(entry);
      precision_->NoteMatched(entry);
    }
  }
  std::vector<std::string> states;
  for (const std::string& name : model->StateNames()) states.push_back(name);
  precision_->NoteStates(states);
  return model->SetPrecision(options);
}

std::vector<std::string> DumpHost::PrecisionUnmatched() const {
  return precision_ ? precision_->Unmatched() : std::vector<std::string>();
}

std::string DumpHost::PrecisionModuleInput(const at::Tensor& t) const {
  if (!precision_ || !t.defined() || !t.is_floating_point() ||
      t.scalar_type() == precision_->dtype() || precision_->Keeps(t)) {
    return "";
  }
  return precision_->dtype() == at::kHalf ? "float16" : "bfloat16";
}

std::string DumpHost::PrecisionReport() const {
  if (!precision_) return "";
  using nlohmann::json;
  json kernels = json::array();
  auto add = [&](const KernelInfo& k) {
    kernels.push_back({{"graph_id", k.graph_id},
                       {"full_name", k.full_name},
                       {"op_type", k.op_type},
                       {"module_path", k.module_path},
                       {"source_trace", analysis::SourceTraceJson<json>(k.source_trace)}});
  };
  for (const auto& seen : precision_->seen()) add(seen.graph->kernel(seen.index));
  for (const auto& model : models_) {
    // The executor's kernels that ran with a floating input or output, in graph order.
    const auto& list = model->graph().kernels;
    for (size_t i = 0; i < list.size(); ++i) {
      if (!model->KernelRan(i)) continue;
      bool floating = false;
      for (const auto* metas : {&list[i].inputs, &list[i].outputs}) {
        for (const TensorMeta& m : *metas) floating |= IsFloatingPoint(m.dtype);
      }
      if (floating) add(list[i]);
    }
  }
  const char* name = precision_->dtype() == at::kHalf ? "fp16" : "bf16";
  return json{{"precision", name}, {"kernels", kernels}, {"states", precision_->states()}}.dump();
}

}  // namespace graphdump
