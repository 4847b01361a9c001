#include "graphdump/torch/bisect.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

namespace graphdump {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool IsFloating(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat32 ||
         dtype == DType::kFloat64;
}

// Every tensor in `value` (a tensor, or tuples, lists and dict values holding them), in order,
// copied to float64: later kernels may write the originals in place.
void CollectTensors(const c10::IValue& value, std::vector<at::Tensor>* out) {
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    if (t.defined()) out->push_back(t.detach().to(at::kCPU).to(at::kDouble, false, /*copy=*/true));
  } else if (value.isTuple()) {
    for (const c10::IValue& e : value.toTupleRef().elements()) CollectTensors(e, out);
  } else if (value.isList()) {
    for (const c10::IValue& e : value.toListRef()) CollectTensors(e, out);
  } else if (value.isGenericDict()) {
    for (const auto& entry : value.toGenericDict()) CollectTensors(entry.value(), out);
  }
}


// Floating parameters and buffers that casting to float32 would change, with their values:
// the low-precision run casts from the model's own values, as `run --precision bf16` does,
// not from their float32 rounding.
std::vector<std::pair<at::Tensor, at::Tensor>> SaveNonFloat32State(torch::jit::Module& module) {
  std::vector<std::pair<at::Tensor, at::Tensor>> saved;
  auto save = [&](const at::Tensor& t) {
    if (t.defined() && t.is_floating_point() && t.scalar_type() != at::kFloat) {
      saved.emplace_back(t, t.detach().clone());
    }
  };
  for (const auto& p : module.named_parameters(/*recurse=*/true)) save(p.value);
  for (const auto& b : module.named_buffers(/*recurse=*/true)) save(b.value);
  return saved;
}

// The search (bisect.h, BisectSearch) over runs `measure` makes.
class Search {
 public:
  Search(const BisectMeasure& measure, double tolerance, const BisectProgress& progress,
         BisectResult* result)
      : measure_(measure), tolerance_(tolerance), progress_(progress), result_(result) {}

  Status Run(const std::function<Status()>& find_candidates);

 private:
  // Runs with `kept` (sorted) kept unless that set already ran; returns whether it meets the
  // tolerance.
  StatusOr<bool> Passes(std::vector<size_t> kept, BisectRound::Phase phase,
                        std::optional<size_t> removed = std::nullopt);
  // A subset R of `set` for which `fixed` + R passes. REQUIRES: `fixed` + `set` passes.
  StatusOr<std::vector<size_t>> Reduce(const std::vector<size_t>& set,
                                       const std::vector<size_t>& fixed);
  Status Prune(std::vector<size_t>* set);

  const BisectMeasure& measure_;
  double tolerance_;
  const BisectProgress& progress_;
  BisectResult* result_;
  std::map<std::vector<size_t>, double> errors_;  // by kept set
};

