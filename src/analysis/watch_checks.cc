// The table of watch checks (watch_checks.h), each check's test, and the parsing of --check
// lists against the table.
#include "graphdump/analysis/watch_checks.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

namespace graphdump::analysis {
namespace {

// "2 +Inf and 1 -Inf", "1 -Inf"; without counts, what max and min prove.
std::string InfText(const TensorEvidence& e) {
  const FiniteSummary& s = e.s;
  if (!e.inf_counted) {
    std::string text;
    if (s.pos_inf) text = "max is +Inf";
    if (s.neg_inf) text += std::string(text.empty() ? "" : " and ") + "min is -Inf";
    return text + ": at least one infinity (statistic.csv has no Inf count columns)";
  }
  std::string text;
  if (s.pos_inf) text = fmt::format("{} +Inf", s.pos_inf);
  if (s.neg_inf) text += fmt::format("{}{} -Inf", text.empty() ? "" : " and ", s.neg_inf);
  return text + fmt::format(" of {} elements", s.elements);
}

std::string Nan(const TensorEvidence& e, const TensorTraits&, double) {
  const FiniteSummary& s = e.s;
  if (s.nan == 0) return "";
  return e.nan_counted ? fmt::format("{} NaN of {} elements", s.nan, s.elements)
                       : fmt::format("{} NaN: at least one NaN of {} elements "
                                     "(statistic.csv has no NaN Count column)",
                                     e.nan_seen_in, s.elements);
}

std::string Inf(const TensorEvidence& e, const TensorTraits&, double) {
  return e.s.pos_inf + e.s.neg_inf > 0 ? InfText(e) : "";
}

// overflow: elements a float16 cannot hold. An infinity in a float16 tensor is the overflow
// itself; in a wider type it is that type's own infinity, and the finite values beyond 65504
// are what would overflow in float16.
std::string Overflow(const TensorEvidence& e, const TensorTraits& t, double) {
  const FiniteSummary& s = e.s;
  if (s.fp16_overflow + s.pos_inf + s.neg_inf == 0) return "";
  std::vector<std::string> parts;
  if (s.fp16_overflow > 0) {
    parts.push_back(e.overflow_counted
                        ? fmt::format("{} finite elements beyond the float16 range (|x| > 65504)",
                                      s.fp16_overflow)
                        : fmt::format("max |x| {:.6g} > 65504: at least one element beyond the "
                                      "float16 range",
                                      s.max_abs));
  }
  if (s.pos_inf + s.neg_inf > 0) {
    const std::string infs = InfText(e);
    if (t.dtype == DType::kFloat16) {
      parts.push_back(infs + " (float16 overflowed)");
    } else {
      parts.push_back(infs + fmt::format(" (infinite in {} itself)",
                                         t.dtype ? std::string(DTypeName(*t.dtype)) : "its dtype"));
    }
  }
  std::string text;
  for (const std::string& p : parts) text += (text.empty() ? "" : "; ") + p;
  return text;
}

// "All zero" concerns what kernels compute, not the weights (a bias starts at zero) or the
// graph's constants; value checks concern floating-point data (an integer or bool tensor holds
// no NaN and its zeros are indices or masks).
std::string Zero(const TensorEvidence& e, const TensorTraits& t, double) {
  const FiniteSummary& s = e.s;
  if (!t.floating || !t.computed || s.elements == 0 || s.zero != s.elements) return "";
  return fmt::format("all {} elements are zero", s.elements);
}

std::string Large(const TensorEvidence& e, const TensorTraits& t, double threshold) {
  const FiniteSummary& s = e.s;
  if (!t.floating || !(s.max_abs > threshold || s.pos_inf + s.neg_inf > 0)) return "";
  return fmt::format("max |x| {:.6g} > {:g}", s.pos_inf + s.neg_inf ? INFINITY : s.max_abs,
                     threshold);
}

std::string GradVanish(const TensorEvidence& e, const TensorTraits& t, double threshold) {
  if (!t.gradient || !(e.s.l2norm < threshold)) return "";
  return fmt::format("gradient l2norm {:.6g} < {:g}", e.s.l2norm, threshold);
}

std::string GradExplode(const TensorEvidence& e, const TensorTraits& t, double threshold) {
  const FiniteSummary& s = e.s;
  if (!t.gradient || !(s.l2norm > threshold || s.nan > 0 || s.pos_inf + s.neg_inf > 0)) return "";
  return fmt::format("gradient l2norm {:.6g} > {:g}", s.l2norm, threshold);
}

std::string WeightUnchanged(const WeightDelta& d, double) {
  if (!d.identical) return "";
  return d.update ? fmt::format("unchanged by the update of iteration {}", d.previous_iteration)
                  : fmt::format("unchanged since iteration {}", d.previous_iteration);
}

std::string WeightChange(const WeightDelta& d, double threshold) {
  if (!(d.ratio > threshold)) return "";
  const std::string when = d.update ? fmt::format("the update of iteration {}", d.previous_iteration)
                                    : fmt::format("since iteration {}", d.previous_iteration);
  if (d.lower_bound) {
    return fmt::format(
        "||w|| {:.6g} -> {:.6g}: ||w - w_prev|| / ||w_prev|| >= {:.6g} > {:g} ({}; from "
        "statistic.csv's L2 norms)",
        d.norm_before, d.norm_after, d.ratio, threshold, when);
  }
  return fmt::format("||w - w_prev|| / ||w_prev|| = {:.6g} > {:g} ({}; ||w|| {:.6g} -> {:.6g})",
                     d.ratio, threshold, when, d.norm_before, d.norm_after);
}

constexpr const char* kNeedsValues =
    "a floating-point tensor (a tensor dump, or a statistic dump with max and min)";
constexpr const char* kNeedsGradients =
    "a gradient (an output of a Gradients/ kernel: dump a training step's backward) with its "
    "L2 norm (a tensor dump, or \"l2norm\" in statistic_category)";
constexpr const char* kNeedsWeights =
    "a weight with its value before: Parameter.* files of two dumped iterations, or an "
    "optimizer's update kernel (Default/optimizer-...) with its input 0 and output 0 dumped "
    "(tensors, or statistics with \"l2norm\" in statistic_category; input_output 0)";
constexpr const char* kNeedsWeightFiles =
    "a weight with its value before, as tensor files (saved_data tensor): Parameter.* files of "
    "two dumped iterations, or an optimizer's update kernel with input 0 and output 0";
constexpr const char* kNeedsLoss =
    "a loss in two or more iterations: the last one-element floating-point output of a forward "
    "kernel before the iteration's first Gradients/ kernel (dump every kernel of each "
    "iteration, backward included)";

using B = BadElement;
constexpr WatchCheckInfo kChecks[] = {
    {"nan", WatchKind::kNan, false, 0, "", Nan, B::kNan, false, nullptr, kNeedsValues},
    {"inf", WatchKind::kInf, false, 0, "", Inf, B::kInf, true, nullptr, kNeedsValues},
    {"overflow", WatchKind::kOverflow, false, 0, "float16 range", Overflow, B::kInf, true,
     nullptr, kNeedsValues},
    {"zero", WatchKind::kZero, false, 0, "all zero", Zero, B::kNone, false, nullptr,
     kNeedsValues},
    {"large", WatchKind::kLarge, true, 1e4, "|x| > T", Large, B::kInf, true, nullptr,
     kNeedsValues},
    {"grad-vanish", WatchKind::kGradVanish, true, 1e-7, "gradient l2norm < T", GradVanish,
     B::kNone, false, nullptr, kNeedsGradients},
    {"grad-explode", WatchKind::kGradExplode, true, 1e3, "> T", GradExplode, B::kNanElseInf, true,
     nullptr, kNeedsGradients},
    {"weight-unchanged", WatchKind::kWeightUnchanged, false, 0, "", nullptr, B::kNone, false,
     WeightUnchanged, kNeedsWeightFiles},
    {"weight-change", WatchKind::kWeightChange, true, 0.1, "||w-w_prev||/||w_prev|| > T", nullptr,
     B::kNone, false, WeightChange, kNeedsWeights},
    // Judged over the iterations (RunWatch), neither a tensor's nor a weight pair's test.
    {"loss-spike", WatchKind::kLossSpike, true, 10, "loss > T x its median before", nullptr,
     B::kNone, false, nullptr, kNeedsLoss},
};

constexpr bool InKindOrder() {
  for (size_t i = 0; i < std::size(kChecks); ++i) {
    if (static_cast<size_t>(kChecks[i].kind) != i) return false;
  }
  return true;
}
static_assert(InKindOrder(), "the rows follow WatchKind's order: WatchCheckOf indexes them");

std::string Spelling(const WatchCheckInfo& info) {
  return std::string(info.name) + (info.has_threshold ? "[:T]" : "");
}

}  // namespace

std::span<const WatchCheckInfo> WatchCheckTable() { return kChecks; }

bool TensorJudged(WatchKind kind, const TensorEvidence& e, const TensorTraits& t) {
  switch (kind) {
    case WatchKind::kNan: return true;
    case WatchKind::kInf:
    case WatchKind::kOverflow:
    case WatchKind::kLarge: return t.floating;
    case WatchKind::kZero: return t.floating && t.computed;
    case WatchKind::kGradVanish:
    case WatchKind::kGradExplode:
      return t.gradient && (e.from_file || !std::isnan(e.s.l2norm) || e.s.nan > 0);
    default: return false;  // weight pairs and losses are counted where they are judged
  }
}

std::string LossSpike(double loss, double usual, size_t before, int64_t first_iteration,
                      double threshold) {
  const double size = std::fabs(loss);
  if (std::isfinite(size) && !(size > threshold * usual)) return "";
  return fmt::format("loss {:.6g} is {:.3g}x its usual {:.6g} (the median of the {} iteration(s) "
                     "from {}) > {:g}x",
                     loss, usual > 0 ? size / usual : INFINITY, usual, before, first_iteration,
                     threshold);
}

const WatchCheckInfo& WatchCheckOf(WatchKind kind) { return kChecks[static_cast<size_t>(kind)]; }

std::string WatchChecksAllowed() {
  std::string text;
  for (const WatchCheckInfo& info : kChecks) text += (text.empty() ? "" : ", ") + Spelling(info);
  return text;
}

std::string WatchChecksHelp() {
  std::string text;
  for (const WatchCheckInfo& info : kChecks) {
    text += (text.empty() ? "" : ", ") + Spelling(info);
    if (info.has_threshold) {
      text += fmt::format(" ({}, {:g})", info.hits_when, info.default_threshold);
    } else if (*info.hits_when != '\0') {
      text += fmt::format(" ({})", info.hits_when);
    }
  }
  return text;
}

StatusOr<std::vector<WatchCheck>> ParseWatchChecks(const std::string& text) {
  const std::string allowed = " (allowed: " + WatchChecksAllowed() + ")";
  std::vector<WatchCheck> checks;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    start = comma + 1;
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (item.empty()) {
      return Status::InvalidArgument("--check: empty item in '" + text + "'" + allowed);
    }
    const size_t colon = item.find(':');
    const std::string name = item.substr(0, colon);
    const WatchCheckInfo* spec = nullptr;
    for (const WatchCheckInfo& s : kChecks)
      if (name == s.name) spec = &s;
    if (!spec) {
      return Status::InvalidArgument("--check: unknown watchpoint '" + name + "'" + allowed);
    }
    WatchCheck check{spec->kind, spec->default_threshold, item};
    if (colon != std::string::npos) {
      const std::string value = item.substr(colon + 1);
      char* end = nullptr;
      check.threshold = std::strtod(value.c_str(), &end);
      if (!spec->has_threshold || value.empty() || *end != '\0' || !(check.threshold >= 0)) {
        return Status::InvalidArgument("--check: '" + item + "': " +
                                       (spec->has_threshold
                                            ? "threshold must be a non-negative number"
                                            : std::string(spec->name) + " takes no threshold") +
                                       allowed);
      }
    } else if (spec->has_threshold) {
      check.text = fmt::format("{}:{:g}", spec->name, spec->default_threshold);
    }
    checks.push_back(check);
    if (comma == text.size()) break;
  }
  return checks;
}

}  // namespace graphdump::analysis
