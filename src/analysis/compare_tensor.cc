// compare: one tensor pair's metrics, statistics and verdict (docs/analysis.md, "Metrics per
// tensor pair"), and the precision standards (docs/precision.md).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graphdump/analysis/precision_verdict.h"
#include "graphdump/internal/compare_parts.h"
#include "graphdump/statistic_catalogue.h"
#include "graphdump/stats.h"
#include "graphdump/tensor_view.h"

namespace graphdump::analysis {
namespace compare_internal {
namespace {

constexpr double kRelEps = 2.220446049250313e-16;
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string ShapeText(const TensorEntry& t, const MappedNpy* npy) {
  if (npy) return ShapeToString(npy->info().shape);
  if (t.stats) return ShapeToString(t.stats->shape);
  return "";
}


// One statistic of one side: its value, and the statistic.csv text it was read from (empty for
// a value computed here) with its catalogue entry, which say how far the value can be from the
// tensor's true statistic (PrintedError).
struct StatValue {
  double value = 0;
  std::string_view text;
  const StatisticInfo* info = nullptr;
};

// Half a unit in the last digit of a statistic.csv value. Values are printed with 6 significant
// digits and trailing zeros dropped (docs/file-format.md): "1e+06" stands for 1.00000e+06, so
// the precision is 6 digits, or the digits the text shows when it shows more (a dump written
// with more digits). Counts are printed as integers: exact. A computed value: exact.
double PrintedError(const StatValue& v) {
  const bool is_count = v.info && v.info->format == StatFormat::kCount;
  if (v.text.empty() || is_count || v.value == 0 || !std::isfinite(v.value)) return 0;
  int digits = 0;
  for (char c : v.text) {
    if (c == 'e' || c == 'E') break;
    if (c >= '0' && c <= '9' && (digits > 0 || c != '0')) ++digits;
  }
  const int shown = std::max(digits, 6);
  const int exponent = static_cast<int>(std::floor(std::log10(std::fabs(v.value))));
  return 0.5 * std::pow(10.0, exponent - (shown - 1));
}

// A statistic.csv cell as strtod reads it (a number at its start; NaN and infinities spelled
// as C does); false when it starts with none.
bool CellNumber(std::string_view cell, double* v) {
  const auto [end, error] = std::from_chars(cell.data(), cell.data() + cell.size(), *v);
  if (error == std::errc() && end == cell.data() + cell.size()) return true;
  // What from_chars does not read whole (a sign '+', spaces, hexadecimal, text after the
  // number): strtod, as always.
  const std::string text(cell);
  char* stop = nullptr;
  *v = std::strtod(text.c_str(), &stop);
  return stop != text.c_str();
}

// The statistics both sides can give, by statistic.csv column title (views of the titles of the
// catalogue or of the tensor's statistic.csv), sorted by title.
using Stats = std::vector<std::pair<std::string_view, StatValue>>;

Stats StatsOf(const TensorEntry& t, const MappedNpy* npy) {
  Stats out;
  if (npy) {
    // The core's statistics, so a file side is summarised exactly as statistic.csv would be.
    StatsAccumulator acc(npy->info().dtype, StatsRequest{});
    acc.Update(npy->data(), npy->info().data_bytes, npy->NumElements());
    const NanPropagatingStats s = acc.Finish();
    for (const StatisticInfo& info : StatisticCatalogue()) {
      if (info.comparable && info.value != nullptr) {
        out.push_back({info.title, {info.value(s), {}, &info}});
      }
    }
  } else if (t.stats) {
    out.reserve(t.stats->values.size());
    t.stats->values.ForEach([&](const std::string& column, std::string_view cell) {
      const StatisticInfo* info = FindStatisticByTitle(column);
      if (info && !info->comparable) return;
      double v = 0;
      if (CellNumber(cell, &v)) out.push_back({column, {v, cell, info}});
    });
  }
  // Titles are unique (a statistic.csv title given twice keeps its last cell). Insertion sort: a
  // row has a few statistics, and a stable_sort allocates.
  for (size_t i = 1; i < out.size(); ++i) {
    for (size_t j = i; j > 0 && out[j].first < out[j - 1].first; --j) std::swap(out[j], out[j - 1]);
  }
  return out;
}

// Judges the statistics of a tensor pair one column at a time, in title order, into `out`.
class StatisticJudge {
 public:
  StatisticJudge(const CompareOptions& options, const PrecisionStandard& standard,
                 TensorComparison* out)
      : options_(options), standard_(standard), out_(out) {}

