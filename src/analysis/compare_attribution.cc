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

// The output that shows `k`'s discrete change: a discrete output whose elements differ (an index
// output before a shape, which an earlier index decided), else an output whose shape differs;
// null when none.
const TensorComparison* ChangedOutput(const KernelComparison& k) {
  const TensorComparison* shape = nullptr;
  for (const TensorComparison& t : k.tensors) {
    if (t.is_input || !DiscreteChange(t)) continue;
    if (!t.shape_differs) return &t;
    if (!shape) shape = &t;
  }
  return shape;
}

// The first input of `k` that carries a discrete change made upstream (its indices or shape
// differ); null when none.
const TensorComparison* ChangedInput(const KernelComparison& k) {
  for (const TensorComparison& t : k.tensors) {
    if (t.is_input && DiscreteChange(t)) return &t;
  }
  return nullptr;
}

// "output 1: 198 of 256 indices differ" / "output 0: shape (55,1) vs (17,1)".
std::string ChangeText(const TensorComparison& t) {
  if (t.shape_differs) return Describe(t) + ": shape " + t.shape_a + " vs " + t.shape_b;
  const std::string reason = t.reason.substr(0, t.reason.find(" (first at"));
  return Describe(t) + ": " + reason;
}

// A kernel's discrete judgement (docs/precision.md, "Discrete outputs"), made in execution order
// once the kernels before it are judged: `upstream` is the origin of the error an input carries
// (the error_origin of the operator that made it, -1 when none is known), `last_discrete` the
// last discrete divergence so far in the run (-1: none).
void JudgeDiscrete(int64_t index, int64_t upstream, int64_t last_discrete, KernelComparison* k) {
  const TensorComparison* changed = ChangedOutput(*k);
  const TensorComparison* changed_input = ChangedInput(*k);
  // After a discrete divergence, a kernel reading values the dump does not record (indexing's
  // index list) may read what that choice made: error it seems to add follows it.
  const bool unseen = k->reads_unrecorded && last_discrete >= 0;
  // Only a discrete change of its own, or error it seems to add from inputs that already
  // differ discretely (or that the dump cannot show), is judged here; the rest was judged by
  // Attribute.
  if (!changed && !((changed_input || unseen) && k->adds_error)) return;
  if (changed) k->discrete_change = ChangeText(*changed);
  // A shape that differs with no differing input to show why follows the run's last discrete
  // divergence: its inputs (an index list, which is not dumped) came from that choice.
  const bool follows = (changed && changed->shape_differs && !changed->discrete &&
                        upstream < 0 && !changed_input && last_discrete >= 0) ||
                       (unseen && upstream < 0 && !changed_input);
  PrecisionEvidence evidence;
  evidence.significant = changed || k->adds_error;
  evidence.discrete = changed != nullptr;
  evidence.discrete_upstream = changed_input || upstream >= 0 || follows;
  evidence.input_difference = k->input_error;
  evidence.output_error = k->output_error;
  const PrecisionJudgement judgement = JudgePrecision(evidence);
  if (judgement.verdict == PrecisionVerdict::kAddsError && changed) {
    k->adds_error = true;
    k->discrete_divergence = true;
    k->verdict = Verdict::kError;
    k->error_origin = index;
    k->reason = fmt::format(
        "adds error: {}: a discrete divergence: {} while {}; a different choice is no rounding "
        "error, whatever the tolerance; {}: {}",
        Describe(*changed), changed->shape_differs ? "its shape differs" : "its choices differ",
        std::isnan(k->input_error)
            ? std::string("no input was compared")
            : fmt::format("its inputs differ by norm rel err {}{}", ErrText(k->input_error),
                          k->inputs_near_rounding ? " (their rounding)" : ""),
        Describe(*changed), changed->reason);
    return;
  }
  if (judgement.verdict != PrecisionVerdict::kInherits) return;
  // The change (or the error of an output) was made upstream: the kernel inherits it.
  k->adds_error = false;
  k->discrete_divergence = false;
  if (upstream >= 0) {
    k->error_origin = upstream;
  } else if (last_discrete >= 0) {
    k->error_origin = last_discrete;
  }
  if (k->verdict == Verdict::kPass) return;
  k->verdict = Verdict::kWarning;
  std::string why = "it follows a discrete divergence upstream";
  if (changed_input) {
    const std::string input = Describe(*changed_input);
    why = fmt::format("its {} already differs ({})", input,
                      ChangeText(*changed_input).substr(input.size() + 2));
  } else if (upstream >= 0) {
    why = "its inputs carry error added upstream";
  } else if (unseen) {
    why = "it reads values the dump does not record (an argument computed while it ran, such as "
          "an index list) after a discrete divergence upstream";
  }
  k->reason = fmt::format("inherits error: {}: {}", changed ? k->discrete_change
                                                             : std::string("its outputs differ"),
                          why);
}

