// The verdict model of precision debugging and the float32 advice that follows it
// (docs/precision.md, "Verdicts").
#include "graphdump/analysis/precision_verdict.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "graphdump/internal/compare_parts.h"

namespace graphdump::analysis {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// float32 `f` rounded to bfloat16 (ties to even), as a float32.
float RoundBFloat16(float f) {
  if (!std::isfinite(f)) return f;
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits += 0x7fff + ((bits >> 16) & 1);
  bits &= 0xffff0000u;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

// `v` rounded to float16 (ties to even): 11 significant bits, subnormals below 2^-14, overflow
// to infinity above 65504.
double RoundFloat16(double v) {
  if (!std::isfinite(v) || v == 0) return v;
  int exponent = 0;
  std::frexp(v, &exponent);  // |v| = m * 2^exponent, 0.5 <= m < 1
  const int lsb = std::max(exponent - 11, -24);  // the weight of the last significant bit
  const double rounded = std::ldexp(std::nearbyint(std::ldexp(v, -lsb)), lsb);
  return std::fabs(rounded) > 65504 ? std::copysign(kInf, v) : rounded;
}

std::string Num(double v) { return fmt::format("{:.3g}", v); }

// "Default/mul-op4 at model.py:19" or the bare name.
std::string KernelAt(const KernelComparison& k) {
  return k.source_line.empty() ? k.name_a : k.name_a + " at " + k.source_line;
}

}  // namespace

double UnitRoundoff(const std::string& dtype) {
  const std::string d = compare_internal::Lower(dtype);
  if (d == "bfloat16") return std::ldexp(1.0, -8);
  if (d == "float16") return std::ldexp(1.0, -11);
  if (d == "float64" || d == "complex128") return std::ldexp(1.0, -53);
  return std::ldexp(1.0, -24);
}

double RoundToDtype(double v, const std::string& dtype) {
  const std::string d = compare_internal::Lower(dtype);
  if (d == "bfloat16") return RoundBFloat16(static_cast<float>(v));
  if (d == "float16") return RoundFloat16(v);
  if (d == "float32") return static_cast<float>(v);
  return v;
}

bool LowerPrecision(const std::string& low, const std::string& high) {
  auto rank = [](const std::string& dtype) {
    const std::string d = compare_internal::Lower(dtype);
    return d == "bfloat16" || d == "float16" ? 1 : d == "float32" ? 2 : d == "float64" ? 3 : 0;
  };
  return rank(low) > 0 && rank(high) > rank(low);
}

const char* PrecisionVerdictName(PrecisionVerdict verdict) {
  switch (verdict) {
    case PrecisionVerdict::kAccurate:
      return "accurate";
    case PrecisionVerdict::kInaccurate:
      return "inaccurate";
    case PrecisionVerdict::kIllConditioned:
      return "ill-conditioned";
    case PrecisionVerdict::kInherits:
      return "inherits";
    case PrecisionVerdict::kAddsError:
      return "adds error";
  }
  return "?";
}

PrecisionJudgement JudgePrecision(const PrecisionEvidence& e) {
  PrecisionJudgement j;
  const double in = e.input_difference, out = e.output_error;
  if (!std::isnan(in) && !std::isnan(out)) {
    if (std::isinf(in)) {  // the inputs already disagree in shape or NaN/Inf positions
      j.growth = std::isinf(out) ? 1.0 : 0.0;
    } else {
      const double base = std::max(in, e.growth_floor);
      j.growth = base > 0 ? out / base : (out > 0 ? kInf : 0.0);
    }
  }
  j.inputs_near_rounding = !std::isnan(in) && !std::isnan(e.input_rounding) &&
                           in <= kRoundingMultiple * e.input_rounding;
  j.magnifies = std::isnan(in) || j.growth >= kGrowthLimit || (in < 0.1 && out > 0.5);
  auto known = [](double v) { return std::isnan(v) ? 0.0 : v; };
  if (!e.significant) {
    j.verdict = PrecisionVerdict::kAccurate;
  } else if (!std::isnan(e.own) && e.own > e.own_floor && e.own >= known(e.conditioning) &&
             e.own >= known(e.inherited)) {
    j.verdict = PrecisionVerdict::kInaccurate;
  } else if (e.discrete_upstream) {
    j.verdict = PrecisionVerdict::kInherits;
  } else if (j.magnifies || e.discrete) {
    j.verdict = std::isnan(e.own) ? PrecisionVerdict::kAddsError : PrecisionVerdict::kIllConditioned;
  } else {
    j.verdict = PrecisionVerdict::kInherits;
  }
  return j;
}

PrecisionChain InputChain(const CompareResult& r, int64_t kernel) {
  using compare_internal::Fingerprint;
  using compare_internal::FingerprintOf;
  PrecisionChain chain;
  const auto& ks = r.kernels;
  if (kernel < 0 || static_cast<size_t>(kernel) >= ks.size()) return chain;
  const KernelComparison& judged = ks[kernel];
  auto same_run = [&](const KernelComparison& k) {
    return k.rank == judged.rank && k.graph_id == judged.graph_id &&
           k.iteration == judged.iteration && k.call == judged.call;
  };
  // Who holds which reference values: operators by their outputs (in execution order, the
  // order of `kernels`), parameters by their tensors.
  std::map<Fingerprint, std::vector<int64_t>> made_by;
  std::map<Fingerprint, int64_t> held_by;
  for (size_t i = 0; i < ks.size(); ++i) {
    if (!same_run(ks[i])) continue;
    for (const TensorComparison& t : ks[i].tensors) {
      auto f = FingerprintOf(t);
      if (!f) continue;
      if (ks[i].role == KernelRole::kParameter) {
        held_by.emplace(*f, static_cast<int64_t>(i));
      } else if (ks[i].role == KernelRole::kOperator && !t.is_input) {
        made_by[*f].push_back(static_cast<int64_t>(i));
      }
    }
  }
  std::set<int64_t> operators{kernel}, sources;
  std::vector<int64_t> todo{kernel};
  while (!todo.empty()) {
    const int64_t at = todo.back();
    todo.pop_back();
    for (const TensorComparison& t : ks[at].tensors) {
      auto f = FingerprintOf(t);
      if (!t.is_input || !f) continue;
      int64_t producer = -1;
      if (auto it = made_by.find(*f); it != made_by.end()) {
        for (int64_t i : it->second) {
          if (i < at) producer = i;  // the last one before
        }
      }
      if (producer >= 0) {
        if (operators.insert(producer).second) todo.push_back(producer);
        continue;
      }
      auto held = held_by.find(*f);
      if (held == held_by.end() || !sources.insert(held->second).second) continue;
      for (const TensorComparison& p : ks[held->second].tensors) {
        if (!LowerPrecision(p.dtype_a, p.dtype_b)) continue;
        chain.parameters.push_back({held->second, at, p.error, p.dtype_a, p.dtype_b});
        break;
      }
    }
  }
  chain.kernels.assign(operators.begin(), operators.end());
  chain.upstream = judged.error_origin == kernel ? -1 : judged.error_origin;
  std::sort(chain.parameters.begin(), chain.parameters.end(),
            [](const RoundedSource& a, const RoundedSource& b) { return a.source < b.source; });
  return chain;
}

std::vector<std::string> KeepEntries(const CompareResult& r, const PrecisionChain& chain) {
  std::vector<std::string> entries;
  for (int64_t i : chain.kernels) entries.push_back(r.kernels[i].name_a);
  for (const RoundedSource& p : chain.parameters) entries.push_back(r.kernels[p.source].name_a);
  return entries;
}

std::string PrecisionChainText(const CompareResult& r, const PrecisionChain& chain,
                               const std::string& indent) {
  std::string out;
  if (chain.kernels.empty()) return out;
  out += indent + fmt::format(
                      "keep in float32 (--keep-fp32) the kernel and the chain that produces its "
                      "inputs ({} kernel{}{}):\n",
                      chain.kernels.size(), chain.kernels.size() == 1 ? "" : "s",
                      chain.parameters.empty()
                          ? std::string()
                          : fmt::format(", {} parameter{}", chain.parameters.size(),
                                        chain.parameters.size() == 1 ? "" : "s"));
  for (int64_t i : chain.kernels) out += indent + "  " + KernelAt(r.kernels[i]) + "\n";
  for (const RoundedSource& p : chain.parameters) {
    const KernelComparison& source = r.kernels[p.source];
    const PrecisionStandard standard = StandardFor(p.dtype_a, p.dtype_b);
    out += indent + fmt::format(
                        "  parameter {}: rounded to {} (norm rel err {}{}), read by {}\n",
                        source.name_a, p.dtype_a, Num(p.error),
                        source.verdict == Verdict::kPass
                            ? ", within the " + standard.dtype + " standard"
                            : std::string(),
                        KernelAt(r.kernels[p.consumer]));
  }
  return out;
}

nlohmann::json PrecisionChainJson(const CompareResult& r, const PrecisionChain& chain) {
  using nlohmann::json;
  json kernels = json::array(), parameters = json::array();
  for (int64_t i : chain.kernels) {
    const KernelComparison& k = r.kernels[i];
    kernels.push_back({{"kernel", k.name_a}, {"op_type", k.op_type}, {"source_line", k.source_line}});
  }
  for (const RoundedSource& p : chain.parameters) {
    const KernelComparison& consumer = r.kernels[p.consumer];
    parameters.push_back({{"parameter", r.kernels[p.source].name_a},
                          {"dtype", p.dtype_a},
                          {"reference_dtype", p.dtype_b},
                          {"error", std::isfinite(p.error) ? json(p.error) : json()},
                          {"within_standard", r.kernels[p.source].verdict == Verdict::kPass},
                          {"consumer", consumer.name_a},
                          {"consumer_source_line", consumer.source_line}});
  }
  return {{"keep_fp32", KeepEntries(r, chain)},
          {"kernels", kernels},
          {"parameters", parameters},
          {"upstream", chain.upstream >= 0 ? json(r.kernels[chain.upstream].name_a) : json()}};
}

}  // namespace graphdump::analysis
