// watch: MindInsight-style watchpoints over every tensor of a dump, in parallel.
#include "graphdump/analysis/watch.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cmath>
#include <iterator>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "graphdump/analysis/npy_file.h"
#include "graphdump/analysis/parallel.h"
#include "graphdump/analysis/source_json.h"
#include "graphdump/analysis/tensor_math.h"
#include "graphdump/internal/json_text.h"
#include "graphdump/shape.h"
#include "graphdump/statistic_catalogue.h"
#include "watch_loss.h"

namespace graphdump::analysis {
namespace {

bool IsGradient(const KernelEntry& k) {
  return k.full_name.rfind("Gradients/", 0) == 0 || k.op_name.rfind("Gradients_", 0) == 0;
}

// A count read from statistic.csv as a double: any text parses, so it is clamped to
// [0, 2^53] (converting 1e300 to int64_t is undefined, and sums of counts must not overflow).
int64_t CountFrom(double v) {
  constexpr double kMax = 9007199254740992.0;  // 2^53
  return v >= 0 ? static_cast<int64_t>(std::min(v, kMax)) : 0;
}

// A statistic.csv row's cells by category, each file's columns looked up once: a dump's rows
// share their file's titles (StatisticCells), so the lookup is redone only when the file changes.
class StatisticReader {
 public:
  void Read(const StatisticValues& values) {
    if (values.cells() != titles_of_) {
      titles_of_ = values.cells();
      columns_.fill(-1);
      int column = 0;
      values.ForEachTitle([&](const std::string& title) {
        const StatisticInfo* info = FindStatisticByTitle(title);
        if (info && columns_[static_cast<size_t>(info->category)] < 0) {
          columns_[static_cast<size_t>(info->category)] = column;  // the first, as Find's
        }
        ++column;
      });
    }
    cells_.clear();
    values.ForEach([&](const std::string&, std::string_view cell) { cells_.push_back(cell); });
  }
  std::optional<std::string_view> Cell(StatCategory category) const {
    const int column = columns_[static_cast<size_t>(category)];
    if (column < 0) return std::nullopt;
    return cells_[static_cast<size_t>(column)];
  }
  // The cell as a number; false when it is absent, empty or does not start with one.
  bool Number(StatCategory category, double* v) const {
    const std::optional<std::string_view> cell = Cell(category);
    if (!cell || cell->empty()) return false;
    const char* begin = cell->data();
    const char* end = begin + cell->size();
    auto [ptr, ec] = std::from_chars(begin, end, *v);
    if (ec == std::errc() && ptr == end) return true;
    // What from_chars leaves to strtod: a leading '+' or space, hexadecimal, a number followed
    // by more text.
    const std::string text(*cell);
    char* stop = nullptr;
    *v = std::strtod(text.c_str(), &stop);
    return stop != text.c_str();
  }