// Each operator's error_origin, per run of the graph (rank, graph, iteration, call) in execution
// order: a kernel that adds error is its own origin; any other takes the origin of the earlier
// operator that made its input of largest error (matched by reference values). An inheriting
// kernel's reason then names it. Discrete changes are judged on the way (JudgeDiscrete), as
// they depend on what the kernels before did.
void TraceErrorOrigins(CompareResult* r, bool fingerprints) {
  auto& ks = r->kernels;
  size_t begin = 0;
  while (begin < ks.size()) {
    const size_t end = RunEnd(ks, begin);
    std::map<Fingerprint, int64_t> made_by;  // the last operator so far that output it
    int64_t last_discrete = -1;
    for (size_t i = begin; i < end; ++i) {
      KernelComparison& k = ks[i];
      if (k.role != KernelRole::kOperator) continue;
      // The origin of the error its input of largest error carries.
      int64_t upstream = -1;
      double worst = -1;
      for (const TensorComparison& t : k.tensors) {
        auto f = fingerprints ? FingerprintOf(t) : std::nullopt;
        if (!t.is_input || !f || std::isnan(t.error) || t.error <= worst) continue;
        auto it = made_by.find(*f);
        if (it == made_by.end()) continue;
        worst = t.error;
        upstream = ks[it->second].error_origin;
      }
      // An input whose shape differs cannot be matched by its values: it comes from the run's
      // last discrete divergence (a shape depends on values only through a discrete choice).
      if (upstream < 0 && last_discrete >= 0) {
        for (const TensorComparison& t : k.tensors) {
          if (t.is_input && t.shape_differs) upstream = last_discrete;
        }
      }
      JudgeDiscrete(static_cast<int64_t>(i), upstream, last_discrete, &k);
      if (k.discrete_divergence) last_discrete = static_cast<int64_t>(i);
      if (k.adds_error) {
        k.error_origin = static_cast<int64_t>(i);
      } else {
        if (upstream >= 0) k.error_origin = upstream;
        if (k.verdict == Verdict::kWarning && k.error_origin >= 0 &&
            k.reason.rfind("inherits error", 0) == 0) {
          const KernelComparison& origin = ks[k.error_origin];
          k.reason += "; the error was added upstream by " + origin.name_a +
                      (origin.source_line.empty() ? "" : " at " + origin.source_line);
        }
      }
      if (!fingerprints) continue;
      for (const TensorComparison& t : k.tensors)
        if (auto f = FingerprintOf(t); f && !t.is_input) made_by[*f] = static_cast<int64_t>(i);
    }
    begin = end;
  }
}

}  // namespace

void Summarize(CompareResult* r) {
  // Fingerprints (reference values) come from compared tensor files only: a statistics-only
  // comparison has none, and the passes that match them are skipped.
  bool fingerprints = false;
  for (size_t i = 0; i < r->kernels.size() && !fingerprints; ++i) {
    for (const TensorComparison& t : r->kernels[i].tensors)
      fingerprints = fingerprints || FingerprintOf(t);
  }
  // Origins and discrete judgements first: they can change a kernel's verdict.
  TraceErrorOrigins(r, fingerprints);
  const auto& ks = r->kernels;
  r->passed = r->warnings = r->errors = 0;
  for (const KernelComparison& k : ks) {
    (k.verdict == Verdict::kPass      ? r->passed
     : k.verdict == Verdict::kWarning ? r->warnings
                                      : r->errors)++;
  }
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
    const int order = CompareContribution(ContributionKeyOf(ks[x]), ContributionKeyOf(ks[y]));
    return order != 0 ? order < 0 : x < y;
  });
  for (size_t i = 0; i < r->contributors.size(); ++i)
    r->kernels[r->contributors[i]].contribution_rank = static_cast<int>(i + 1);
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

namespace graphdump::analysis {

ContributionKey ContributionKeyOf(const KernelComparison& k) {
  return {k.discrete_divergence, k.added_error, k.growth};
}

int CompareContribution(const ContributionKey& a, const ContributionKey& b) {
  if (a.discrete != b.discrete) return a.discrete ? -1 : 1;
  if (a.discrete) return 0;  // execution order
  if (a.added_error != b.added_error) return a.added_error > b.added_error ? -1 : 1;
  if (a.growth != b.growth) return a.growth > b.growth ? -1 : 1;
  return 0;
}

}  // namespace graphdump::analysis
