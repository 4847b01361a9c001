// compare: pairs kernels of two dumps and computes error metrics per tensor pair.
#include "graphdump/analysis/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <string_view>
#include <tuple>

#include "graphdump/analysis/parallel.h"
#include "graphdump/analysis/source_json.h"
#include "graphdump/internal/json_text.h"
#include "graphdump/stats.h"
#include "graphdump/tensor_view.h"

namespace graphdump::analysis {
namespace {

constexpr double kRelEps = 2.220446049250313e-16;
constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::nan("");

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "Default_net-Net_conv-Conv2d_Conv2D-op12" -> "Default_net-Net_conv-Conv2d_Conv2D".
std::string WithoutOpIds(const std::string& name) {
  static const std::regex kOpId("-op[0-9]+");
  return std::regex_replace(name, kOpId, "");
}

struct KernelPair {
  const KernelEntry* a = nullptr;
  const KernelEntry* b = nullptr;
  Pairing pairing = Pairing::kFullName;
};

// Pairs kernels by file name, then by name without op ids (k-th with k-th), then by execution
// order and op type (greedy, in order); always call k with call k.
std::vector<KernelPair> PairKernels(const std::vector<KernelEntry>& a,
                                    const std::vector<KernelEntry>& b,
                                    std::vector<const KernelEntry*>* only_a,
                                    std::vector<const KernelEntry*>* only_b) {
  std::vector<KernelPair> pairs;
  std::vector<bool> used_a(a.size()), used_b(b.size());
  std::map<std::pair<std::string, uint32_t>, size_t> by_name;
  for (size_t j = 0; j < b.size(); ++j) by_name.emplace(std::make_pair(b[j].op_name, b[j].call), j);
  for (size_t i = 0; i < a.size(); ++i) {
    auto it = by_name.find({a[i].op_name, a[i].call});
    if (it != by_name.end() && !used_b[it->second]) {
      pairs.push_back({&a[i], &b[it->second], Pairing::kFullName});
      used_a[i] = used_b[it->second] = true;
    }
  }
  using StrippedKey = std::pair<std::string, uint32_t>;  // (name without op ids, call)
  std::map<StrippedKey, std::vector<size_t>> b_stripped;
  for (size_t j = 0; j < b.size(); ++j) {
    if (!used_b[j]) b_stripped[{WithoutOpIds(b[j].op_name), b[j].call}].push_back(j);
  }
  std::map<StrippedKey, size_t> taken;
  for (size_t i = 0; i < a.size(); ++i) {
    if (used_a[i]) continue;
    const StrippedKey key{WithoutOpIds(a[i].op_name), a[i].call};
    auto it = b_stripped.find(key);
    if (it == b_stripped.end() || taken[key] >= it->second.size()) continue;
    const size_t j = it->second[taken[key]++];
    pairs.push_back({&a[i], &b[j], Pairing::kNameWithoutOpId});
    used_a[i] = used_b[j] = true;
  }
  size_t cursor = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (used_a[i] || a[i].is_parameter) continue;
    for (size_t j = cursor; j < b.size(); ++j) {
      if (used_b[j] || b[j].is_parameter || b[j].call != a[i].call ||
          Lower(b[j].op_type) != Lower(a[i].op_type))
        continue;
      pairs.push_back({&a[i], &b[j], Pairing::kExecutionOrder});
      used_a[i] = used_b[j] = true;
      cursor = j + 1;
      break;
    }
  }
  for (size_t i = 0; i < a.size(); ++i)
    if (!used_a[i]) only_a->push_back(&a[i]);
  for (size_t j = 0; j < b.size(); ++j)
    if (!used_b[j]) only_b->push_back(&b[j]);
  return pairs;
}

std::string ShapeText(const TensorEntry& t, const MappedNpy* npy) {
  if (npy) return ShapeToString(npy->info().shape);
  if (t.stats) return ShapeToString(t.stats->shape);
  return "";
}

std::string Describe(const TensorComparison& t) {
  return fmt::format("{} {}", t.is_input ? "input" : "output", t.slot);
}

// The statistics both sides can give, by statistic.csv column title.
std::map<std::string, double> StatsOf(const TensorEntry& t, const MappedNpy* npy) {
  std::map<std::string, double> out;
  if (npy) {
    // The core's statistics, so a file side is summarised exactly as statistic.csv would be.
    StatsAccumulator acc(npy->info().dtype, StatsRequest{});
    acc.Update(npy->data(), npy->info().data_bytes, npy->NumElements());
    const TensorStats s = acc.Finish();
    out["Max Value"] = s.max;
    out["Min Value"] = s.min;
    out["Avg Value"] = s.avg;
    out["L2Norm Value"] = s.l2norm;
    out["Count"] = static_cast<double>(s.count);
    out["NaN Count"] = static_cast<double>(s.nan_count);
    out["Negative Inf Count"] = static_cast<double>(s.negative_inf_count);
    out["Positive Inf Count"] = static_cast<double>(s.positive_inf_count);
    out["Zero Count"] = static_cast<double>(s.zero_count);
    out["Negative Zero Count"] = static_cast<double>(s.negative_count);
    out["Positive Zero Count"] = static_cast<double>(s.positive_count);
    return out;
  }
  if (!t.stats) return out;
  for (const auto& [column, text] : t.stats->values) {
    if (column == "MD5") continue;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str()) out[column] = v;
  }
  return out;
}