  void Add(StatisticTitle column, const StatValue& a, const StatValue& b) {
    const double va = a.value, vb = b.value;
    const double diff = std::fabs(va - vb);
    const double relative = diff / (std::fabs(vb) + kRelEps);
    out_->stat_diffs.emplace_back(column, relative);
    const bool same_special = (std::isnan(va) && std::isnan(vb)) || va == vb;
    if (same_special) return;
    const double allowed = options_.user_tolerances
                               ? options_.atol + options_.rtol * std::fabs(vb)
                               : standard_.rtol * std::max(std::fabs(vb), standard_.small_value);
    if (diff <= allowed) return;
    // A value read from statistic.csv text may be off by its printing: that is no difference.
    if (diff <= allowed + PrintedError(a) + PrintedError(b)) return;
    if (!failures_.empty()) failures_ += "; ";
    failures_ += fmt::format("{} {:.6g} vs {:.6g}", column.view(), va, vb);
    // NaN against a number (a relative difference of NaN) is the largest.
    if (out_->worst_statistic.empty() || std::isnan(relative) || relative > worst_) {
      worst_ = std::isnan(relative) ? INFINITY : relative;
      out_->worst_statistic = column.view();
      out_->worst_statistic_a = va;
      out_->worst_statistic_b = vb;
    }
  }

  void Finish() {
    if (out_->stat_diffs.empty()) {
      out_->verdict = Verdict::kWarning;
      out_->reason = "no statistic column in common; nothing compared";
    } else if (!failures_.empty()) {
      out_->verdict = Verdict::kError;
      out_->reason = "statistics differ: " + failures_;
    } else {
      out_->reason = "statistics only: within tolerance";
    }
  }

