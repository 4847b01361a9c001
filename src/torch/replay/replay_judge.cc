// graphdump replay, measuring and judging (replay_parts.h): compare's metrics on replayed
// tensors, and the verdict of the model every precision tool shares (precision_verdict.h):
// accurate, inaccurate, ill-conditioned or inherits, with the chain of kernels upstream.
#include "graphdump/torch/replay.h"

#include <torch/script.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <variant>

#include "torchscript/graph_compiler.h"
#include "graphdump/analysis/dump_index.h"
#include "graphdump/analysis/npy_file.h"
#include "graphdump/analysis/precision_verdict.h"
#include "graphdump/analysis/tensor_math.h"
#include "graphdump/file_system.h"
#include "graphdump/graph_files.h"
#include "graphdump/npy.h"
#include "graphdump/torch/scalar_type.h"
#include "replay/replay_execute.h"
#include "replay/replay_parts.h"
#include "torch_compat.h"

namespace graphdump {
namespace replay_internal {

// Above this many units of roundoff of the kernel's dtype, a number is more than rounding: an
// accurate kernel's output carries one rounding (about u/2 in relative L2) plus a few in its
// computation.
constexpr double kSignificantRoundings = 4;

double UnitRoundoff(at::ScalarType type) {
  switch (type) {
    case at::kBFloat16:
      return std::ldexp(1.0, -8);
    case at::kHalf:
      return std::ldexp(1.0, -11);
    case at::kFloat:
      return std::ldexp(1.0, -24);
    default:
      return std::ldexp(1.0, -53);
  }
}

std::string DTypeText(at::ScalarType type) {
  auto dtype = torch_compat::ToDType(type);
  return dtype ? std::string(DTypeName(*dtype)) : std::string(c10::toString(type));
}

// `t` as contiguous float64 in a .npy held in memory, for the analysis metrics.
std::unique_ptr<analysis::MappedNpy> AsNpy(const at::Tensor& t) {
  at::Tensor d = t.to(at::kDouble).contiguous();
  std::vector<int64_t> shape(d.sizes().begin(), d.sizes().end());
  std::string header = NpyHeader(DType::kFloat64, shape);
  std::vector<uint8_t> bytes(header.begin(), header.end());
  const auto* data = static_cast<const uint8_t*>(d.data_ptr());
  bytes.insert(bytes.end(), data, data + d.numel() * sizeof(double));
  auto npy = analysis::MappedNpy::FromBytes(std::move(bytes), "replay");
  return npy.ok() ? std::move(*npy) : nullptr;
}

// a against b with compare's metrics; rel_l2 is ||a-b|| / ||norm_of|| (b when undefined).
ReplayError Measure(const at::Tensor& a, const at::Tensor& b, const at::Tensor& norm_of) {
  ReplayError e;
  auto na = AsNpy(a), nb = AsNpy(b);
  if (!na || !nb || na->NumElements() != nb->NumElements()) {
    e.rel_l2 = e.max_abs = std::numeric_limits<double>::quiet_NaN();
    e.cosine = std::numeric_limits<double>::quiet_NaN();
    return e;
  }
  const analysis::PairMetrics m = analysis::ComparePair(*na, *nb, 0, 0);
  const analysis::DeltaNorms d = analysis::DeltaBetween(*na, *nb);
  double ref = d.ref_l2;
  if (norm_of.defined()) ref = norm_of.to(at::kDouble).norm().item<double>();
  e.rel_l2 = ref > 0 ? d.diff_l2 / ref : (d.diff_l2 > 0 ? INFINITY : 0.0);
  e.max_abs = m.max_abs_err;
  e.cosine = m.cosine;
  if (m.nonfinite_mismatches > 0) e.rel_l2 = e.max_abs = INFINITY;
  return e;
}

// Every tensor of `outputs` equals the dumped one (as stored: bfloat16 widened exactly).
bool SameAsDumped(const std::vector<at::Tensor>& replayed, const std::vector<at::Tensor>& dumped,
                  double* max_abs) {
  *max_abs = 0;
  if (replayed.size() != dumped.size()) return false;
  bool same = true;
  for (size_t i = 0; i < replayed.size(); ++i) {
    const at::Tensor& a = replayed[i];
    const at::Tensor& b = dumped[i];
    if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) {
      *max_abs = INFINITY;
      return false;
    }
    if (a.is_floating_point()) {
      at::Tensor x = a.to(at::kDouble), y = b.to(at::kDouble);
      at::Tensor both_nan = x.isnan().logical_and(y.isnan());
      at::Tensor equal = x.eq(y).logical_or(both_nan);
      if (!equal.all().item<bool>()) same = false;
      at::Tensor diff = (x - y).abs().masked_fill(both_nan, 0);
      if (diff.numel() > 0) *max_abs = std::max(*max_abs, diff.max().item<double>());
    } else if (!a.equal(b)) {
      same = false;
      *max_abs = INFINITY;
    }
  }
  return same;
}

int64_t ChangedElements(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes()) return a.numel();
  return a.to(at::kLong).ne(b.to(at::kLong)).sum().item<int64_t>();
}

