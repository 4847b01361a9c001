// compare: pairs kernels of two dumps and computes error metrics per tensor pair. Pairing,
// one tensor pair, attribution and the output formats live in compare_*.cc.
#include "graphdump/analysis/compare.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

#include "graphdump/analysis/parallel.h"
#include "graphdump/internal/compare_parts.h"

namespace graphdump::analysis {
namespace {

using compare_internal::Attribute;
using compare_internal::CompareTensor;
using compare_internal::Describe;
using compare_internal::ForwardScopeErrors;
using compare_internal::KernelPair;
using compare_internal::kNaN;
using compare_internal::PairKernels;
using compare_internal::SavedTensorError;
using compare_internal::ScopeKey;
using compare_internal::Summarize;

struct TensorTask {
  size_t kernel;
  size_t tensor;
  const TensorEntry* a;
  const TensorEntry* b;
  const compare_internal::StatisticPlan* plan = nullptr;
  bool flat = false;  // CompareTensor's
};

// The statistic.csv file of a tensor's row; null when it has none.
const StatisticCells* CellsOf(const TensorEntry& t) {
  return t.stats ? t.stats->values.cells() : nullptr;
}

using Plans = std::map<std::pair<const StatisticCells*, const StatisticCells*>,
                       compare_internal::StatisticPlan>;

// Gives each task whose tensors both have a statistic.csv row the plan of their two files.
void PlanTasks(std::span<TensorTask> tasks, Plans* plans) {
  std::pair<const StatisticCells*, const StatisticCells*> last{};  // never a task's key
  const compare_internal::StatisticPlan* last_plan = nullptr;
  for (TensorTask& t : tasks) {
    const std::pair key{CellsOf(*t.a), CellsOf(*t.b)};
    if (!key.first || !key.second) continue;
    if (key != last) {
      auto it = plans->find(key);
      if (it == plans->end()) {
        it = plans->emplace(key, compare_internal::PlanStatistics(*key.first, *key.second)).first;
      }
      last = key;
      last_plan = &it->second;
    }
    t.plan = last_plan;
  }
}

// A new comparison of A's kernel `a` (graph `ga`) with B's `b` (graph `gb`): names, position,
// pairing, and A's source line, else B's (the trace it came from goes with it). Tasks name it
// by its index in result->kernels, not by address.
KernelComparison& AddKernel(const RankEntry& ra, const GraphEntry& ga, const GraphEntry& gb,
                            int64_t iteration, const KernelEntry& a, const KernelEntry& b,
                            Pairing pairing, CompareResult* result) {
  KernelComparison& k = result->kernels.emplace_back();
  k.rank = ra.rank;
  k.graph_id = ga.graph_id;
  k.iteration = iteration;
  k.call = a.call;
  k.calls = a.calls;
  k.order = a.order;
  k.name_a = a.full_name;
  k.name_b = b.full_name;
  k.op_type = a.op_type;
  k.pairing = pairing;
  k.reads_unrecorded =
      !ga.unrecorded_arguments.empty() && ga.unrecorded_arguments.count(k.name_a) > 0;
  k.source_trace = SharedTrace(ga.SharedSourceTrace(k.name_a, a.order));
  k.source_line = SourceLineOf(k.source_trace);
  if (k.source_line.empty()) {
    k.source_trace = SharedTrace(gb.SharedSourceTrace(k.name_b, b.order));
    k.source_line = SourceLineOf(k.source_trace);
  }
  return k;
}

void AddKernelPair(const KernelPair& p, const RankEntry& ra, const GraphEntry& ga,
                   const GraphEntry& gb, int64_t iteration, CompareResult* result,
                   std::vector<TensorTask>* tasks) {
  const size_t kernel_index = result->kernels.size();
  KernelComparison& k = AddKernel(ra, ga, gb, iteration, *p.a, *p.b, p.pairing, result);
  k.role = !p.a->is_parameter ? KernelRole::kOperator
           : iteration < 0    ? KernelRole::kConstant
                              : KernelRole::kParameter;
  // B's tensors paired so far: bits of one word for a kernel of up to 64 (nearly all: no
  // allocation per kernel), else a vector.
  uint64_t used_few = 0;
  std::vector<bool> used_many(p.b->tensors.size() > 64 ? p.b->tensors.size() : 0);
  auto mark = [&](size_t j) {
    if (used_many.empty()) {
      used_few |= uint64_t{1} << j;
    } else {
      used_many[j] = true;
    }
  };
  auto used = [&](size_t j) {
    return used_many.empty() ? (used_few >> j & 1) != 0 : static_cast<bool>(used_many[j]);
  };
  // B's tensors by (io, slot), the first of each: pairing is linear in the kernel's tensors
  // (an Ascend dump file may hold 100,000 of one kernel).
  // A kernel of a few tensors (nearly all) is searched in place.
  auto key = [](const TensorEntry& t) { return uint64_t{t.slot} << 1 | (t.is_input ? 1 : 0); };
  constexpr size_t kFew = 16;
  std::unordered_map<uint64_t, size_t> b_by_slot;
  if (p.b->tensors.size() > kFew) {
    b_by_slot.reserve(p.b->tensors.size());
    for (size_t j = 0; j < p.b->tensors.size(); ++j) b_by_slot.emplace(key(p.b->tensors[j]), j);
  }
  auto partner = [&](const TensorEntry& ta) -> std::optional<size_t> {
    if (p.b->tensors.size() > kFew) {
      auto found = b_by_slot.find(key(ta));
      if (found == b_by_slot.end()) return std::nullopt;
      return found->second;
    }
    for (size_t j = 0; j < p.b->tensors.size(); ++j) {
      if (key(p.b->tensors[j]) == key(ta)) return j;
    }
    return std::nullopt;
  };
  k.tensors.reserve(p.a->tensors.size());
  for (const TensorEntry& ta : p.a->tensors) {
    const size_t at = k.tensors.size();
    TensorComparison& tc = k.tensors.emplace_back();  // room for every tensor is reserved
    tc.is_input = ta.is_input;
    tc.slot = ta.slot;
    const std::optional<size_t> found = partner(ta);
    if (!found) {
      tc.mode = "missing";
      tc.error = kNaN;
      tc.verdict = Verdict::kWarning;
      tc.reason = Describe(tc) + " only in A";
      tc.path_a = ta.path;
      tc.dtype_a = ta.dtype_name;
    } else {
      mark(*found);
      tasks->push_back({kernel_index, at, &ta, &p.b->tensors[*found]});
    }
  }
  for (size_t j = 0; j < p.b->tensors.size(); ++j) {
    if (used(j)) continue;
    TensorComparison& tc = k.tensors.emplace_back();
    tc.is_input = p.b->tensors[j].is_input;
    tc.slot = p.b->tensors[j].slot;
    tc.mode = "missing";
    tc.error = kNaN;
    tc.verdict = Verdict::kWarning;
    tc.reason = Describe(tc) + " only in B";
    tc.path_b = p.b->tensors[j].path;
    tc.dtype_b = p.b->tensors[j].dtype_name;
  }
}

// A compiled kernel and the eager kernel it stands for: their tensor pairs are given.
void AddStandsForPair(const compare_internal::CompiledPair& p, const RankEntry& ra,
                      CompareResult* result, std::vector<TensorTask>* tasks) {
  const size_t kernel_index = result->kernels.size();
  KernelComparison& k =
      AddKernel(ra, *p.graph_a, *p.graph_b, p.iteration, *p.a, *p.b, p.pairing, result);
  k.fused_ops = p.fused_ops;
  k.tensors.reserve(p.tensors.size());
  for (const compare_internal::CompiledPair::Tensors& t : p.tensors) {
    TensorComparison& tc = k.tensors.emplace_back();  // room for every tensor is reserved
    tc.is_input = t.is_input;
    tc.slot = t.slot;
    tasks->push_back({kernel_index, k.tensors.size() - 1, t.a, t.b, nullptr, true});
  }
}

template <typename T, typename Key>
const T* FindMatching(const std::vector<T>& items, const T& like, Key key) {
  for (const T& item : items)
    if (key(item) == key(like)) return &item;
  return items.size() == 1 ? &items.front() : nullptr;
}

}  // namespace

StatisticTitle::StatisticTitle(std::string_view title) {
  // Never freed: the titles' views outlive any result that names them.
  static std::mutex mu;
  static auto* titles = new std::set<std::string, std::less<>>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = titles->find(title);
  if (it == titles->end()) it = titles->emplace(title).first;
  text_ = *it;
}

std::ostream& operator<<(std::ostream& out, const StatisticTitle& title) {
  return out << title.view();
}

const std::vector<SourceLocation>& SharedTrace::None() {
  static const std::vector<SourceLocation> none;
  return none;
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
    case Pairing::kStandsFor:
      return "stands-for";
  }
  return "?";
}

