#include "torchscript/graph_executor.h"

#include <algorithm>

#include "host/tensor_views.h"

namespace graphdump::torch_internal {
namespace {

std::string ErrorText(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    return c10_error->what_without_backtrace();
  }
  return e.what();
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// `value` (a tensor, or a list of tensors) with each tensor for which `cast` returns a defined
// tensor replaced by it; `changed` tells whether anything was replaced.
template <typename Cast>
c10::IValue MapTensors(const c10::IValue& value, Cast&& cast, bool* changed) {
  if (value.isTensor()) {
    at::Tensor c = cast(value.toTensor());
    if (!c.defined()) return value;
    *changed = true;
    return c10::IValue(std::move(c));
  }
  if (value.isTensorList()) {
    c10::List<at::Tensor> list;
    bool any = false;
    for (const at::Tensor& t : value.toTensorVector()) {
      at::Tensor c = t.defined() ? cast(t) : at::Tensor();
      any |= c.defined();
      list.push_back(c.defined() ? c : t);
    }
    if (!any) return value;
    *changed = true;
    return c10::IValue(std::move(list));
  }
  return value;
}

}  // namespace

GraphExecutor::GraphExecutor(const CompiledGraph* graph, DumpSession* session)
    : graph_(graph), session_(session) {}

StatusOr<c10::IValue> GraphExecutor::Run(std::vector<c10::IValue> inputs) {
  const BlockPlan& body = graph_->body;
  if (inputs.size() != body.params.size()) {
    return Status::InvalidArgument("the model's " + graph_->info.name + " takes " +
                                   std::to_string(body.params.size() - 1) + " input(s), got " +
                                   std::to_string(inputs.size() - 1));
  }
  Frame frame(graph_->num_slots);
  for (size_t i = 0; i < inputs.size(); ++i) frame[body.params[i]] = std::move(inputs[i]);
  kept_outputs_.clear();
  GRAPHDUMP_RETURN_IF_ERROR(RunBlock(body, frame));
  std::vector<c10::IValue> outs;
  for (uint32_t slot : body.returns) outs.push_back(frame[slot]);
  if (precision_) {
    // The model's results are in the run's dtype, whatever kernel made them.
    for (c10::IValue& v : outs) {
      bool changed = false;
      v = MapTensors(
          v,
          [&](const at::Tensor& t) {
            return IsKeptOutput(t) ? t.to(precision_->dtype) : at::Tensor();
          },
          &changed);
    }
    kept_outputs_.clear();
  }
  if (outs.size() == 1) return outs[0];
  return c10::IValue(c10::ivalue::Tuple::create(std::move(outs)));
}

bool GraphExecutor::IsKeptOutput(const at::Tensor& t) const {
  if (!t.defined() || t.scalar_type() != at::kFloat) return false;
  if (precision_ && precision_->kept_states.count(t.unsafeGetTensorImpl())) return true;
  auto it = kept_outputs_.find(t.unsafeGetTensorImpl());
  return it != kept_outputs_.end() && it->second.lock().get() == t.unsafeGetTensorImpl();
}

void GraphExecutor::CastInputs(const StepPlan& step, torch::jit::Stack& stack,
                               std::vector<std::pair<c10::IValue, c10::IValue>>* written_casts) {
  const bool keep = static_cast<size_t>(step.kernel) < precision_->keep_fp32.size() &&
                    precision_->keep_fp32[step.kernel];
  const at::ScalarType dtype = precision_->dtype;
  auto cast = [&](const at::Tensor& t) {
    if (keep) return t.scalar_type() == dtype ? t.to(at::kFloat) : at::Tensor();
    return IsKeptOutput(t) ? t.to(dtype) : at::Tensor();
  };
  for (size_t i = 0; i < stack.size(); ++i) {
    bool changed = false;
    c10::IValue cast_value = MapTensors(stack[i], cast, &changed);
    if (!changed) continue;
    if (std::find(step.written_inputs.begin(), step.written_inputs.end(), i) !=
        step.written_inputs.end()) {
      written_casts->emplace_back(stack[i], cast_value);
    }
    stack[i] = std::move(cast_value);
  }
}

void GraphExecutor::AfterCastKernel(
    const StepPlan& step, torch::jit::Stack& stack,
    const std::vector<std::pair<c10::IValue, c10::IValue>>& written_casts) {
  // `stack` holds the outputs now. An in-place kernel wrote the cast copy of its input: the copy
  // is written back into the tensor it was cast from, which takes its place among the outputs.
  for (const auto& [original, cast] : written_casts) {
    if (!original.isTensor() || !cast.isTensor()) continue;
    const at::Tensor& target = original.toTensor();
    const at::Tensor& written = cast.toTensor();
    target.copy_(written);
    for (c10::IValue& out : stack) {
      if (out.isTensor() && out.toTensor().unsafeGetTensorImpl() == written.unsafeGetTensorImpl()) {
        out = original;
      }
    }
  }
  const bool keep = static_cast<size_t>(step.kernel) < precision_->keep_fp32.size() &&
                    precision_->keep_fp32[step.kernel];
  if (!keep) return;
  for (const c10::IValue& out : stack) {
    bool unused = false;
    MapTensors(
        out,
        [&](const at::Tensor& t) {
          if (t.scalar_type() == at::kFloat) {
            kept_outputs_.emplace(t.unsafeGetTensorImpl(),
                                  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>(
                                      t.getIntrusivePtr()));
          }
          return at::Tensor();
        },
        &unused);
  }
}

Status GraphExecutor::RunBlock(const BlockPlan& block, Frame& frame) {
  for (const StepPlan& step : block.steps) {
    GRAPHDUMP_RETURN_IF_ERROR(RunStep(step, frame));
    for (uint32_t slot : step.frees) frame[slot] = c10::IValue();
  }
  return Status::Ok();
}

Status GraphExecutor::RunStep(const StepPlan& step, Frame& frame) {
  if (step.kernel >= 0) return RunKernel(step, frame);
  try {
    return RunSpecial(step, frame);
  } catch (const std::exception& e) {
    return Status::Internal("graph node " + std::string(step.node->kind().toQualString()) + " at " +
                            DescribeNodeSource(step.node) + " failed: " + FirstLine(ErrorText(e)));
  }
}

Status GraphExecutor::RunSpecial(const StepPlan& step, Frame& frame) {
  auto in = [&](size_t i) -> c10::IValue& { return frame[step.inputs[i]]; };
  auto out = [&](size_t i) -> c10::IValue& { return frame[step.outputs[i]]; };
  switch (step.kind) {
    case StepKind::kConstant:
      out(0) = step.constant;
      return Status::Ok();
    case StepKind::kGetAttr:
      out(0) = in(0).toObjectRef().getAttr(step.attr_name);
      return Status::Ok();
    case StepKind::kSetAttr:
      in(0).toObjectRef().setAttr(step.attr_name, in(1));
      return Status::Ok();
    case StepKind::kIf: {
      const BlockPlan& branch = step.blocks[in(0).toBool() ? 0 : 1];
      GRAPHDUMP_RETURN_IF_ERROR(RunBlock(branch, frame));
      for (size_t i = 0; i < step.outputs.size(); ++i) out(i) = frame[branch.returns[i]];
      for (uint32_t slot : branch.return_frees) frame[slot] = c10::IValue();
      return Status::Ok();
    }
    case StepKind::kLoop:
      return RunLoop(step, frame);
    case StepKind::kListConstruct: {
      c10::impl::GenericList list(step.type->expectRef<c10::ListType>().getElementType());
      list.reserve(step.inputs.size());
      for (size_t i = 0; i < step.inputs.size(); ++i) list.push_back(in(i));
      out(0) = c10::IValue(std::move(list));
      return Status::Ok();
    }
    case StepKind::kListUnpack: {
      auto list = in(0).toListRef();
      if (list.size() != step.outputs.size()) {
        return Status::InvalidArgument("expected a list of " + std::to_string(step.outputs.size()) +
                                       " elements, got " + std::to_string(list.size()));
      }
      for (size_t i = 0; i < list.size(); ++i) out(i) = list[i];
      return Status::Ok();
    }
    case StepKind::kTupleConstruct: {
      std::vector<c10::IValue> elems;
      elems.reserve(step.inputs.size());
      for (size_t i = 0; i < step.inputs.size(); ++i) elems.push_back(in(i));
      auto tuple_type = step.type->cast<c10::TupleType>();
      out(0) = tuple_type && tuple_type->name()
                   ? c10::ivalue::Tuple::createNamed(std::move(elems), tuple_type)
                   : c10::ivalue::Tuple::create(std::move(elems));
      return Status::Ok();
    }
    case StepKind::kTupleUnpack: {
      const auto& elems = in(0).toTupleRef().elements();
      for (size_t i = 0; i < step.outputs.size(); ++i) out(i) = elems[i];
      return Status::Ok();
    }
    case StepKind::kTupleIndex: {
      const auto& elems = in(0).toTupleRef().elements();
      int64_t index = in(1).toInt();
      if (index < 0) index += static_cast<int64_t>(elems.size());
      if (index < 0 || index >= static_cast<int64_t>(elems.size())) {
        return Status::InvalidArgument("tuple index " + std::to_string(in(1).toInt()) +
                                       " out of range");
      }
      out(0) = elems[index];
      return Status::Ok();
    }
    case StepKind::kTupleSlice: {
      const auto& elems = in(0).toTupleRef().elements();
      std::vector<c10::IValue> part(elems.begin() + step.slice_begin,
                                    elems.begin() + step.slice_end);
      out(0) = c10::ivalue::Tuple::create(std::move(part));
      return Status::Ok();
    }
    case StepKind::kDictConstruct: {
      const auto& dict_type = step.type->expectRef<c10::DictType>();
      c10::impl::GenericDict dict(dict_type.getKeyType(), dict_type.getValueType());
      for (size_t i = 0; i + 1 < step.inputs.size(); i += 2)
        dict.insert_or_assign(in(i), in(i + 1));
      out(0) = c10::IValue(std::move(dict));
      return Status::Ok();
    }
    case StepKind::kUninitialized:
      out(0) = c10::IValue();
      return Status::Ok();
    case StepKind::kPassThrough:
      for (size_t i = 0; i < step.outputs.size(); ++i) out(i) = in(i);
      return Status::Ok();
    case StepKind::kOperation: {
      torch::jit::Stack stack;
      stack.reserve(step.inputs.size());
      for (uint32_t slot : step.inputs) stack.push_back(frame[slot]);
      (*step.op)(stack);
      for (size_t i = 0; i < step.outputs.size(); ++i) out(i) = std::move(stack[i]);
      return Status::Ok();
    }
  }
  return Status::Internal("unknown step kind");
}

Status GraphExecutor::RunLoop(const StepPlan& step, Frame& frame) {
  const BlockPlan& body = step.blocks[0];
  const int64_t max_trips = frame[step.inputs[0]].toInt();
  bool cond = frame[step.inputs[1]].toBool();
  const size_t carried = step.inputs.size() - 2;
  std::vector<c10::IValue> values(carried);
  for (size_t i = 0; i < carried; ++i) values[i] = frame[step.inputs[i + 2]];
  for (int64_t trip = 0; cond && trip < max_trips; ++trip) {
    frame[body.params[0]] = c10::IValue(trip);
    for (size_t i = 0; i < carried; ++i) frame[body.params[i + 1]] = std::move(values[i]);
    GRAPHDUMP_RETURN_IF_ERROR(RunBlock(body, frame));
    cond = frame[body.returns[0]].toBool();
    for (size_t i = 0; i < carried; ++i) values[i] = frame[body.returns[i + 1]];
    for (uint32_t slot : body.return_frees) frame[slot] = c10::IValue();
  }
  for (size_t i = 0; i < carried; ++i) frame[step.outputs[i]] = std::move(values[i]);
  return Status::Ok();
}

Status GraphExecutor::RunKernel(const StepPlan& step, Frame& frame) {
  const KernelInfo& kernel = graph_->info.kernels[step.kernel];
  const bool wants = session_ && session_->Wants(kernel);
  torch::jit::Stack stack;
  stack.reserve(step.inputs.size());
  for (uint32_t slot : step.inputs) stack.push_back(frame[slot]);
  std::vector<std::pair<c10::IValue, c10::IValue>> written_casts;
  if (precision_) {
    try {
      CastInputs(step, stack, &written_casts);
    } catch (const std::exception& e) {
      return KernelFailed(step, frame, ErrorText(e));
    }
  }
  std::vector<TensorView> input_views;
  Slots input_slots;
  // An in-place kernel's input is dumped as it was before the kernel changed it.
  if (wants) {
    AppendInputViews(*session_, kernel, stack, step.written_inputs, logical_layout_, &input_views,
                     &input_slots);
  }
  // Inputs that hold memory nothing wrote (an `empty` buffer, a view of one) are marked.
  if (wants && metas_ && !unwritten_.empty()) {
    MarkUninitialized(unwritten_.Slots(stack), &(*metas_)[step.kernel].uninitialized_inputs);
  }
  if (session_) {
    // Queued writes that still read what this kernel overwrites finish first.
    for (size_t i : step.written_inputs) BeforeWrite(*session_, stack[i]);
  }
  try {
    (*step.op)(stack);
    if (precision_) AfterCastKernel(step, stack, written_casts);
  } catch (const std::exception& e) {
    return KernelFailed(step, frame, ErrorText(e));
  }
  if (metas_ && !(*metas_known_)[step.kernel]) RecordMetas(step, frame, stack);
  if (step.allocates) {
    for (size_t i = 0; i < step.outputs.size(); ++i) unwritten_.Note(stack[i]);
  }
  for (size_t i = 0; i < step.outputs.size(); ++i) frame[step.outputs[i]] = std::move(stack[i]);
  if (observer_ || wants) {
    std::vector<c10::IValue> outputs;
    for (uint32_t slot : step.outputs) outputs.push_back(frame[slot]);
    if (observer_) observer_(kernel, outputs);
    if (wants && metas_ && !unwritten_.empty()) {
      MarkUninitialized(unwritten_.Slots(outputs), &(*metas_)[step.kernel].uninitialized_outputs);
    }
    if (wants) {
      std::vector<TensorView> output_views;
      Slots output_slots;
      for (const auto& v : outputs) AppendViews(v, logical_layout_, &output_views, &output_slots);
      ReportSkipped(*session_, kernel, /*input=*/true, input_slots);
      ReportSkipped(*session_, kernel, /*input=*/false, output_slots);
      session_->OnKernelDone(kernel, input_views, output_views);
    }
  }
  // The operator wrote these behind their version counters (bumping them would break autograd,
  // which saved them): statistics of their old bytes must not be reused.
  if (session_) {
    for (size_t i : step.unannotated_writes) ForgetStatistics(*session_, frame[step.inputs[i]]);
  }
  return Status::Ok();
}

Status GraphExecutor::KernelFailed(const StepPlan& step, Frame& frame, const std::string& what) {
  const KernelInfo& kernel = graph_->info.kernels[step.kernel];
  const std::string message = "kernel " + kernel.full_name + " (" +
                              step.node->kind().toQualString() + ") failed at " +
                              DescribeSource(kernel) + ": " + FirstLine(what);
  if (session_) {
    std::vector<TensorView> inputs;
    Slots slots;
    for (uint32_t slot : step.inputs) AppendViews(frame[slot], logical_layout_, &inputs, &slots);
    session_->OnKernelFailed(kernel, inputs, message);
  }
  return Status::Internal(message);
}

void GraphExecutor::MarkUninitialized(const std::vector<uint32_t>& slots,
                                      std::vector<uint32_t>* sorted) {
  for (uint32_t slot : slots) {
    auto at = std::lower_bound(sorted->begin(), sorted->end(), slot);
    if (at != sorted->end() && *at == slot) continue;
    sorted->insert(at, slot);
    *metas_learned_ = true;
  }
}

void GraphExecutor::RecordMetas(const StepPlan& step, const Frame& frame,
                                const torch::jit::Stack& outputs) {
  KernelInfo& k = (*metas_)[step.kernel];
  (*metas_known_)[step.kernel] = 1;
  *metas_learned_ = true;
  k.inputs.clear();
  k.outputs.clear();
  for (uint32_t slot : step.inputs) AppendMetas(frame[slot], &k.inputs);
  for (size_t i = 0; i < step.outputs.size(); ++i) AppendMetas(outputs[i], &k.outputs);
}

}  // namespace graphdump::torch_internal