void CompareStatistics(const TensorEntry& ta, const MappedNpy* na, const TensorEntry& tb,
                       const MappedNpy* nb, const CompareOptions& options, TensorComparison* out) {
  out->mode = "statistic";
  if (ta.stats && tb.stats && ta.stats->values.count("MD5") && tb.stats->values.count("MD5") &&
      ta.stats->values.at("MD5") == tb.stats->values.at("MD5")) {
    out->reason = "statistics only: MD5 equal";
    return;
  }
  const auto sa = StatsOf(ta, na), sb = StatsOf(tb, nb);
  std::string failures;
  for (const auto& [column, va] : sa) {
    auto it = sb.find(column);
    if (it == sb.end()) continue;
    const double vb = it->second;
    const double diff = std::fabs(va - vb);
    out->stat_diffs.push_back({column, diff / (std::fabs(vb) + kRelEps)});
    const bool same_special = (std::isnan(va) && std::isnan(vb)) || va == vb;
    const PrecisionStandard standard = StandardFor(out->dtype_a, out->dtype_b);
    const double allowed = options.user_tolerances
                               ? options.atol + options.rtol * std::fabs(vb)
                               : standard.rtol * std::max(std::fabs(vb), standard.small_value);
    if (!same_special && !(diff <= allowed)) {
      if (!failures.empty()) failures += "; ";
      failures += fmt::format("{} {:.6g} vs {:.6g}", column, va, vb);
    }
  }
  if (out->stat_diffs.empty()) {
    out->verdict = Verdict::kWarning;
    out->reason = "no statistic column in common; nothing compared";
  } else if (!failures.empty()) {
    out->verdict = Verdict::kError;
    out->reason = "statistics differ: " + failures;
  } else {
    out->reason = "statistics only: within tolerance";
  }
}

bool IsFloating(const std::string& lower) {
  return lower.find("float") != std::string::npos || lower.find("complex") != std::string::npos;
}

// One dtype's standard (docs/precision.md). rtol and the small-value floors of float16,
// bfloat16 and float32 are msprobe's; float64 extends float32's (8 ulp, a smaller floor).
PrecisionStandard StandardOf(const std::string& dtype) {
  const std::string lower = Lower(dtype);
  if (lower == "float16") return {"float16", 0x1p-10, 0x1p-11};
  if (lower == "bfloat16") return {"bfloat16", 0x1p-8, 0x1p-8};
  if (lower == "float64" || lower == "complex128") return {"float64", 0x1p-49, 0x1p-30};
  if (!lower.empty() && !IsFloating(lower)) return {"exact", 0, 0};
  return {"float32", 0x1p-20, 0x1p-14};  // float32, complex64, unknown or missing
}

std::string Pow2Text(double v) {
  int exp = 0;
  if (v > 0 && std::frexp(v, &exp) == 0.5) return fmt::format("2^{}", exp - 1);
  return fmt::format("{:g}", v);
}

// "[5, 3] (row 5, flat index 15)": where flat scalar position `flat` of `a` lies in its shape;
// sets t->first_index.
std::string WhereText(int64_t flat, const MappedNpy& a, TensorComparison* t) {
  const NpyInfo& info = a.info();
  const int64_t element = flat / (IsComplex(info.dtype) ? 2 : 1);  // scalars: re, im
  t->first_index = UnravelIndex(element, info.shape, info.fortran_order);
  return fmt::format("{} ({}flat index {})", IndexText(t->first_index),
                     info.shape.size() >= 2 ? fmt::format("row {}, ", t->first_index[0]) : "",
                     flat);
}