 private:
  static constexpr size_t kCategories = static_cast<size_t>(StatCategory::kL2Norm) + 1;
  const StatisticCells* titles_of_ = nullptr;
  std::array<int, kCategories> columns_{};
  std::vector<std::string_view> cells_;
};

// A summary from statistic.csv values, for tensors dumped as statistics only.
bool SummaryFromStats(const StatisticRow& row, StatisticReader* reader, TensorEvidence* e) {
  FiniteSummary* s = &e->s;
  e->from_file = false;
  e->overflow_counted = false;
  using C = StatCategory;
  reader->Read(row.values);
  auto get = [&](C category, double* v) { return reader->Number(category, v); };
  double mx = 0, mn = 0, l2 = 0, v = 0;
  const bool have_max = get(C::kMax, &mx), have_min = get(C::kMin, &mn);
  if (get(C::kCount, &v)) {
    s->elements = CountFrom(v);
  } else {
    s->elements = ShapeElements(row.shape).value_or(0);  // checked by ParseStatisticCsv
  }
  // Without a count column, a NaN or infinite max or min proves at least one such element: the
  // count is then 1 and marked as a lower bound (not counted).
  e->nan_counted = get(C::kNanCount, &v);
  if (e->nan_counted) s->nan = CountFrom(v);
  const bool nan_max = have_max && std::isnan(mx), nan_min = have_min && std::isnan(mn);
  if (!e->nan_counted && (nan_max || nan_min)) {
    s->nan = 1;
    e->nan_seen_in = nan_max && nan_min ? "max and min are" : nan_max ? "max is" : "min is";
  }
  double pos = 0, neg = 0;
  const bool have_pos = get(C::kPositiveInfCount, &pos), have_neg = get(C::kNegativeInfCount, &neg);
  e->inf_counted = have_pos && have_neg;
  if (have_pos) s->pos_inf = CountFrom(pos);
  if (have_neg) s->neg_inf = CountFrom(neg);
  if (!have_pos && have_max && std::isinf(mx) && mx > 0) s->pos_inf = 1;
  if (!have_neg && have_min && std::isinf(mn) && mn < 0) s->neg_inf = 1;
  if (have_max) s->max = mx;
  if (have_min) s->min = mn;
  s->max_abs = std::max(have_max && std::isfinite(mx) ? std::fabs(mx) : 0.0,
                        have_min && std::isfinite(mn) ? std::fabs(mn) : 0.0);
  s->fp16_overflow = s->max_abs > 65504.0 ? 1 : 0;  // at least one: not counted
  if (get(C::kL2Norm, &l2))
    s->l2norm = l2;
  else
    s->l2norm = std::nan("");
  if (get(C::kZeroCount, &v))
    s->zero = CountFrom(v);
  else
    s->zero = (have_max && have_min && mx == 0 && mn == 0) ? s->elements : 0;
  return have_max || have_min || reader->Cell(C::kNanCount).has_value();
}

struct TensorTask {
  const RankEntry* rank;
  const GraphEntry* graph;
  const IterationEntry* iteration;
  const KernelEntry* kernel;
  const TensorEntry* tensor;
  const TensorEntry* previous = nullptr;  // weight checks: the same parameter one dump earlier
  int64_t previous_iteration = -1;
  uint64_t sequence = 0;  // WatchHit::sequence
  bool update = false;    // `previous` is the input 0 of the update kernel whose output 0 this is
};

bool IsUpdateKernel(const KernelEntry& k) {
  return k.full_name.rfind("Default/optimizer-", 0) == 0 ||
         k.op_name.rfind("Default_optimizer-", 0) == 0;
}

// The L2 norm a statistic.csv row holds; false without one.
bool RowL2Norm(const TensorEntry& t, double* norm) {
  if (!t.stats) return false;
  StatisticReader reader;
  reader.Read(t.stats->values);
  return reader.Number(StatCategory::kL2Norm, norm) && std::isfinite(*norm);
}

// WatchHit::sequence of every kernel call of the index, in the order of the index (ranks,
// graphs, iterations, kernels).
std::vector<uint64_t> CallSequences(const DumpIndex& index) {
  std::vector<uint64_t> sequence;
  for (const RankEntry& r : index.ranks) {
    // (iteration, timestamp, graph, call, order) of each call of the rank, and its place.
    using Key = std::tuple<int64_t, uint64_t, uint32_t, uint32_t, int64_t>;
    std::vector<std::pair<Key, size_t>> calls;
    for (const GraphEntry& g : r.graphs) {
      for (const IterationEntry& it : g.iterations) {
        for (const KernelEntry& k : it.kernels) {
          const uint64_t time = k.first_timestamp == 0 ? UINT64_MAX : k.first_timestamp;
          calls.push_back({Key{it.iteration, time, g.graph_id, k.call, k.order}, sequence.size()});
          sequence.push_back(0);
        }
      }
    }
    std::stable_sort(calls.begin(), calls.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    int64_t iteration = INT64_MIN;
    uint64_t n = 0;
    for (const auto& [key, place] : calls) {
      if (std::get<0>(key) != iteration) {
        iteration = std::get<0>(key);
        n = 0;
      }
      sequence[place] = n++;
    }
  }
  return sequence;
}

WatchHit MakeHit(const DumpIndex& index, const TensorTask& t, const WatchCheck& check,
                 std::string detail) {
  WatchHit h;
  h.rank = t.rank->rank;
  h.graph_id = t.graph->graph_id;
  h.iteration = t.iteration->iteration;
  h.call = t.kernel->call;
  h.calls = t.kernel->calls;
  if (t.kernel->first_timestamp != 0) h.timestamp = t.kernel->first_timestamp;
  h.sequence = t.sequence;
  h.order = t.kernel->order;
  h.kernel = t.kernel->full_name;
  h.is_input = t.tensor->is_input;
  h.slot = t.tensor->slot;
  h.check = check.text;
  h.detail = std::move(detail);
  h.source_line = index.SourceLine(*t.graph, t.kernel->full_name);
  h.source_trace = index.SourceTrace(*t.graph, t.kernel->full_name);
  h.path = t.tensor->path;
  return h;
}

// A hit as found, before it becomes a WatchHit: only the hits kept become one
// (WatchOptions::keep_hits), as copying a kernel's name and source trace into every hit of a
// dump whose NaN reached every later kernel costs more than finding them.
struct Found {
  size_t task;  // in RunWatch's tasks
  const WatchCheck* check;
  std::string detail;
  std::vector<int64_t> first_index = {};
  int64_t row = -1;
  bool has_position = false;
};

// Each check's count of tensors judged is added to `judged` (by the check's place in `checks`).
void CheckTensor(size_t task, const TensorTask& t, const TensorEvidence& e,
                 const std::vector<WatchCheck>& checks, std::vector<Found>* hits,
                 std::vector<int64_t>* judged) {
  const FiniteSummary& s = e.s;
  const std::optional<DType> dtype = t.tensor->dtype;
  const TensorTraits traits{
      .gradient = IsGradient(*t.kernel) && !t.tensor->is_input,
      .floating = !dtype || IsFloatingPoint(*dtype) || IsComplex(*dtype),
      .computed = !t.kernel->is_parameter && t.iteration->iteration >= 0,
      .dtype = dtype,
  };
  for (size_t i = 0; i < checks.size(); ++i) {
    const WatchCheck& c = checks[i];
    const WatchCheckInfo& check = WatchCheckOf(c.kind);
    if (check.tensor == nullptr) continue;
    if (TensorJudged(c.kind, e, traits)) ++(*judged)[i];
    std::string detail = check.tensor(e, traits, c.threshold);
    if (detail.empty()) continue;
    // Where the first bad value lies (a file's elements only).
    const BadPositions* at = nullptr;
    if (e.from_file) {
      switch (check.position) {
        case BadElement::kNan: at = &s.nan_at; break;
        case BadElement::kInf: at = &s.inf_at; break;
        case BadElement::kNanElseInf: at = s.nan_at.first >= 0 ? &s.nan_at : &s.inf_at; break;
        case BadElement::kNone: break;
      }
    }
    Found hit{task, &c, std::move(detail)};
    if (at && at->first >= 0) {
      // A 0-d tensor's one element is at index [] (NumPy's `x[()]`): a position too.
      hit.has_position = true;
      if (!e.info.shape.empty()) {
        hit.detail += "; " + PositionText(*at, e.info);
        hit.first_index = UnravelIndex(at->first, e.info.shape, e.info.fortran_order);
        if (e.info.shape.size() >= 2) hit.row = hit.first_index[0];
      }
    }
    hits->push_back(std::move(hit));
  }
}

// Returns whether the pair could be compared (it counts as a weight pair compared): from both
// tensors' files, else from both statistic.csv rows' L2 norms (a lower bound of the change).
bool CheckWeight(size_t task, const TensorTask& t, const std::vector<WatchCheck>& checks,
                 std::vector<Found>* hits, std::vector<Skipped>* skipped, std::mutex* mu,
                 std::vector<char>* judged) {
  WeightDelta delta{.identical = false, .ratio = 0, .previous_iteration = t.previous_iteration,
                    .update = t.update};
  if (!t.tensor->path.empty() && !t.previous->path.empty()) {
    auto cur = OpenTensor(*t.tensor);
    auto prev = OpenTensor(*t.previous);
    for (auto* r : {&cur, &prev}) {
      if (!r->ok()) {
        std::lock_guard<std::mutex> lock(*mu);
        skipped->push_back({"", r->status().message()});
        return false;
      }
    }
    const DeltaNorms d = DeltaBetween(**cur, **prev);
    delta.identical = d.identical;
    delta.ratio = d.ref_l2 > 0 ? d.diff_l2 / d.ref_l2 : (d.diff_l2 > 0 ? INFINITY : 0.0);
    delta.norm_before = d.ref_l2;
    delta.norm_after = SummarizeFinite(**cur).l2norm;
  } else if (RowL2Norm(*t.tensor, &delta.norm_after) &&
             RowL2Norm(*t.previous, &delta.norm_before)) {
    const double diff = std::fabs(delta.norm_after - delta.norm_before);
    delta.lower_bound = true;
    delta.ratio = delta.norm_before > 0 ? diff / delta.norm_before : (diff > 0 ? INFINITY : 0.0);
  } else {
    return false;
  }
  for (size_t i = 0; i < checks.size(); ++i) {
    const WatchCheck& c = checks[i];
    const WatchCheckInfo& check = WatchCheckOf(c.kind);
    if (check.weight == nullptr) continue;
    if (delta.lower_bound && c.kind == WatchKind::kWeightUnchanged) continue;  // unknown
    (*judged)[i] = 1;
    std::string detail = check.weight(delta, c.threshold);
    if (!detail.empty()) hits->push_back({task, &c, std::move(detail)});
  }
  return true;
}

// What loss-spike needs of a tensor (watch_loss.h): the calls of Gradients/ kernels, and the
// one-element floating-point outputs of forward kernels with their values.
void NoteLoss(size_t task, const TensorTask& t, const TensorEvidence& e, LossSeries* losses) {
  const KernelEntry& k = *t.kernel;
  const uint32_t rank = t.rank->rank, graph = t.graph->graph_id;
  const int64_t iteration = t.iteration->iteration;
  if (IsGradient(k)) {
    losses->AddGradient(rank, graph, iteration, t.sequence);
    return;
  }
  const std::optional<DType> dtype = t.tensor->dtype;
  // The gradient backward() starts from (ones_like(loss)) is made after the loss: no loss.
  static const std::set<std::string> kSeeds = {"ones_like", "full_like", "ones", "full"};
  if (t.tensor->is_input || k.is_parameter || IsUpdateKernel(k) || e.s.elements != 1 ||
      (dtype && !IsFloatingPoint(*dtype)) || kSeeds.count(k.op_type)) {
    return;
  }
  const FiniteSummary& s = e.s;
  const double value = s.nan > 0       ? NAN
                       : s.pos_inf > 0 ? INFINITY
                       : s.neg_inf > 0 ? -INFINITY
                       : std::fabs(s.max) >= std::fabs(s.min) ? s.max
                                                              : s.min;
  losses->AddCandidate(rank, graph, iteration, t.sequence, task, value);
}

// Infinities written on purpose (docs/analysis.md, "What counts as a hit"): the outputs of a
// kernel that fills with its own constant +-inf argument (GraphEntry::intended_infinities), the
// same tensors as later kernels' inputs in the same iteration (found by their summary), and the
// infinities a kernel's outputs carry on from such inputs: a where or masked_fill passes them on,
// and any other kernel (the add of a mask to the scores, a triu of a full(-inf)) carries those of
// their sign when none of its inputs holds an infinity that is not intended. Walks the tasks in
// execution order (inputs of a call before its outputs).
class IntendedMarker {
 public:
  // Takes `e`'s intended infinities out of its summary and describes them in e->intended.
  void Mark(const TensorTask& t, TensorEvidence* e) {
    if (t.kernel != kernel_) {
      kernel_ = t.kernel;
      passed_on_.reset();
      carried_ = Origin{};
      tainted_ = false;
    }
    FiniteSummary& s = e->s;
    if (s.pos_inf + s.neg_inf == 0) return;
    const Group group{t.rank->rank, t.graph->graph_id, t.iteration->iteration};
    const Fingerprint print{s.elements, s.nan, s.pos_inf, s.neg_inf, s.max, s.min, s.l2norm};
    std::optional<Origin> origin;
    if (t.iteration->iteration < 0) {  // constants/: values the program wrote itself
      origin = Origin{true, true, "a constant of the graph", ""};
    } else if (t.tensor->is_input) {
      auto it = outputs_.find({group, print});
      if (it != outputs_.end()) origin = it->second;
      if (origin && PassesOn(t.kernel->op_type)) passed_on_ = origin;
    } else if (auto it = t.graph->intended_infinities.find(t.kernel->full_name);
               it != t.graph->intended_infinities.end()) {
      origin = Origin{it->second.positive, it->second.negative, it->second.argument, ""};
    } else if (passed_on_) {
      origin = passed_on_;
    } else if (!tainted_ && (carried_.positive || carried_.negative)) {
      origin = carried_;
      origin->via = t.kernel->op_type;
    }
    const int64_t pos = origin && origin->positive ? s.pos_inf : 0;
    const int64_t neg = origin && origin->negative ? s.neg_inf : 0;
    if (t.tensor->is_input) {
      // What this call's outputs may carry on: only when every infinity of its inputs is one
      // written on purpose.
      if (pos + neg < s.pos_inf + s.neg_inf) tainted_ = true;
      if (origin && pos + neg > 0) {
        carried_.positive |= pos > 0;
        carried_.negative |= neg > 0;
        if (carried_.text.empty()) carried_.text = origin->text;
      }
    }
    if (pos + neg == 0) return;
    if (!t.tensor->is_input) outputs_.emplace(std::make_pair(group, print), *origin);
    std::string text;
    if (pos) text = fmt::format("{} +Inf", pos);
    if (neg) text += fmt::format("{}{} -Inf", text.empty() ? "" : " and ", neg);
    e->intended = fmt::format("{} of {} elements, written on purpose by {}{}", text, s.elements,
                              origin->text,
                              origin->via.empty() ? "" : ", carried through " + origin->via);
    s.pos_inf -= pos;
    s.neg_inf -= neg;
    if (s.pos_inf + s.neg_inf == 0) s.inf_at = BadPositions{};
  }

 private:
  struct Origin {
    bool positive = false, negative = false;
    std::string text;  // "masked_fill(value=-inf)": the kernel that wrote them
    std::string via;   // the kernel that carried them on to this tensor ("add"), if any
  };
  // Rank, graph, iteration: a mask made once may be used by every call of a kernel.
  using Group = std::tuple<uint32_t, uint32_t, int64_t>;
  using Fingerprint = std::tuple<int64_t, int64_t, int64_t, int64_t, double, double, double>;

  // Operators whose output holds what their inputs hold where the mask says so.
  static bool PassesOn(std::string op) {
    if (!op.empty() && op.back() == '_') op.pop_back();
    return op == "where" || op == "masked_fill";
  }

  std::map<std::pair<Group, Fingerprint>, Origin> outputs_;
  const KernelEntry* kernel_ = nullptr;
  std::optional<Origin> passed_on_;  // an input of the current kernel holding intended ones
  Origin carried_;        // the signs of the current kernel's inputs' intended infinities
  bool tainted_ = false;  // an input of the current kernel holds an infinity not intended
};

}  // namespace

WatchResult RunWatch(const DumpIndex& index, const std::vector<WatchCheck>& checks,
                     const WatchOptions& options) {
  WatchResult result;
  result.skipped = index.skipped;
  result.ranks = index.ranks.size();
  bool tensor_checks = false, weight_checks = false;
  for (const WatchCheck& c : checks) {
    (WatchCheckOf(c.kind).weight != nullptr ? weight_checks : tensor_checks) = true;
  }
  const std::vector<uint64_t> sequences = CallSequences(index);
  size_t place = 0;  // the kernel call's place in the index (CallSequences)
  std::vector<TensorTask> tasks;
  if (tensor_checks) tasks.reserve(sequences.size() * 2);  // most kernels have about two tensors
  for (const RankEntry& r : index.ranks) {
    for (const GraphEntry& g : r.graphs) {
      std::map<std::string, std::pair<const TensorEntry*, int64_t>> last_weight;
      for (const IterationEntry& it : g.iterations) {
        for (const KernelEntry& k : it.kernels) {
          const uint64_t sequence = sequences[place++];
          if (weight_checks && it.iteration >= 0 && IsUpdateKernel(k)) {
            // The parameter the update wrote (output 0) against the one it read (input 0).
            const TensorEntry *before = nullptr, *after = nullptr;
            for (const TensorEntry& t : k.tensors) {
              if (t.slot == 0) (t.is_input ? before : after) = &t;
            }
            if (before && after) {
              tasks.push_back({&r, &g, &it, &k, after, before, it.iteration, sequence, true});
            }
          }
          for (const TensorEntry& t : k.tensors) {
            // Uninitialised memory (the output of `empty`) holds no data to watch.
            if (tensor_checks && !t.uninitialized) {
              tasks.push_back({&r, &g, &it, &k, &t, nullptr, -1, sequence});
            }
            if (!weight_checks || !k.is_parameter || it.iteration < 0 ||
                (t.path.empty() && !t.stats)) {
              continue;
            }
            auto& last = last_weight[k.op_name];
            if (last.first)
              tasks.push_back({&r, &g, &it, &k, &t, last.first, last.second, sequence});
            last = {&t, it.iteration};
          }
        }
      }
    }
  }
  // Tensors with a file and weight pairs are read on every thread; statistics rows are read in
  // the ordered pass below.
  std::vector<size_t> reads;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].previous || !tasks[i].tensor->path.empty()) reads.push_back(i);
  }
  std::vector<std::optional<TensorEvidence>> read(reads.size());
  std::vector<std::vector<Found>> pair_hits(reads.size());
  // Per weight pair, which checks judged it (CheckWeight).
  std::vector<std::vector<char>> pair_judged(reads.size());
  std::mutex mu;
  std::atomic<int64_t> checked{0}, pairs{0};
  ParallelFor(reads.size(), options.threads > 0 ? options.threads : DefaultThreads(),
              options.progress ? "watch: tensors" : "", [&](size_t j) {
                const size_t i = reads[j];
                const TensorTask& t = tasks[i];
                if (t.previous) {
                  pair_judged[j].assign(checks.size(), 0);
                  if (CheckWeight(i, t, checks, &pair_hits[j], &result.skipped, &mu,
                                  &pair_judged[j])) {
                    ++pairs;
                  }
                  return;
                }
                auto npy = OpenTensor(*t.tensor);
                if (!npy.ok()) {
                  std::lock_guard<std::mutex> lock(mu);
                  result.skipped.push_back({t.tensor->path, npy.status().message()});
                  return;
                }
                TensorEvidence e;
                e.s = SummarizeFinite(**npy);
                e.info = (*npy)->info();
                ++checked;
                read[j] = std::move(e);
              });
  // In execution order: which infinities are intended needs the kernels before.
  IntendedMarker intended;
  const bool inf_checks = std::any_of(checks.begin(), checks.end(), [](const WatchCheck& c) {
    return WatchCheckOf(c.kind).hits_infinities;
  });
  static const WatchCheck kIntendedInf{WatchKind::kInf, 0, "inf"};
  std::vector<Found> hits, intended_hits;
  StatisticReader reader;
  TensorEvidence e;
  std::vector<int64_t> judged(checks.size());
  const WatchCheck* loss_check = nullptr;
  for (const WatchCheck& c : checks) {
    if (c.kind == WatchKind::kLossSpike && !loss_check) loss_check = &c;
  }
  LossSeries losses;
  for (size_t i = 0, j = 0; i < tasks.size(); ++i) {
    const TensorTask& t = tasks[i];
    if (j < reads.size() && reads[j] == i) {
      std::move(pair_hits[j].begin(), pair_hits[j].end(), std::back_inserter(hits));
      for (size_t c = 0; c < pair_judged[j].size(); ++c) judged[c] += pair_judged[j][c];
      std::optional<TensorEvidence> from_file = std::move(read[j]);
      read[j].reset();
      ++j;
      if (!from_file) continue;
      e = std::move(*from_file);
    } else {
      e = TensorEvidence();
      if (!t.tensor->stats || !SummaryFromStats(*t.tensor->stats, &reader, &e)) continue;
      ++checked;
    }
    if (inf_checks && !options.count_intended_inf) intended.Mark(t, &e);
    if (!e.intended.empty()) intended_hits.push_back({i, &kIntendedInf, e.intended});
    CheckTensor(i, t, e, checks, &hits, &judged);
    if (loss_check && t.iteration->iteration >= 0) NoteLoss(i, t, e, &losses);
  }
  if (loss_check) {
    const size_t at = static_cast<size_t>(loss_check - checks.data());
    judged[at] += losses.Judge(loss_check->threshold, [&](size_t task, std::string detail) {
      hits.push_back({task, loss_check, std::move(detail)});
    });
  }
  for (size_t c = 0; c < checks.size(); ++c) result.judged[checks[c].text] += judged[c];
  result.tensors_checked = checked;
  result.weight_pairs_checked = pairs;
  // In the order they occurred (OccurrenceKey); only what options.keep_hits keeps
  // becomes a WatchHit.
  std::stable_sort(hits.begin(), hits.end(), [&](const Found& a, const Found& b) {
    auto key = [&](const Found& f) {
      const TensorTask& t = tasks[f.task];
      return OccurrenceKey(t.iteration->iteration, t.sequence, t.tensor->is_input,
                           t.rank->rank, t.graph->graph_id, t.tensor->slot);
    };
    return key(a) < key(b);
  });
  auto make = [&](Found& f) {
    WatchHit h = MakeHit(index, tasks[f.task], *f.check, std::move(f.detail));
    h.first_index = std::move(f.first_index);
    h.row = f.row;
    h.has_position = f.has_position;
    return h;
  };
  const size_t keep = options.keep_hits;
  std::map<uint32_t, HitSpreadBuilder> spreads;  // with `keep`: by rank
  for (size_t n = 0; n < hits.size(); ++n) {
    const TensorTask& t = tasks[hits[n].task];
    ++result.hit_counts[{t.rank->rank, t.iteration->iteration}];
    bool first_of_rank = false;
    if (keep > 0) {
      auto [spread, inserted] = spreads.try_emplace(t.rank->rank, t.kernel->full_name,
                                                    t.iteration->iteration, kSpreadShown);
      if (!inserted) spread->second.Add(t.kernel->full_name, t.iteration->iteration);
      first_of_rank = inserted;
    }
    if (keep == 0 || n < keep || first_of_rank) {
      result.hits.push_back(make(hits[n]));
    } else {
      ++result.dropped_hits;
    }
  }
  for (auto& [rank, spread] : spreads) result.spreads[rank] = spread.Take();
  for (size_t n = 0; n < intended_hits.size(); ++n) {
    if (keep == 0 || n < keep) {
      result.intended.push_back(make(intended_hits[n]));
    } else {
      ++result.dropped_intended;
    }
  }
  for (Skipped& s : result.skipped) {
    if (s.path.empty()) {  // weight pair errors carry the file in the message
      s.path = s.reason.substr(0, s.reason.find(':'));
    }
  }
  return result;
}

}  // namespace graphdump::analysis