std::vector<size_t> Union(std::vector<size_t> a, const std::vector<size_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

StatusOr<bool> Search::Passes(std::vector<size_t> kept, BisectRound::Phase phase,
                              std::optional<size_t> removed) {
  std::sort(kept.begin(), kept.end());
  auto known = errors_.find(kept);
  if (known == errors_.end()) {
    GRAPHDUMP_ASSIGN_OR_RETURN(double error, measure_(kept));
    BisectRound round;
    round.number = static_cast<int>(result_->rounds.size()) + 1;
    round.phase = phase;
    round.kept = kept;
    round.removed = removed;
    round.error = std::isnan(error) ? kInf : error;
    round.pass = round.error <= tolerance_;
    result_->rounds.push_back(round);
    if (progress_) progress_(round);
    known = errors_.emplace(std::move(kept), round.error).first;
  }
  return known->second <= tolerance_;
}

StatusOr<std::vector<size_t>> Search::Reduce(const std::vector<size_t>& set,
                                             const std::vector<size_t>& fixed) {
  if (set.size() <= 1) return set;
  const std::vector<size_t> first(set.begin(), set.begin() + set.size() / 2);
  const std::vector<size_t> second(set.begin() + set.size() / 2, set.end());
  GRAPHDUMP_ASSIGN_OR_RETURN(bool first_passes,
                             Passes(Union(fixed, first), BisectRound::Phase::kBisect));
  if (first_passes) return Reduce(first, fixed);
  GRAPHDUMP_ASSIGN_OR_RETURN(bool second_passes,
                             Passes(Union(fixed, second), BisectRound::Phase::kBisect));
  if (second_passes) return Reduce(second, fixed);
  // Each half needs something of the other: reduce one with the whole other kept, then the
  // other with what the first kept.
  GRAPHDUMP_ASSIGN_OR_RETURN(std::vector<size_t> first_kept, Reduce(first, Union(fixed, second)));
  GRAPHDUMP_ASSIGN_OR_RETURN(std::vector<size_t> second_kept,
                             Reduce(second, Union(fixed, first_kept)));
  return Union(first_kept, second_kept);
}

Status Search::Prune(std::vector<size_t>* set) {
  for (bool dropped = true; dropped && !set->empty();) {
    dropped = false;
    for (const size_t member : std::vector<size_t>(*set)) {
      std::vector<size_t> without;
      for (size_t k : *set) {
        if (k != member) without.push_back(k);
      }
      GRAPHDUMP_ASSIGN_OR_RETURN(bool passes, Passes(without, BisectRound::Phase::kPrune, member));
      if (passes) {
        *set = std::move(without);
        dropped = true;
      }
    }
  }
  return Status::Ok();
}

Status Search::Run(const std::function<Status()>& find_candidates) {
  GRAPHDUMP_ASSIGN_OR_RETURN(bool none_passes, Passes({}, BisectRound::Phase::kNone));
  result_->error_none = errors_.at({});
  GRAPHDUMP_RETURN_IF_ERROR(find_candidates());
  if (none_passes) {
    result_->outcome = BisectResult::Outcome::kAlreadyMatches;
    result_->error = result_->error_none;
    return Status::Ok();
  }
  GRAPHDUMP_ASSIGN_OR_RETURN(bool all_pass, Passes(result_->candidates, BisectRound::Phase::kAll));
  result_->error_all = errors_.at(result_->candidates);
  if (!all_pass) {
    result_->outcome = BisectResult::Outcome::kUnreachable;
    result_->error = result_->error_all;
    return Status::Ok();
  }
  GRAPHDUMP_ASSIGN_OR_RETURN(std::vector<size_t> keep, Reduce(result_->candidates, {}));
  GRAPHDUMP_RETURN_IF_ERROR(Prune(&keep));
  // Reduce returns a set that passes; pruning only drops members while the rest passes.
  result_->keep = keep;
  result_->error = errors_.at(keep);
  result_->outcome = BisectResult::Outcome::kFound;
  return Status::Ok();
}

class Bisector {
 public:
  Bisector(TorchModel& model, const std::vector<c10::IValue>& inputs, const BisectOptions& options,
           const BisectProgress& progress, BisectResult* result)
      : model_(model), inputs_(inputs), options_(options), progress_(progress), result_(result) {}

  Status Run();

 private:
  // The outputs measured by one run of the model as it is set now.
  StatusOr<std::vector<at::Tensor>> Measure();
  // One low-precision run keeping `kept`: its error.
  StatusOr<double> Error(const std::vector<size_t>& kept);
  Status FindCandidates();

  TorchModel& model_;
  const std::vector<c10::IValue>& inputs_;
  const BisectOptions& options_;
  const BisectProgress& progress_;
  BisectResult* result_;
  std::vector<at::Tensor> target_outputs_;  // the target's outputs in the current run
  std::vector<at::Tensor> reference_;
};

StatusOr<std::vector<at::Tensor>> Bisector::Measure() {
  target_outputs_.clear();
  GRAPHDUMP_ASSIGN_OR_RETURN(c10::IValue out, model_.Forward(inputs_));
  if (result_->target) return std::move(target_outputs_);
  std::vector<at::Tensor> tensors;
  CollectTensors(out, &tensors);
  return tensors;
}

StatusOr<double> Bisector::Error(const std::vector<size_t>& kept) {
  KeepSet keep;
  for (size_t id : kept) {
    (id < result_->kernel_count ? keep.kernels : keep.states)
        .push_back(id < result_->kernel_count ? id : id - result_->kernel_count);
  }
  model_.SetKeepFp32(keep);
  GRAPHDUMP_ASSIGN_OR_RETURN(std::vector<at::Tensor> measured, Measure());
  return MaxRelativeL2Error(measured, reference_);
}

Status Bisector::FindCandidates() {
  // Kernels that ran in either precision with a floating input or output (keeping any other
  // changes nothing), then the floating parameters and buffers.
  const auto& kernels = model_.graph().kernels;
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (!model_.KernelRan(i)) continue;
    bool floating = false;
    for (const auto* metas : {&kernels[i].inputs, &kernels[i].outputs}) {
      for (const TensorMeta& m : *metas) floating |= IsFloating(m.dtype);
    }
    if (floating) result_->candidates.push_back(i);
  }
  for (size_t j = 0; j < model_.StateNames().size(); ++j) {
    result_->candidates.push_back(result_->kernel_count + j);
  }
  return Status::Ok();
}