void JudgeTensor(const CompareOptions& options, const PrecisionStandard& standard,
                 const MappedNpy& a, TensorComparison* t) {
  const PairMetrics& m = t->metrics;
  const bool both_floating = IsFloating(Lower(t->dtype_a)) && IsFloating(Lower(t->dtype_b));
  if (m.nonfinite_mismatches > 0) {
    t->verdict = Verdict::kError;
    t->reason = fmt::format(
        "NaN/Inf positions differ at {} elements (first at {}; A has {} NaN {} Inf, B "
        "has {} NaN {} Inf)",
        m.nonfinite_mismatches, WhereText(m.first_nonfinite_mismatch, a, t), m.nan_a, m.inf_a,
        m.nan_b, m.inf_b);
  } else if (m.allclose_failures > 0) {
    t->verdict = Verdict::kError;
    const std::string rule =
        options.user_tolerances
            ? fmt::format("|a-b| <= {:g} + {:g}*|b|", options.atol, options.rtol)
            : fmt::format("the {} standard |a-b| <= {}*max(|b|, {})", standard.dtype,
                          Pow2Text(standard.rtol), Pow2Text(standard.small_value));
    t->reason = fmt::format(
        "{} of {} elements fail {} (first at {}); norm rel err {:.6g}, max abs err "
        "{:.6g}, cosine {:.6g}",
        m.allclose_failures, m.elements, rule, WhereText(m.first_failure, a, t), m.norm_rel_err,
        m.max_abs_err, m.cosine);
  } else if (m.nan_a > 0 || m.inf_a > 0) {
    t->verdict = Verdict::kWarning;
    t->reason = fmt::format("NaN/Inf at the same positions on both sides ({} NaN, {} Inf)", m.nan_a,
                            m.inf_a);
  } else if (t->dtype_a != t->dtype_b && !both_floating) {
    // Floating dtypes differ in a precision comparison by design (bfloat16 against float32):
    // the pair is judged by the lower precision's standard, and that is not a warning.
    t->verdict = Verdict::kWarning;
    t->reason = fmt::format("dtypes differ ({} vs {}), compared in float64; within tolerance",
                            t->dtype_a, t->dtype_b);
  }
}

// One tensor pair: maps the files (when both exist) and fills metrics or statistics.
void CompareTensor(const TensorEntry* ta, const TensorEntry* tb, const CompareOptions& options,
                   TensorComparison* out, std::vector<Skipped>* skipped, std::mutex* mu) {
  out->dtype_a = ta->dtype ? std::string(DTypeName(*ta->dtype)) : ta->dtype_name;
  out->dtype_b = tb->dtype ? std::string(DTypeName(*tb->dtype)) : tb->dtype_name;
  out->path_a = ta->path;
  out->path_b = tb->path;
  out->error = kNaN;
  out->standard = options.user_tolerances ? "user" : StandardFor(out->dtype_a, out->dtype_b).dtype;
  std::unique_ptr<MappedNpy> na, nb;
  for (auto [t, npy] : {std::pair{ta, &na}, std::pair{tb, &nb}}) {
    if (t->path.empty()) continue;
    auto opened = OpenTensor(*t);
    if (!opened.ok()) {
      out->mode = "skipped";
      out->verdict = Verdict::kWarning;
      out->reason = "skipped: " + opened.status().message();
      std::lock_guard<std::mutex> lock(*mu);
      skipped->push_back({t->path, opened.status().message()});
      return;
    }
    *npy = std::move(opened).value();
  }
  out->shape_a = ShapeText(*ta, na.get());
  out->shape_b = ShapeText(*tb, nb.get());
  if (!out->shape_a.empty() && !out->shape_b.empty() && out->shape_a != out->shape_b) {
    out->mode = na && nb ? "tensor" : "statistic";
    out->verdict = Verdict::kError;
    out->reason = "shape " + out->shape_a + " vs " + out->shape_b;
    out->error = kInf;
    return;
  }
  if (!na || !nb) {
    CompareStatistics(*ta, na.get(), *tb, nb.get(), options, out);
    return;
  }
  out->mode = "tensor";
  // Both sides in Fortran order still pair element for element; a mixed pair would not.
  if (na->info().fortran_order != nb->info().fortran_order && na->info().shape.size() > 1) {
    out->verdict = Verdict::kWarning;
    out->reason = std::string("not compared: fortran_order differs (A ") +
                  (na->info().fortran_order ? "True" : "False") + ", B " +
                  (nb->info().fortran_order ? "True" : "False") + ")";
    return;
  }
  if (na->NumElements() != nb->NumElements()) {  // same shape text, cannot happen; be safe
    out->verdict = Verdict::kError;
    out->reason = "element counts differ";
    return;
  }
  const PrecisionStandard standard = StandardFor(out->dtype_a, out->dtype_b);
  if (options.user_tolerances) {
    out->standard = "user";
    out->metrics = ComparePair(*na, *nb, options.atol, options.rtol);
  } else {
    out->standard = standard.dtype;
    out->metrics = ComparePair(*na, *nb, 0, standard.rtol, standard.small_value);
  }
  out->error = out->metrics.nonfinite_mismatches > 0 ? kInf : out->metrics.norm_rel_err;
  JudgeTensor(options, standard, *na, out);
}