ReplayError MeasureDiscrete(const at::Tensor& a, const at::Tensor& b) {
  ReplayError e;
  const int64_t n = a.numel();
  if (a.sizes() != b.sizes()) {
    e.rel_l2 = 1;
    e.max_abs = e.cosine = std::numeric_limits<double>::quiet_NaN();
    return e;
  }
  const ReplayError values = Measure(a, b);
  e.rel_l2 = n > 0 ? static_cast<double>(ChangedElements(a, b)) / static_cast<double>(n) : 0.0;
  e.max_abs = values.max_abs;
  e.cosine = values.cosine;
  return e;
}

std::vector<at::Tensor> Cast(const std::vector<at::Tensor>& inputs, at::ScalarType dtype) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : inputs) out.push_back(t.is_floating_point() ? t.to(dtype) : t);
  return out;
}

// Rounded to `dtype` and back to float64: the values a `dtype` tensor can hold.
std::vector<at::Tensor> RoundTo(const std::vector<at::Tensor>& inputs, at::ScalarType dtype) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : inputs) {
    out.push_back(t.is_floating_point() ? t.to(dtype).to(at::kDouble) : t);
  }
  return out;
}

std::string Times(double a, double b) {
  if (b <= 0) return "far more than";
  return Number(a / b) + " times";
}

double Key(double x) { return std::isnan(x) ? INFINITY : x; }

// The evidence of `r` judged by the model every precision tool shares (precision_verdict.h);
// sets its growth and whether its inputs are near their rounding.
analysis::PrecisionJudgement JudgeEvidence(ReplayResult* r, bool significant, double own_floor) {
  analysis::PrecisionEvidence evidence;
  evidence.significant = significant;
  evidence.own = Key(r->own.rel_l2);
  evidence.own_floor = own_floor;
  evidence.growth_floor = analysis::StandardFor(r->dtype, r->dtype).rtol;
  evidence.discrete = r->discrete;
  if (r->has_reference) {
    evidence.conditioning = Key(r->conditioning.rel_l2);
    evidence.inherited = Key(r->inherited.rel_l2);
    evidence.input_difference = r->input_difference;
    evidence.input_rounding = r->input_rounding;
    evidence.output_error = Key(r->total.rel_l2);
    evidence.discrete_upstream = r->discrete && r->discrete_upstream;
  }
  const analysis::PrecisionJudgement j = analysis::JudgePrecision(evidence);
  r->growth = j.growth;
  r->inputs_near_rounding = j.inputs_near_rounding;
  return j;
}

// "output 1 (int64): 198 of 256 indices differ from the reference run's".
std::string DiscreteText(const ReplayResult& r) {
  return "output " + std::to_string(r.output_slot) + " (" + r.output_dtype + "): " +
         std::to_string(r.discrete_changed) + " of " + std::to_string(r.discrete_elements) +
         (r.output_dtype == "bool" ? " bool elements" : " indices") + " differ from " +
         (r.has_reference ? "the reference run's" : "float64's on the same inputs");
}