Status Bisector::Run() {
  if (!result_->target && !options_.target.empty()) {
    GRAPHDUMP_ASSIGN_OR_RETURN(std::vector<size_t> selected,
                               model_.SelectKernels({options_.target}, "--target"));
    if (selected.size() > 1) {
      std::string names;
      for (size_t i = 0; i < selected.size() && i < 5; ++i) {
        names += (i ? ", " : "") + model_.graph().kernels[selected[i]].full_name;
      }
      if (selected.size() > 5) names += ", ...";
      return Status::InvalidArgument("--target '" + options_.target + "' selects " +
                                     std::to_string(selected.size()) + " kernels (" + names +
                                     "); give one kernel's full name");
    }
    result_->target = selected[0];
  }
  if (result_->target) {
    const size_t target = *result_->target;
    model_.SetKernelObserver(
        [this, target](const KernelInfo& kernel, const std::vector<c10::IValue>& outputs) {
          if (kernel.index != target) return;
          for (const c10::IValue& v : outputs) CollectTensors(v, &target_outputs_);
        });
  }

  // The float32 reference, as `run --precision fp32` computes it.
  auto saved = SaveNonFloat32State(model_.module());
  PrecisionOptions fp32;
  fp32.dtype = at::kFloat;
  GRAPHDUMP_RETURN_IF_ERROR(model_.SetPrecision(fp32));
  GRAPHDUMP_ASSIGN_OR_RETURN(reference_, Measure());
  if (result_->target && reference_.empty()) {
    return Status::InvalidArgument("--target " +
                                   model_.graph().kernels[*result_->target].full_name +
                                   " did not run in the float32 run (a branch not taken?); "
                                   "`graphdump run MODEL --list-kernels` marks such kernels");
  }
  if (reference_.empty()) {
    return Status::InvalidArgument(
        "the model's output holds no tensor to compare; measure a kernel's output with "
        "--target KERNEL");
  }
  try {
    torch::NoGradGuard no_grad;
    for (auto& [tensor, value] : saved) tensor.set_data(value);
  } catch (const std::exception& e) {
    return Status::Internal(std::string("restoring the model's parameters failed: ") + e.what());
  }
  PrecisionOptions low;
  low.dtype = options_.dtype;
  GRAPHDUMP_RETURN_IF_ERROR(model_.SetPrecision(low));

  result_->kernel_count = model_.graph().kernels.size();
  const BisectMeasure measure = [this](const std::vector<size_t>& kept) { return Error(kept); };
  return Search(measure, options_.tolerance, progress_, result_).Run([this] {
    return FindCandidates();
  });
}

}  // namespace

double MaxRelativeL2Error(const std::vector<at::Tensor>& actual,
                          const std::vector<at::Tensor>& reference) {
  if (actual.size() != reference.size()) return kInf;
  double worst = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    worst = std::max(worst, RelativeL2Error(actual[i], reference[i]));
  }
  return worst;
}

Status BisectSearch(const BisectMeasure& measure,
                    const std::function<Status(BisectResult*)>& find_candidates, double tolerance,
                    const BisectProgress& progress, BisectResult* result) {
  return Search(measure, tolerance, progress, result).Run([&] { return find_candidates(result); });
}

double RelativeL2Error(const at::Tensor& actual, const at::Tensor& reference) {
  if (!actual.defined() || !reference.defined() || actual.sizes() != reference.sizes()) {
    return kInf;
  }
  torch::NoGradGuard no_grad;
  const at::Tensor a = actual.detach().to(at::kCPU).to(at::kDouble).reshape({-1});
  const at::Tensor b = reference.detach().to(at::kCPU).to(at::kDouble).reshape({-1});
  const at::Tensor finite = at::isfinite(b);
  if (!finite.all().item<bool>()) {
    const at::Tensor odd = at::logical_not(finite);
    const at::Tensor a_odd = a.masked_select(odd);
    const at::Tensor b_odd = b.masked_select(odd);
    const at::Tensor same =
        at::logical_or(at::eq(a_odd, b_odd), at::logical_and(at::isnan(a_odd), at::isnan(b_odd)));
    if (!same.all().item<bool>()) return kInf;
  }
  const at::Tensor a_finite = a.masked_select(finite);
  const at::Tensor b_finite = b.masked_select(finite);
  if (!at::isfinite(a_finite).all().item<bool>()) return kInf;
  const double difference = at::norm(a_finite - b_finite).item<double>();
  const double scale = at::norm(b_finite).item<double>();
  return scale > 0 ? difference / scale : difference;
}

StatusOr<BisectResult> BisectPrecision(TorchModel& model, const std::vector<c10::IValue>& inputs,
                                       const BisectOptions& options,
                                       const BisectProgress& progress) {
  if (options.dtype != at::kBFloat16 && options.dtype != at::kHalf) {
    return Status::InvalidArgument(std::string("bisect compares a bf16 or fp16 run with the "
                                               "float32 run; got ") +
                                   c10::toString(options.dtype));
  }
  if (!std::isfinite(options.tolerance) || options.tolerance < 0) {
    return Status::InvalidArgument("--tolerance " + std::to_string(options.tolerance) +
                                   ": a relative L2 error, a finite number >= 0");
  }
  BisectResult result;
  Status status;
  try {
    torch::NoGradGuard no_grad;
    status = Bisector(model, inputs, options, progress, &result).Run();
  } catch (const std::exception& e) {
    status = Status::Internal(std::string("bisect failed: ") + e.what());
  }
  model.SetKernelObserver(nullptr);
  if (!status.ok()) return status;
  return result;
}

}  // namespace graphdump