struct TensorTask {
  size_t kernel;
  size_t tensor;
  const TensorEntry* a;
  const TensorEntry* b;
};

void AddKernelPair(const KernelPair& p, const RankEntry& ra, const GraphEntry& ga,
                   const GraphEntry& gb, int64_t iteration, const DumpIndex& index_a,
                   const DumpIndex& index_b, CompareResult* result,
                   std::vector<TensorTask>* tasks) {
  KernelComparison k;
  k.rank = ra.rank;
  k.graph_id = ga.graph_id;
  k.iteration = iteration;
  k.call = p.a->call;
  k.calls = p.a->calls;
  k.order = p.a->order;
  k.name_a = p.a->full_name;
  k.name_b = p.b->full_name;
  k.op_type = p.a->op_type;
  k.pairing = p.pairing;
  k.role = !p.a->is_parameter ? KernelRole::kOperator
           : iteration < 0    ? KernelRole::kConstant
                              : KernelRole::kParameter;
  k.source_line = index_a.SourceLine(ga, k.name_a);
  k.source_trace = index_a.SourceTrace(ga, k.name_a);
  if (k.source_line.empty()) {
    k.source_line = index_b.SourceLine(gb, k.name_b);
    k.source_trace = index_b.SourceTrace(gb, k.name_b);
  }
  const size_t kernel_index = result->kernels.size();
  std::vector<bool> used_b(p.b->tensors.size());
  for (const TensorEntry& ta : p.a->tensors) {
    TensorComparison tc;
    tc.is_input = ta.is_input;
    tc.slot = ta.slot;
    auto tb = std::find_if(p.b->tensors.begin(), p.b->tensors.end(), [&](const TensorEntry& t) {
      return t.is_input == ta.is_input && t.slot == ta.slot;
    });
    if (tb == p.b->tensors.end()) {
      tc.mode = "missing";
      tc.error = kNaN;
      tc.verdict = Verdict::kWarning;
      tc.reason = Describe(tc) + " only in A";
      tc.path_a = ta.path;
      tc.dtype_a = ta.dtype_name;
    } else {
      used_b[tb - p.b->tensors.begin()] = true;
      tasks->push_back({kernel_index, k.tensors.size(), &ta, &*tb});
    }
    k.tensors.push_back(std::move(tc));
  }
  for (size_t j = 0; j < p.b->tensors.size(); ++j) {
    if (used_b[j]) continue;
    TensorComparison tc;
    tc.is_input = p.b->tensors[j].is_input;
    tc.slot = p.b->tensors[j].slot;
    tc.mode = "missing";
    tc.error = kNaN;
    tc.verdict = Verdict::kWarning;
    tc.reason = Describe(tc) + " only in B";
    tc.path_b = p.b->tensors[j].path;
    tc.dtype_b = p.b->tensors[j].dtype_name;
    k.tensors.push_back(std::move(tc));
  }
  result->kernels.push_back(std::move(k));
}

template <typename T, typename Key>
const T* FindMatching(const std::vector<T>& items, const T& like, Key key) {
  for (const T& item : items)
    if (key(item) == key(like)) return &item;
  return items.size() == 1 ? &items.front() : nullptr;
}

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

// Backward kernels (Gradients/{forward scope}/{Node}-op{N}) compute from tensors the forward
// pass saved, which are not dumped as their inputs. Their inherited error therefore also counts
// the forward kernels of their scope: the largest tensor error of the operator kernels whose
// full name lies below each scope, by (rank, graph, iteration, scope).
using ScopeKey = std::tuple<uint32_t, uint32_t, int64_t, uint32_t, std::string>;

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

