// compare: which kernels add error, which inherit it, and the ranked list (docs/precision.md,
// "Attribution").
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>

#include "graphdump/analysis/precision_verdict.h"
#include "graphdump/internal/compare_parts.h"

namespace graphdump::analysis::compare_internal {
namespace {


// The worst tensor's verdict and reason (the rule for sources and for kernels whose outputs
// carry no measured error).
void WorstTensor(KernelComparison* k) {
  for (const TensorComparison& t : k->tensors) {
    if (t.verdict > k->verdict ||
        (k->reason.empty() && t.verdict == k->verdict && t.verdict != Verdict::kPass)) {
      k->verdict = t.verdict;
      k->reason = Describe(t) + ": " + t.reason;
    }
  }
}

// "0.0123" / "inf".
std::string ErrText(double v) { return fmt::format("{:.3g}", v); }

constexpr std::string_view kGradients = "Gradients/";

}  // namespace

std::optional<Fingerprint> FingerprintOf(const TensorComparison& t) {
  if (t.mode != "tensor" || t.shape_b.empty() || t.metrics.elements == 0) return std::nullopt;
  return Fingerprint{t.shape_b, Lower(t.dtype_b), t.metrics.elements, t.metrics.ref_sum,
                     t.metrics.ref_sum_sq};
}

std::map<ScopeKey, double> ForwardScopeErrors(const std::vector<KernelComparison>& kernels) {
  std::map<ScopeKey, double> out;
  for (const KernelComparison& k : kernels) {
    if (k.role != KernelRole::kOperator || k.name_a.rfind(kGradients, 0) == 0) continue;
    double worst = kNaN;
    for (const TensorComparison& t : k.tensors)
      if (!std::isnan(t.error) && (std::isnan(worst) || t.error > worst)) worst = t.error;
    if (std::isnan(worst)) continue;
    for (size_t slash = k.name_a.find('/'); slash != std::string::npos;
         slash = k.name_a.find('/', slash + 1)) {
      auto [it, fresh] = out.try_emplace(
          {k.rank, k.graph_id, k.iteration, k.call, k.name_a.substr(0, slash)}, worst);
      if (!fresh) it->second = std::max(it->second, worst);
    }
  }
  return out;
}

double SavedTensorError(const std::map<ScopeKey, double>& forward, const KernelComparison& k) {
  if (k.name_a.rfind(kGradients, 0) != 0) return kNaN;
  const size_t slash = k.name_a.rfind('/');
  if (slash <= kGradients.size()) return kNaN;
  const std::string scope = k.name_a.substr(kGradients.size(), slash - kGradients.size());
  auto it = forward.find({k.rank, k.graph_id, k.iteration, k.call, scope});
  return it == forward.end() ? kNaN : it->second;
}

void Attribute(const CompareOptions& options, double saved_error, KernelComparison* k) {
  if (!std::isnan(saved_error)) k->input_error = saved_error;
  double rtol = 0;
  bool output_fails = false;
  const TensorComparison* failing = nullptr;  // the output whose error is largest
  for (const TensorComparison& t : k->tensors) {
    if (std::isnan(t.error)) continue;
    double& side = t.is_input ? k->input_error : k->output_error;
    if (std::isnan(side) || t.error > side) side = t.error;
    if (t.is_input) continue;
    rtol = std::max(
        rtol, options.user_tolerances ? options.rtol : StandardFor(t.dtype_a, t.dtype_b).rtol);
    if (t.verdict == Verdict::kError) {
      output_fails = true;
      if (!failing || t.error > failing->error) failing = &t;
    }
  }
  for (const TensorComparison& t : k->tensors) {
    if (t.is_input && !std::isnan(t.rounding) &&
        (std::isnan(k->input_rounding) || t.rounding > k->input_rounding)) {
      k->input_rounding = t.rounding;
    }
  }
  const double in = k->input_error, out = k->output_error;
  // The verdict model every precision tool shares (precision_verdict.h); compare measures no
  // own error, so a kernel that magnifies its inputs' error "adds error".
  PrecisionEvidence evidence;
  evidence.significant = output_fails;
  evidence.growth_floor = rtol;
  evidence.input_difference = in;
  evidence.input_rounding = k->input_rounding;
  evidence.output_error = out;
  const PrecisionJudgement judgement = JudgePrecision(evidence);
  k->inputs_near_rounding = judgement.inputs_near_rounding;
  if (!std::isnan(out)) {
    k->growth = judgement.growth;
    k->added_error = std::isnan(in) ? out : std::isinf(in) ? 0.0 : out - in;
  }
  k->adds_error =
      k->role == KernelRole::kOperator && judgement.verdict == PrecisionVerdict::kAddsError;
  if (k->role != KernelRole::kOperator) {
    WorstTensor(k);
    return;
  }
  // An operator: a failing input was made upstream (by an earlier kernel, or a graph input or
  // parameter, listed apart), so it is at most a warning, and only where no output was
  // measured; a measured output's failure is judged below.
  for (const TensorComparison& t : k->tensors) {
    Verdict v = t.verdict;
    bool inherited = false;
    if (v == Verdict::kError && t.is_input) {
      if (!std::isnan(out)) continue;
      v = Verdict::kWarning;
      inherited = true;
    } else if (v == Verdict::kError && !std::isnan(t.error)) {
      continue;
    }
    if (v > k->verdict || (k->reason.empty() && v == k->verdict && v != Verdict::kPass)) {
      k->verdict = v;
      k->reason = Describe(t) + ": " + (inherited ? "inherited (no output compared): " : "") +
                  t.reason;
    }
  }
  if (!failing) return;
  const std::string inputs =
      std::isnan(in) ? std::string("no input compared")
                     : fmt::format("inputs {} (growth x{:.3g}{})", ErrText(in), k->growth,
                                   k->adds_error ? "" : fmt::format(" < x{:g}", kGrowthLimit));
  if (k->adds_error) {
    k->verdict = Verdict::kError;
    k->reason = fmt::format("adds error: {} norm rel err {} vs {}{}; {}: {}", Describe(*failing),
                            ErrText(out), inputs,
                            k->inputs_near_rounding
                                ? fmt::format(", {} their rounding to {} ({}): "
                                              "ill-conditioned or inaccurate at {} (replay tells "
                                              "which)",
                                              k->input_rounding > 0
                                                  ? ErrText(in / k->input_rounding) + " times"
                                                  : std::string("within"),
                                              failing->dtype_a, ErrText(k->input_rounding),
                                              failing->dtype_a)
                                : std::string(),
                            Describe(*failing), failing->reason);
  } else if (k->verdict != Verdict::kError) {
    k->verdict = Verdict::kWarning;
    k->reason = fmt::format("inherits error: {} norm rel err {} vs {}; {}: {}", Describe(*failing),
                            ErrText(out), inputs, Describe(*failing), failing->reason);
  }
}

namespace {

// The end of the run of the graph (rank, graph, iteration, call) that starts at `begin`.
size_t RunEnd(const std::vector<KernelComparison>& ks, size_t begin) {
  size_t end = begin;
  while (end < ks.size() && ks[end].rank == ks[begin].rank &&
         ks[end].graph_id == ks[begin].graph_id && ks[end].iteration == ks[begin].iteration &&
         ks[end].call == ks[begin].call)
    ++end;
  return end;
}

// Each operator's error_origin, per run of the graph (rank, graph, iteration, call) in execution
// order: a kernel that adds error is its own origin; any other takes the origin of the earlier
// operator that made its input of largest error (matched by reference values). An inheriting
// kernel's reason then names it.
void TraceErrorOrigins(CompareResult* r, bool fingerprints) {
  auto& ks = r->kernels;
  if (!fingerprints) {  // no tensor to match an input to the kernel that made it
    for (size_t i = 0; i < ks.size(); ++i) {
      if (ks[i].role == KernelRole::kOperator && ks[i].adds_error) {
        ks[i].error_origin = static_cast<int64_t>(i);
      }
    }
    return;
  }
  size_t begin = 0;
  while (begin < ks.size()) {
    const size_t end = RunEnd(ks, begin);
    std::map<Fingerprint, int64_t> made_by;  // the last operator so far that output it
    for (size_t i = begin; i < end; ++i) {
      KernelComparison& k = ks[i];
      if (k.role != KernelRole::kOperator) continue;
      if (k.adds_error) {
        k.error_origin = static_cast<int64_t>(i);
      } else {
        double worst = -1;
        for (const TensorComparison& t : k.tensors) {
          auto f = FingerprintOf(t);
          if (!t.is_input || !f || std::isnan(t.error) || t.error <= worst) continue;
          auto it = made_by.find(*f);
          if (it == made_by.end()) continue;
          worst = t.error;
          k.error_origin = ks[it->second].error_origin;
        }
        if (k.verdict == Verdict::kWarning && k.error_origin >= 0 &&
            k.reason.rfind("inherits error", 0) == 0) {
          const KernelComparison& origin = ks[k.error_origin];
          k.reason += "; the error was added upstream by " + origin.name_a +
                      (origin.source_line.empty() ? "" : " at " + origin.source_line);
        }
      }
      for (const TensorComparison& t : k.tensors)
        if (auto f = FingerprintOf(t); f && !t.is_input) made_by[*f] = static_cast<int64_t>(i);
    }
    begin = end;
  }
}

}  // namespace

void Summarize(CompareResult* r) {
  const auto& ks = r->kernels;
  for (size_t i = 0; i < ks.size(); ++i) {
    const int64_t index = static_cast<int64_t>(i);
    if (ks[i].role != KernelRole::kOperator) {
      if (ks[i].verdict == Verdict::kError) r->differing_sources.push_back(index);
      continue;
    }
    if (r->first_failure < 0 && ks[i].verdict == Verdict::kError) r->first_failure = index;
    if (ks[i].adds_error) {
      if (r->first_adding_error < 0) r->first_adding_error = index;
      r->contributors.push_back(index);
    }
  }
  std::stable_sort(r->contributors.begin(), r->contributors.end(), [&](int64_t x, int64_t y) {
    const KernelComparison &a = ks[x], &b = ks[y];
    if (a.added_error != b.added_error) return a.added_error > b.added_error;
    if (a.growth != b.growth) return a.growth > b.growth;
    return x < y;
  });
  for (size_t i = 0; i < r->contributors.size(); ++i)
    r->kernels[r->contributors[i]].contribution_rank = static_cast<int>(i + 1);
  // Fingerprints (reference values) come from compared tensor files only: a statistics-only
  // comparison has none, and the passes that match them are skipped.
  bool fingerprints = false;
  for (size_t i = 0; i < ks.size() && !fingerprints; ++i) {
    for (const TensorComparison& t : ks[i].tensors) fingerprints = fingerprints || FingerprintOf(t);
  }
  TraceErrorOrigins(r, fingerprints);
  if (!fingerprints) return;
  // Graph inputs: operator inputs whose reference values no earlier operator of the same
  // iteration output and no parameter or constant of the graph holds.
  std::map<std::tuple<uint32_t, uint32_t>, std::set<Fingerprint>> constants;
  for (const KernelComparison& k : ks) {
    if (k.role != KernelRole::kConstant) continue;
    for (const TensorComparison& t : k.tensors)
      if (auto f = FingerprintOf(t)) constants[{k.rank, k.graph_id}].insert(*f);
  }
  size_t begin = 0;
  while (begin < ks.size()) {
    const size_t end = RunEnd(ks, begin);
    std::set<Fingerprint> known = constants[{ks[begin].rank, ks[begin].graph_id}];
    for (size_t i = begin; i < end; ++i) {
      if (ks[i].role == KernelRole::kOperator) continue;
      for (const TensorComparison& t : ks[i].tensors)
        if (auto f = FingerprintOf(t)) known.insert(*f);
    }
    for (size_t i = begin; i < end; ++i) {
      if (ks[i].role != KernelRole::kOperator) continue;
      for (const TensorComparison& t : ks[i].tensors) {
        auto f = FingerprintOf(t);
        if (!f || !t.is_input || known.count(*f) || t.verdict != Verdict::kError) continue;
        r->differing_graph_inputs.push_back({static_cast<int64_t>(i), t.slot});
      }
      for (const TensorComparison& t : ks[i].tensors)
        if (auto f = FingerprintOf(t); f && !t.is_input) known.insert(*f);
    }
    begin = end;
  }
}

}  // namespace graphdump::analysis::compare_internal