// Judge for a discrete output (docs/precision.md, "Discrete outputs"): the shares of its
// elements that differ stand for the three numbers, and any change is significant.
void JudgeDiscrete(ReplayResult* r) {
  const double own = Key(r->own.rel_l2);
  const double cond = r->has_reference ? Key(r->conditioning.rel_l2) : 0;
  const double inh = r->has_reference ? Key(r->inherited.rel_l2) : 0;
  const std::string& d = r->dtype;
  const analysis::PrecisionJudgement j =
      JudgeEvidence(r, /*significant=*/r->discrete_changed > 0, /*own_floor=*/0);
  const std::string change = DiscreteText(*r);
  const std::string shares =
      "in " + d + " on these inputs it chooses otherwise than float64 for a share of " +
      Number(own) +
      (r->has_reference ? "; rounding the reference's inputs to " + d + " alone changes a share of " +
                              Number(cond) + ", this run's inputs against those a share of " +
                              Number(inh)
                        : std::string());
  switch (j.verdict) {
    case analysis::PrecisionVerdict::kAccurate:
      r->verdict = ReplayVerdict::kAccurate;
      r->reason = "accurate at " + d + ": output " + std::to_string(r->output_slot) + " (" +
                  r->output_dtype + ") equals " +
                  (r->has_reference ? "the reference run's" : "float64's on the same inputs") +
                  " element for element";
      return;
    case analysis::PrecisionVerdict::kInaccurate:
      r->verdict = ReplayVerdict::kInaccurate;
      r->reason = "inaccurate at " + d + ": " + change + ": a discrete divergence of its own (" +
                  shares + "); computing it in float32 (run --keep-fp32) removes it";
      return;
    case analysis::PrecisionVerdict::kIllConditioned:
    case analysis::PrecisionVerdict::kAddsError:
      r->verdict = ReplayVerdict::kIllConditioned;
      r->reason = "ill-conditioned: " + change +
                  ": a discrete divergence: its inputs differ from the reference run's by " +
                  Number(r->input_difference) + " (" +
                  (r->input_rounding > 0 ? Times(r->input_difference, r->input_rounding)
                                         : std::string("far more than")) +
                  " their rounding to " + d + ", " + Number(r->input_rounding) +
                  ") and that flips its choices (" + shares +
                  "); a different choice is no rounding error; computing it alone in float32 "
                  "does not help: keep it and the chain that produces its inputs in float32";
      return;
    case analysis::PrecisionVerdict::kInherits:
      r->verdict = ReplayVerdict::kInherits;
      r->reason = "inherits: " + change + ": its inputs already differ from the reference run's (" +
                  (r->discrete_input_differs
                       ? std::string("an integer or bool input differs")
                       : "by " + Number(r->input_difference) + ", " +
                             (r->input_rounding > 0
                                  ? Times(r->input_difference, r->input_rounding)
                                  : std::string("far more than")) +
                             " their rounding") +
                  "; " + shares + "): look at the kernels before it";
      return;
  }
}

// The verdict of the model every precision tool shares (precision_verdict.h), in words.
void Judge(ReplayResult* r) {
  if (r->discrete) {
    JudgeDiscrete(r);
    return;
  }
  const double floor = kSignificantRoundings * r->unit_roundoff;
  const double own = Key(r->own.rel_l2);
  const double cond = r->has_reference ? Key(r->conditioning.rel_l2) : 0;
  const double inh = r->has_reference ? Key(r->inherited.rel_l2) : 0;
  const std::string& d = r->dtype;
  const analysis::PrecisionJudgement j =
      JudgeEvidence(r, /*significant=*/std::max({own, cond, inh}) > floor, floor);
  // "0.0027 (1.6 times their rounding to bfloat16, 0.0017)"
  const std::string inputs =
      Number(r->input_difference) + " (" +
      (r->input_rounding > 0 ? Times(r->input_difference, r->input_rounding) : "far more than") +
      " their rounding to " + d + ", " + Number(r->input_rounding) + ")";
  switch (j.verdict) {
    case analysis::PrecisionVerdict::kAccurate:
      r->verdict = ReplayVerdict::kAccurate;
      r->reason =
          "accurate at " + d + ": its own error (" + Number(r->own.rel_l2) + ")" +
          (r->has_reference ? ", conditioning (" + Number(r->conditioning.rel_l2) +
                                  ") and inherited error (" + Number(r->inherited.rel_l2) + ")"
                            : "") +
          (r->has_reference ? " are" : " is") + " within " + Number(kSignificantRoundings) +
          " roundings of " + d + " (" + Number(floor) + ")" +
          (r->has_reference ? "" : "; give --reference for conditioning and inheritance");
      return;
    case analysis::PrecisionVerdict::kInaccurate:
      r->verdict = ReplayVerdict::kInaccurate;
      r->reason = "inaccurate at " + d + ": its own error (" + Number(r->own.rel_l2) + ") is " +
                  Times(r->own.rel_l2, r->rounding) + " what rounding its output to " + d +
                  " gives (" + Number(r->rounding) + "); computing it in float32 " +
                  "(run --keep-fp32) removes it";
      return;
    case analysis::PrecisionVerdict::kIllConditioned:
    case analysis::PrecisionVerdict::kAddsError:
      r->verdict = ReplayVerdict::kIllConditioned;
      r->reason = "ill-conditioned: rounding its inputs to " + d + " alone gives error " +
                  Number(r->conditioning.rel_l2) + " (" +
                  Times(r->conditioning.rel_l2, r->input_rounding) +
                  " the inputs' own rounding, " + Number(r->input_rounding) +
                  "), its inputs differ from the reference run's by " + inputs +
                  " and its output by " + Number(r->total.rel_l2) + " (x" + Number(j.growth) +
                  "), while its own error is " + Number(r->own.rel_l2) +
                  ": it magnifies the error of its inputs" +
                  (j.inputs_near_rounding ? ", which carry only their rounding" : "") +
                  "; computing it alone in float32 does not help: keep it and the chain that "
                  "produces its inputs in float32, or change the formula";
      return;
    case analysis::PrecisionVerdict::kInherits:
      r->verdict = ReplayVerdict::kInherits;
      r->reason = "inherits: its inputs already differ from the reference run's by " + inputs +
                  ", which makes its output differ by " + Number(r->total.rel_l2) + " (x" +
                  Number(j.growth) + "; its own error is " + Number(r->own.rel_l2) +
                  ", conditioning " + Number(r->conditioning.rel_l2) + "): look at the kernels "
                  "before it";
      return;
  }
}