// The forward error a backward kernel inherits through saved tensors; NaN when none is known.
double SavedTensorError(const std::map<ScopeKey, double>& forward, const KernelComparison& k) {
  if (k.name_a.rfind(kGradients, 0) != 0) return kNaN;
  const size_t slash = k.name_a.rfind('/');
  if (slash <= kGradients.size()) return kNaN;
  const std::string scope = k.name_a.substr(kGradients.size(), slash - kGradients.size());
  auto it = forward.find({k.rank, k.graph_id, k.iteration, k.call, scope});
  return it == forward.end() ? kNaN : it->second;
}

// Fills the kernel's attribution fields, then its verdict (compare.h states the rules).
// `saved_error`: a backward kernel's SavedTensorError (counted as an input's), else NaN.
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
  const double in = k->input_error, out = k->output_error;
  if (!std::isnan(out)) {
    if (std::isnan(in)) {
      k->added_error = out;
    } else if (std::isinf(in)) {  // the inputs already disagree in shape or NaN/Inf positions
      k->growth = std::isinf(out) ? 1.0 : 0.0;
      k->added_error = 0;
    } else {
      const double base = std::max(in, rtol);
      k->growth = base > 0 ? out / base : (out > 0 ? kInf : 0.0);
      k->added_error = out - in;
    }
  }
  const bool far_from_close = !std::isnan(in) && in < 0.1 && out > 0.5;
  k->adds_error = k->role == KernelRole::kOperator && output_fails &&
                  (std::isnan(in) || k->growth >= kGrowthLimit || far_from_close);
  if (k->role != KernelRole::kOperator) {
    WorstTensor(k);
    return;
  }
  // An operator: a failing input was made upstream (by an earlier kernel, or a graph input or
  // parameter, listed apart), so it is at most a warning, and only where no output was
  // measured; a measured output's failure is judged below.
  for (const TensorComparison& t : k->tensors) {
    Verdict v = t.verdict;
    std::string why = t.reason;
    if (v == Verdict::kError && t.is_input) {
      if (!std::isnan(out)) continue;
      v = Verdict::kWarning;
      why = "inherited (no output compared): " + why;
    } else if (v == Verdict::kError && !std::isnan(t.error)) {
      continue;
    }
    if (v > k->verdict || (k->reason.empty() && v == k->verdict && v != Verdict::kPass)) {
      k->verdict = v;
      k->reason = Describe(t) + ": " + why;
    }
  }
  if (!failing) return;
  const std::string inputs =
      std::isnan(in) ? std::string("no input compared")
                     : fmt::format("inputs {} (growth x{:.3g}{})", ErrText(in), k->growth,
                                   k->adds_error ? "" : fmt::format(" < x{:g}", kGrowthLimit));
  if (k->adds_error) {
    k->verdict = Verdict::kError;
    k->reason = fmt::format("adds error: {} norm rel err {} vs {}; {}: {}", Describe(*failing),
                            ErrText(out), inputs, Describe(*failing), failing->reason);
  } else if (k->verdict != Verdict::kError) {
    k->verdict = Verdict::kWarning;
    k->reason = fmt::format("inherits error: {} norm rel err {} vs {}; {}: {}", Describe(*failing),
                            ErrText(out), inputs, Describe(*failing), failing->reason);
  }
}

// Identity of a reference tensor's values, to tell which inputs an earlier kernel produced.
using Fingerprint = std::tuple<std::string, std::string, int64_t, double, double>;

std::optional<Fingerprint> FingerprintOf(const TensorComparison& t) {
  if (t.mode != "tensor" || t.shape_b.empty() || t.metrics.elements == 0) return std::nullopt;
  return Fingerprint{t.shape_b, Lower(t.dtype_b), t.metrics.elements, t.metrics.ref_sum,
                     t.metrics.ref_sum_sq};
}

// first_failure, first_adding_error, contributors, differing sources and graph inputs.
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
    size_t end = begin;
    while (end < ks.size() && ks[end].rank == ks[begin].rank &&
           ks[end].graph_id == ks[begin].graph_id && ks[end].iteration == ks[begin].iteration &&
           ks[end].call == ks[begin].call)
      ++end;
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

}  // namespace

PrecisionStandard StandardFor(const std::string& dtype_a, const std::string& dtype_b) {
  const PrecisionStandard a = StandardOf(dtype_a), b = StandardOf(dtype_b);
  if (a.dtype == "exact") return b;
  if (b.dtype == "exact") return a;
  return a.rtol >= b.rtol ? a : b;  // the lower precision
}