namespace compare_internal {

void SortKernels(std::vector<KernelComparison>* kernels) {
  auto before = [](const KernelComparison& x, const KernelComparison& y) {
    // A compiled comparison's kernels (ran set) in the order they ran across graphs; the
    // others graph by graph. One rank's kernels are all of one kind.
    auto key = [](const KernelComparison& k) {
      const bool ran = k.ran >= 0;
      return std::make_tuple(k.rank, ran ? 0u : k.graph_id, k.iteration < 0, k.iteration,
                             ran ? k.ran : int64_t{0}, k.call, k.order);
    };
    return key(x) < key(y);
  };
  // Kernels come paired in A's execution order, nearly always sorted already: moving a
  // comparison costs more than checking the order.
  if (std::is_sorted(kernels->begin(), kernels->end(), before)) return;
  std::stable_sort(kernels->begin(), kernels->end(), before);
}

void ComparePairs(const std::vector<RankPair>& pairs, const CompareOptions& options,
                  CompareResult* result) {
  // A's kernels bound the pairs, and nearly all have two tensors: room for them at once, where
  // growing a vector of 100,000 comparisons moves each of them many times over.
  size_t kernels = result->kernels.size();
  for (const RankPair& pair : pairs) {
    for (const GraphEntry& g : pair.ra->graphs) {
      for (const IterationEntry& it : g.iterations) kernels += it.kernels.size();
    }
  }
  result->kernels.reserve(kernels);
  std::vector<TensorTask> tasks;
  Plans plans;
  std::mutex mu;
  auto compare = [&](const TensorTask& t) {
    CompareTensor(t.a, t.b, options, t.plan, &result->kernels[t.kernel].tensors[t.tensor],
                  &result->skipped, &mu, t.flat);
  };
  // On one thread, a kernel's tensors are compared as soon as it is paired, while both sides'
  // entries are in the processor's cache; on more, every pair is spread over the threads after.
  const int threads = options.threads > 0 ? options.threads : DefaultThreads();
  const bool at_once = threads == 1 && !options.progress;
  if (!at_once) tasks.reserve(2 * (kernels - result->kernels.size()));
  for (const RankPair& pair : pairs) {
    const RankEntry& ra = *pair.ra;
    const RankEntry& rb = *pair.rb;
    if (compare_internal::IsCompiled(ra) != compare_internal::IsCompiled(rb)) {
      compare_internal::CompiledPairing paired =
          compare_internal::PairCompiled(ra, rb, options.iteration);
      for (const compare_internal::CompiledPair& p : paired.pairs) {
        const size_t first = tasks.size();
        if (p.pairing == Pairing::kStandsFor) {
          AddStandsForPair(p, ra, result, &tasks);
        } else {
          AddKernelPair({p.a, p.b, p.pairing}, ra, *p.graph_a, *p.graph_b, p.iteration, result,
                        &tasks);
        }
        result->kernels.back().ran = p.ran;
        if (at_once) {
          PlanTasks(std::span<TensorTask>(tasks).subspan(first), &plans);
          for (size_t i = first; i < tasks.size(); ++i) compare(tasks[i]);
          tasks.resize(first);
        }
      }
      std::move(paired.unpaired.begin(), paired.unpaired.end(),
                std::back_inserter(result->unpaired));
      continue;
    }
    for (const GraphEntry& ga : ra.graphs) {
      const GraphEntry* gb =
          FindMatching(rb.graphs, ga, [](const GraphEntry& g) { return g.graph_id; });
      if (!gb) continue;
      for (const IterationEntry& ia : ga.iterations) {
        if (options.iteration && ia.iteration != *options.iteration) continue;
        auto ib =
            std::find_if(gb->iterations.begin(), gb->iterations.end(),
                         [&](const IterationEntry& i) { return i.iteration == ia.iteration; });
        if (ib == gb->iterations.end()) continue;
        std::vector<const KernelEntry*> only_a, only_b;
        for (const KernelPair& p : PairKernels(ia.kernels, ib->kernels, &only_a, &only_b)) {
          const size_t first = tasks.size();
          AddKernelPair(p, ra, ga, *gb, ia.iteration, result, &tasks);
          if (at_once) {
            PlanTasks(std::span<TensorTask>(tasks).subspan(first), &plans);
            for (size_t i = first; i < tasks.size(); ++i) compare(tasks[i]);
            tasks.resize(first);
          }
          if (p.a->call == 0 && p.a->calls != p.b->calls) {
            result->call_count_differences.push_back({ra.rank, ga.graph_id, ia.iteration,
                                                      p.a->full_name, p.b->full_name,
                                                      p.a->calls, p.b->calls});
          }
        }
        for (const KernelEntry* k : only_a)
          result->unpaired.push_back(
              {'A', ra.rank, ga.graph_id, ia.iteration, k->call, k->full_name, ""});
        for (const KernelEntry* k : only_b)
          result->unpaired.push_back(
              {'B', ra.rank, ga.graph_id, ia.iteration, k->call, k->full_name, ""});
      }
    }
  }
  PlanTasks(tasks, &plans);
  ParallelFor(tasks.size(), threads, options.progress ? "compare: tensor pairs" : "",
              [&](size_t i) { compare(tasks[i]); });
  const std::map<ScopeKey, double> forward = ForwardScopeErrors(result->kernels);
  for (KernelComparison& k : result->kernels) {
    Attribute(options, SavedTensorError(forward, k), &k);
    (k.verdict == Verdict::kPass      ? result->passed
     : k.verdict == Verdict::kWarning ? result->warnings
                                      : result->errors)++;
  }
  SortKernels(&result->kernels);
}

}  // namespace compare_internal

KernelComparison KernelWithoutTensors(KernelComparison& k) {
  std::vector<TensorComparison> tensors = std::move(k.tensors);
  SharedTrace trace = std::move(k.source_trace);
  KernelComparison light = k;
  k.tensors = std::move(tensors);
  k.source_trace = std::move(trace);
  return light;
}

CompareResult CompareDumps(const DumpIndex& a, const DumpIndex& b, const CompareOptions& options) {
  CompareResult result;
  result.skipped = a.skipped;
  result.skipped.insert(result.skipped.end(), b.skipped.begin(), b.skipped.end());
  std::vector<compare_internal::RankPair> pairs;
  for (const RankEntry& ra : a.ranks) {
    const RankEntry* rb = FindMatching(b.ranks, ra, [](const RankEntry& r) { return r.rank; });
    if (rb) pairs.push_back({&a, &ra, &b, rb});
  }
  compare_internal::ComparePairs(pairs, options, &result);
  Summarize(&result);
  return result;
}

}  // namespace graphdump::analysis