 private:
  const CompareOptions& options_;
  const PrecisionStandard& standard_;
  TensorComparison* out_;
  std::string failures_;
  double worst_ = 0;
};

// The reason of a pair whose statistic.csv rows give the same MD5.
constexpr char kMd5Equal[] = "statistics only: MD5 equal";

// A statistic.csv row's cells in its file's column order.
void RowCells(const StatisticValues& values, std::vector<std::string_view>* cells) {
  cells->clear();
  values.ForEach([&](const std::string&, std::string_view cell) { cells->push_back(cell); });
}

// Both sides statistic.csv rows of the files `plan` pairs: each column found by position.
void CompareStatisticRows(const StatisticValues& ra, const StatisticValues& rb,
                          const StatisticPlan& plan, StatisticJudge* judge,
                          TensorComparison* out) {
  thread_local std::vector<std::string_view> cells_a, cells_b;
  RowCells(ra, &cells_a);
  RowCells(rb, &cells_b);
  if (plan.md5_a && plan.md5_b && cells_a[*plan.md5_a] == cells_b[*plan.md5_b]) {
    out->reason = kMd5Equal;
    return;
  }
  out->stat_diffs.reserve(plan.columns.size());
  for (const StatisticPlan::Column& c : plan.columns) {
    StatValue a{0, cells_a[c.a], c.info}, b{0, cells_b[c.b], c.info};
    if (CellNumber(a.text, &a.value) && CellNumber(b.text, &b.value)) judge->Add(c.title, a, b);
  }
  judge->Finish();
}

void CompareStatistics(const TensorEntry& ta, const MappedNpy* na, const TensorEntry& tb,
                       const MappedNpy* nb, const CompareOptions& options,
                       const PrecisionStandard& standard, const StatisticPlan* plan,
                       TensorComparison* out) {
  out->mode = "statistic";
  StatisticJudge judge(options, standard, out);
  if (plan && !na && !nb) {
    CompareStatisticRows(ta.stats->values, tb.stats->values, *plan, &judge, out);
    return;
  }
  const char* md5 = StatCategoryColumn(StatCategory::kMd5);
  if (ta.stats && tb.stats && ta.stats->values.count(md5) && tb.stats->values.count(md5) &&
      ta.stats->values.at(md5) == tb.stats->values.at(md5)) {
    out->reason = kMd5Equal;
    return;
  }
  const Stats sa = StatsOf(ta, na), sb = StatsOf(tb, nb);
  out->stat_diffs.reserve(sa.size());
  for (const auto& [column, a] : sa) {
    auto it = std::lower_bound(
        sb.begin(), sb.end(), column,
        [](const auto& x, std::string_view title) { return x.first < title; });
    if (it != sb.end() && it->first == column) judge.Add(column, a, it->second);
  }
  judge.Finish();
}

bool IsFloating(std::string_view lower) {
  return lower.find("float") != std::string_view::npos ||
         lower.find("complex") != std::string_view::npos;
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

// What the elements of a discrete pair are called: "indices" (integers: the indices of topk,
// max, sort, argmax, nonzero), "bool elements" (a mask).
std::string DiscreteNoun(const std::string& dtype) {
  return Lower(dtype) == "bool" ? "bool elements" : "indices";
}

void JudgeTensor(const CompareOptions& options, const PrecisionStandard& standard,
                 const MappedNpy& a, TensorComparison* t) {
  const PairMetrics& m = t->metrics;
  const bool both_floating = IsFloating(Lower(t->dtype_a)) && IsFloating(Lower(t->dtype_b));
  if (t->discrete && m.allclose_failures > 0) {
    // A different index is a different choice, not a rounding error: said as what it is.
    t->verdict = Verdict::kError;
    t->reason = fmt::format("{} of {} {} differ (first at {})", m.allclose_failures, m.elements,
                            DiscreteNoun(t->dtype_b), WhereText(m.first_failure, a, t));
  } else if (m.nonfinite_mismatches > 0) {
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

}  // namespace

std::string Describe(const TensorComparison& t) {
  return fmt::format("{} {}", t.is_input ? "input" : "output", t.slot);
}

StatisticPlan PlanStatistics(const StatisticCells& a, const StatisticCells& b) {
  // Where `title` is in `titles` (a file's titles are unique).
  auto position = [](const std::vector<std::string>& titles,
                     std::string_view title) -> std::optional<size_t> {
    const auto it = std::find(titles.begin(), titles.end(), title);
    if (it == titles.end()) return std::nullopt;
    return static_cast<size_t>(it - titles.begin());
  };
  StatisticPlan plan;
  const std::string_view md5 = StatCategoryColumn(StatCategory::kMd5);
  plan.md5_a = position(a.titles, md5);
  plan.md5_b = position(b.titles, md5);
  for (size_t i = 0; i < a.titles.size(); ++i) {
    const StatisticInfo* info = FindStatisticByTitle(a.titles[i]);
    if (info && !info->comparable) continue;
    if (const std::optional<size_t> j = position(b.titles, a.titles[i])) {
      plan.columns.push_back({i, *j, info, a.titles[i]});
    }
  }
  std::sort(plan.columns.begin(), plan.columns.end(),
            [](const auto& x, const auto& y) { return x.title < y.title; });
  return plan;
}

namespace {

// StandardFor, remembering the last pair of dtypes on this thread: a dump's tensors come in runs
// of one dtype.
const PrecisionStandard& StandardOfPair(const std::string& dtype_a, const std::string& dtype_b) {
  thread_local std::optional<std::pair<std::string, std::string>> last_dtypes;
  thread_local PrecisionStandard last;
  if (!last_dtypes || last_dtypes->first != dtype_a || last_dtypes->second != dtype_b) {
    last = StandardFor(dtype_a, dtype_b);
    last_dtypes.emplace(dtype_a, dtype_b);
  }
  return last;
}

}  // namespace

void CompareTensor(const TensorEntry* ta, const TensorEntry* tb, const CompareOptions& options,
                   const StatisticPlan* plan, TensorComparison* out, std::vector<Skipped>* skipped,
                   std::mutex* mu, bool flat) {
  out->dtype_a = ta->dtype ? std::string(DTypeName(*ta->dtype)) : ta->dtype_name;
  out->dtype_b = tb->dtype ? std::string(DTypeName(*tb->dtype)) : tb->dtype_name;
  out->path_a = ta->path;
  out->path_b = tb->path;
  out->error = kNaN;
  const PrecisionStandard standard = StandardOfPair(out->dtype_a, out->dtype_b);
  out->standard = options.user_tolerances ? "user" : standard.dtype;
  if (ta->uninitialized || tb->uninitialized) {
    // Memory nothing wrote yet (the output of `empty`): whatever it holds is not data.
    out->mode = "uninitialized";
    out->uninitialized = true;
    out->shape_a = ta->stats ? ShapeToString(ta->stats->shape) : "";
    out->shape_b = tb->stats ? ShapeToString(tb->stats->shape) : "";
    out->reason = fmt::format("not compared: uninitialised memory in {} (not data)",
                              ta->uninitialized && tb->uninitialized ? "both runs"
                              : ta->uninitialized                    ? "A"
                                                                     : "B");
    return;
  }
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
  // Two statistic rows of one shape (nearly all pairs): its text once.
  const bool same_rows =
      !na && !nb && ta->stats && tb->stats && ta->stats->shape == tb->stats->shape;
  out->shape_b = same_rows ? out->shape_a : ShapeText(*tb, nb.get());
  auto elements = [](const TensorEntry& t, const MappedNpy* npy) -> int64_t {
    if (npy) return npy->NumElements();
    if (!t.stats) return -1;
    int64_t n = 1;
    for (int64_t d : t.stats->shape) n *= d;
    return n;
  };
  const bool same_count = flat && elements(*ta, na.get()) >= 0 &&
                          elements(*ta, na.get()) == elements(*tb, nb.get());
  if (!out->shape_a.empty() && !out->shape_b.empty() && out->shape_a != out->shape_b &&
      !same_count) {
    out->mode = na && nb ? "tensor" : "statistic";
    out->verdict = Verdict::kError;
    out->reason = "shape " + out->shape_a + " vs " + out->shape_b;
    out->error = kInf;
    out->shape_differs = true;
    return;
  }
  if (!na || !nb) {
    CompareStatistics(*ta, na.get(), *tb, nb.get(), options, standard, plan, out);
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
  out->metrics = options.user_tolerances
                     ? ComparePair(*na, *nb, options.atol, options.rtol)
                     : ComparePair(*na, *nb, 0, standard.rtol, standard.small_value);
  out->discrete = !out->dtype_a.empty() && !out->dtype_b.empty() &&
                  !IsFloating(Lower(out->dtype_a)) && !IsFloating(Lower(out->dtype_b));
  if (out->discrete) {
    // The share of elements that differ: what a discrete output's error is.
    const PairMetrics& m = out->metrics;
    out->error = m.elements > 0 ? static_cast<double>(m.allclose_failures) / m.elements : 0.0;
  } else {
    out->error = out->metrics.nonfinite_mismatches > 0 ? kInf : out->metrics.norm_rel_err;
  }
  if (LowerPrecision(out->dtype_a, out->dtype_b)) {
    out->rounding = RoundingError(*nb, out->dtype_a, standard.small_value);
  }
  JudgeTensor(options, standard, *na, out);
}

}  // namespace compare_internal

bool DiscreteChange(const TensorComparison& t) {
  return t.shape_differs || (t.discrete && t.metrics.allclose_failures > 0);
}

PrecisionStandard StandardFor(const std::string& dtype_a, const std::string& dtype_b) {
  const PrecisionStandard a = compare_internal::StandardOf(dtype_a),
                          b = compare_internal::StandardOf(dtype_b);
  if (a.dtype == "exact") return b;
  if (b.dtype == "exact") return a;
  return a.rtol >= b.rtol ? a : b;  // the lower precision
}

}  // namespace graphdump::analysis