const char* KernelRoleName(KernelRole r) {
  switch (r) {
    case KernelRole::kOperator:
      return "operator";
    case KernelRole::kParameter:
      return "parameter";
    case KernelRole::kConstant:
      return "constant";
  }
  return "?";
}

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "pass";
    case Verdict::kWarning:
      return "warning";
    case Verdict::kError:
      return "error";
  }
  return "?";
}

const char* PairingName(Pairing p) {
  switch (p) {
    case Pairing::kFullName:
      return "name";
    case Pairing::kNameWithoutOpId:
      return "name-without-op-id";
    case Pairing::kExecutionOrder:
      return "execution-order";
  }
  return "?";
}

CompareResult CompareDumps(const DumpIndex& a, const DumpIndex& b, const CompareOptions& options) {
  CompareResult result;
  result.skipped = a.skipped;
  result.skipped.insert(result.skipped.end(), b.skipped.begin(), b.skipped.end());
  std::vector<TensorTask> tasks;
  for (const RankEntry& ra : a.ranks) {
    const RankEntry* rb = FindMatching(b.ranks, ra, [](const RankEntry& r) { return r.rank; });
    if (!rb) continue;
    for (const GraphEntry& ga : ra.graphs) {
      const GraphEntry* gb =
          FindMatching(rb->graphs, ga, [](const GraphEntry& g) { return g.graph_id; });
      if (!gb) continue;
      for (const IterationEntry& ia : ga.iterations) {
        if (options.iteration && ia.iteration != *options.iteration) continue;
        auto ib =
            std::find_if(gb->iterations.begin(), gb->iterations.end(),
                         [&](const IterationEntry& i) { return i.iteration == ia.iteration; });
        if (ib == gb->iterations.end()) continue;
        std::vector<const KernelEntry*> only_a, only_b;
        for (const KernelPair& p : PairKernels(ia.kernels, ib->kernels, &only_a, &only_b)) {
          AddKernelPair(p, ra, ga, *gb, ia.iteration, a, b, &result, &tasks);
          if (p.a->call == 0 && p.a->calls != p.b->calls) {
            result.call_count_differences.push_back({ra.rank, ga.graph_id, ia.iteration,
                                                     p.a->full_name, p.b->full_name, p.a->calls,
                                                     p.b->calls});
          }
        }
        for (const KernelEntry* k : only_a)
          result.unpaired.push_back(
              {'A', ra.rank, ga.graph_id, ia.iteration, k->call, k->full_name});
        for (const KernelEntry* k : only_b)
          result.unpaired.push_back(
              {'B', ra.rank, ga.graph_id, ia.iteration, k->call, k->full_name});
      }
    }
  }
  std::mutex mu;
  ParallelFor(tasks.size(), options.threads > 0 ? options.threads : DefaultThreads(),
              options.progress ? "compare" : "", [&](size_t i) {
                const TensorTask& t = tasks[i];
                CompareTensor(t.a, t.b, options, &result.kernels[t.kernel].tensors[t.tensor],
                              &result.skipped, &mu);
              });
  const std::map<ScopeKey, double> forward = ForwardScopeErrors(result.kernels);
  for (KernelComparison& k : result.kernels) {
    Attribute(options, SavedTensorError(forward, k), &k);
    (k.verdict == Verdict::kPass      ? result.passed
     : k.verdict == Verdict::kWarning ? result.warnings
                                      : result.errors)++;
  }
  std::stable_sort(result.kernels.begin(), result.kernels.end(),
                   [](const KernelComparison& x, const KernelComparison& y) {
                     auto key = [](const KernelComparison& k) {
                       return std::make_tuple(k.rank, k.graph_id, k.iteration < 0, k.iteration,
                                              k.call, k.order);
                     };
                     return key(x) < key(y);
                   });
  Summarize(&result);
  return result;
}

namespace {

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string Num(double v) { return fmt::format("{:.9g}", v); }

}  // namespace