std::optional<bool> ComparedDiscreteInherited(const analysis::DumpIndex& dump,
                                              const analysis::DumpIndex& reference,
                                              const ReplayResult& r) {
  analysis::CompareOptions options;
  options.iteration = r.iteration;
  options.progress = false;
  const analysis::CompareResult compared = analysis::CompareDumps(dump, reference, options);
  for (const analysis::KernelComparison& k : compared.kernels) {
    if (k.rank == r.rank && k.graph_id == r.graph_id && k.iteration == r.iteration &&
        k.call == r.call && k.name_a == r.full_name && !k.discrete_change.empty()) {
      return !k.discrete_divergence;
    }
  }
  return std::nullopt;
}

// The chain of kernels and parameters that produces the kernel's inputs, from a comparison of
// the dump with the reference in the replayed iteration (precision_verdict.h); an inheriting
// kernel names the kernel upstream that added its error.
void TraceChain(const analysis::DumpIndex& dump, const analysis::DumpIndex& reference,
                ReplayResult* r) {
  analysis::CompareOptions options;
  options.iteration = r->iteration;
  options.progress = false;
  const analysis::CompareResult compared = analysis::CompareDumps(dump, reference, options);
  int64_t index = -1;
  for (size_t i = 0; i < compared.kernels.size(); ++i) {
    const analysis::KernelComparison& k = compared.kernels[i];
    if (k.rank == r->rank && k.graph_id == r->graph_id && k.iteration == r->iteration &&
        k.call == r->call && k.name_a == r->full_name) {
      index = static_cast<int64_t>(i);
    }
  }
  if (index < 0) return;
  const analysis::PrecisionChain chain = analysis::InputChain(compared, index);
  if (r->verdict == ReplayVerdict::kInherits) {
    if (chain.upstream >= 0) {
      const analysis::KernelComparison& k = compared.kernels[chain.upstream];
      r->upstream = k.name_a;
      const std::string at = k.source_line.empty() ? "" : " at " + k.source_line;
      r->reason.replace(r->reason.rfind("look at the kernels before it"), std::string::npos,
                        "the error was added upstream by " + k.name_a + at +
                            " (graphdump replay it)");
    }
    return;
  }
  r->float32_chain = analysis::PrecisionChainJson(compared, chain).dump();
  r->chain_text = analysis::PrecisionChainText(compared, chain, "  ");
}

}  // namespace replay_internal

const char* ReplayVerdictName(ReplayVerdict verdict) {
  switch (verdict) {
    case ReplayVerdict::kAccurate:
      return "accurate";
    case ReplayVerdict::kInaccurate:
      return "inaccurate";
    case ReplayVerdict::kIllConditioned:
      return "ill-conditioned";
    case ReplayVerdict::kInherits:
      return "inherits";
    case ReplayVerdict::kNotReplayable:
      return "not replayable";
  }
  return "?";
}

}  // namespace graphdump