std::string CompareResultCsv(const CompareResult& result) {
  std::string out =
      "rank,graph_id,iteration,call,order,kernel_a,kernel_b,op_type,pairing,io,slot,mode,dtype_a,"
      "dtype_b,shape_a,shape_b,elements,cosine,max_abs_err,max_rel_err,rmse,"
      "rel_err_below_0.1pct,rel_err_below_0.5pct,allclose_failures,nan_a,nan_b,inf_a,inf_b,"
      "nonfinite_mismatches,verdict,kernel_verdict,reason,source_line,path_a,path_b,standard,"
      "norm_rel_err,error,role,input_error,output_error,growth,added_error,adds_error,"
      "contribution_rank\n";
  for (const KernelComparison& k : result.kernels) {
    for (const TensorComparison& t : k.tensors) {
      const PairMetrics& m = t.metrics;
      const bool has = t.mode == "tensor" && t.reason.rfind("shape", 0) != 0;
      auto metric = [&](double v) { return has ? Num(v) : std::string(); };
      auto count = [&](int64_t v) { return has ? std::to_string(v) : std::string(); };
      auto known = [](double v) { return std::isnan(v) ? std::string() : Num(v); };
      out += fmt::format(
          "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},"
          "{},{},{},{},{},{},",
          k.rank, k.graph_id, k.iteration, k.call, k.order, CsvField(k.name_a), CsvField(k.name_b),
          CsvField(k.op_type), PairingName(k.pairing), t.is_input ? "input" : "output", t.slot,
          t.mode, t.dtype_a, t.dtype_b, CsvField(t.shape_a), CsvField(t.shape_b), count(m.elements),
          metric(m.cosine), metric(m.max_abs_err), metric(m.max_rel_err), metric(m.rmse),
          metric(m.rel_err_below_0_1pct), metric(m.rel_err_below_0_5pct),
          count(m.allclose_failures), count(m.nan_a), count(m.nan_b), count(m.inf_a),
          count(m.inf_b), count(m.nonfinite_mismatches), VerdictName(t.verdict),
          VerdictName(k.verdict), CsvField(t.reason), CsvField(k.source_line), CsvField(t.path_a),
          CsvField(t.path_b));
      out += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", t.standard, metric(m.norm_rel_err),
                         known(t.error), KernelRoleName(k.role), known(k.input_error),
                         known(k.output_error), known(k.growth), known(k.added_error),
                         k.adds_error ? "true" : "false", k.contribution_rank);
    }
  }
  return out;
}

std::string CompareResultJson(const CompareResult& result) {
  using nlohmann::json;
  json j;
  j["summary"] = {{"kernels", result.kernels.size()},   {"pass", result.passed},
                  {"warning", result.warnings},         {"error", result.errors},
                  {"unpaired", result.unpaired.size()}, {"skipped", result.skipped.size()}};
  auto finite = [](double v) { return std::isfinite(v) ? json(v) : json(fmt::format("{}", v)); };
  // NaN: not measured (null); infinities as text, like `finite`.
  auto known = [&](double v) { return std::isnan(v) ? json(nullptr) : finite(v); };
  auto attribution = [&](const KernelComparison& k, json* o) {
    (*o)["role"] = KernelRoleName(k.role);
    (*o)["input_error"] = known(k.input_error);
    (*o)["output_error"] = known(k.output_error);
    (*o)["growth"] = known(k.growth);
    (*o)["added_error"] = known(k.added_error);
    (*o)["adds_error"] = k.adds_error;
    (*o)["contribution_rank"] = k.contribution_rank;
  };
  // The object of first_failure, first_adding_error and each contributor.
  auto brief = [&](const KernelComparison& f) {
    json o = {{"kernel", f.name_a},   {"iteration", f.iteration},
              {"call", f.call},       {"graph_id", f.graph_id},
              {"rank", f.rank},       {"order", f.order},
              {"op_type", f.op_type}, {"source_line", f.source_line},
              {"reason", f.reason},   {"source_trace", SourceTraceJson<json>(f.source_trace)}};
    attribution(f, &o);
    return o;
  };
  json kernels = json::array();
  for (const KernelComparison& k : result.kernels) {
    json tensors = json::array();
    for (const TensorComparison& t : k.tensors) {
      json jt = {{"io", t.is_input ? "input" : "output"},
                 {"slot", t.slot},
                 {"mode", t.mode},
                 {"dtype_a", t.dtype_a},
                 {"dtype_b", t.dtype_b},
                 {"shape_a", t.shape_a},
                 {"shape_b", t.shape_b},
                 {"verdict", VerdictName(t.verdict)},
                 {"reason", t.reason},
                 {"first_index", t.first_index.empty() ? json(nullptr) : json(t.first_index)},
                 {"standard", t.standard},
                 {"error", known(t.error)},
                 {"path_a", t.path_a},
                 {"path_b", t.path_b}};
      if (t.mode == "tensor") {
        const PairMetrics& m = t.metrics;
        jt["metrics"] = {{"elements", m.elements},
                         {"cosine", finite(m.cosine)},
                         {"max_abs_err", finite(m.max_abs_err)},
                         {"max_rel_err", finite(m.max_rel_err)},
                         {"rmse", finite(m.rmse)},
                         {"norm_rel_err", finite(m.norm_rel_err)},
                         {"rel_err_below_0.1pct", m.rel_err_below_0_1pct},
                         {"rel_err_below_0.5pct", m.rel_err_below_0_5pct},
                         {"allclose_failures", m.allclose_failures},
                         {"nan_a", m.nan_a},
                         {"nan_b", m.nan_b},
                         {"inf_a", m.inf_a},
                         {"inf_b", m.inf_b},
                         {"nonfinite_mismatches", m.nonfinite_mismatches}};
      }
      if (!t.stat_diffs.empty()) {
        json diffs = json::object();
        for (const auto& [name, v] : t.stat_diffs) diffs[name] = finite(v);
        jt["statistic_rel_diffs"] = diffs;
      }
      tensors.push_back(jt);
    }
    json jk = {{"rank", k.rank},
               {"graph_id", k.graph_id},
               {"iteration", k.iteration},
               {"call", k.call},
               {"order", k.order},
               {"kernel_a", k.name_a},
               {"kernel_b", k.name_b},
               {"op_type", k.op_type},
               {"pairing", PairingName(k.pairing)},
               {"source_line", k.source_line},
               {"source_trace", SourceTraceJson<json>(k.source_trace)},
               {"verdict", VerdictName(k.verdict)},
               {"reason", k.reason},
               {"tensors", tensors}};
    attribution(k, &jk);
    kernels.push_back(std::move(jk));
  }
  j["kernels"] = kernels;
  j["first_failure"] =
      result.first_failure >= 0 ? brief(result.kernels[result.first_failure]) : json(nullptr);
  j["first_adding_error"] = result.first_adding_error >= 0
                                ? brief(result.kernels[result.first_adding_error])
                                : json(nullptr);
  json contributors = json::array();
  for (int64_t i : result.contributors) contributors.push_back(brief(result.kernels[i]));
  j["contributors"] = contributors;
  json sources = json::array();
  for (int64_t i : result.differing_sources) {
    const KernelComparison& k = result.kernels[i];
    sources.push_back({{"kernel", k.name_a},
                       {"role", KernelRoleName(k.role)},
                       {"iteration", k.iteration},
                       {"graph_id", k.graph_id},
                       {"rank", k.rank},
                       {"error", known(k.output_error)},
                       {"reason", k.reason}});
  }
  j["differing_sources"] = sources;
  json inputs = json::array();
  for (const auto& [i, input_slot] : result.differing_graph_inputs) {
    const KernelComparison& k = result.kernels[i];
    // A copy: clang 14 refuses a lambda capturing a structured binding.
    const uint32_t slot = input_slot;
    auto t = std::find_if(k.tensors.begin(), k.tensors.end(),
                          [&](const TensorComparison& x) { return x.is_input && x.slot == slot; });
    inputs.push_back({{"kernel", k.name_a},
                      {"slot", slot},
                      {"iteration", k.iteration},
                      {"call", k.call},
                      {"graph_id", k.graph_id},
                      {"rank", k.rank},
                      {"error", t == k.tensors.end() ? json(nullptr) : known(t->error)},
                      {"reason", t == k.tensors.end() ? std::string() : t->reason}});
  }
  j["differing_graph_inputs"] = inputs;
  json unpaired = json::array();
  for (const UnpairedKernel& u : result.unpaired) {
    unpaired.push_back({{"side", std::string(1, u.side)},
                        {"rank", u.rank},
                        {"graph_id", u.graph_id},
                        {"iteration", u.iteration},
                        {"call", u.call},
                        {"kernel", u.full_name}});
  }
  j["unpaired"] = unpaired;
  json calls = json::array();
  for (const CallCountDifference& d : result.call_count_differences) {
    calls.push_back({{"rank", d.rank},
                     {"graph_id", d.graph_id},
                     {"iteration", d.iteration},
                     {"kernel_a", d.name_a},
                     {"kernel_b", d.name_b},
                     {"calls_a", d.calls_a},
                     {"calls_b", d.calls_b}});
  }
  j["call_count_differences"] = calls;
  json skipped = json::array();
  for (const Skipped& s : result.skipped)
    skipped.push_back({{"path", s.path}, {"reason", s.reason}});
  j["skipped"] = skipped;
  return internal::JsonText(j, 2);
}

}  // namespace graphdump::analysis
