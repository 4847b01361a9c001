// The parts of compare (compare.h) shared by its files: pairing kernels (compare_pairing.cc),
// comparing one tensor pair (compare_tensor.cc) and attributing error to kernels
// (compare_attribution.cc). Not for use outside src/analysis.
#pragma once

#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "graphdump/analysis/compare.h"
#include "graphdump/analysis/dump_index.h"
#include "graphdump/statistic_catalogue.h"

namespace graphdump::analysis::compare_internal {

inline const double kNaN = std::nan("");

// Lower-case ASCII.
std::string Lower(std::string s);

// "input 0", "output 1".
std::string Describe(const TensorComparison& t);

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
                                    std::vector<const KernelEntry*>* only_b);

// Compiled against eager (compare_compiled.cc; docs/analysis.md, "Compiled against eager").

// One operator of a compiled kernel's fused_ops: "aten.sub.Tensor (script.py:8)" -> {"sub",
// "script.py:8"} (the line empty when the text names none).
struct FusedOp {
  std::string op;
  std::string line;
};
// The operators of CompiledKernelInfo::fused_ops, in its order; malformed items are skipped.
std::vector<FusedOp> ParseFusedOps(const std::string& text);

// Does a graph of `rank` hold kernels Inductor generated (GraphEntry::compiled_kernels)?
bool IsCompiled(const RankEntry& rank);

// Two kernels of a compiled and an eager rank compared with each other. kStandsFor pairs give
// their tensor pairs (A's, B's); the others pair their tensors as plain compare does.
struct CompiledPair {
  const KernelEntry* a = nullptr;
  const KernelEntry* b = nullptr;
  const GraphEntry* graph_a = nullptr;
  const GraphEntry* graph_b = nullptr;
  int64_t iteration = 0;
  int64_t ran = 0;  // A's kernel's position in the iteration, every graph (KernelComparison::ran)
  Pairing pairing = Pairing::kStandsFor;
  std::string fused_ops;  // the compiled kernel's
  struct Tensors {
    const TensorEntry* a = nullptr;
    const TensorEntry* b = nullptr;
    bool is_input = false;  // the compiled kernel's input or output `slot`
    uint32_t slot = 0;
  };
  std::vector<Tensors> tensors;
};
struct CompiledPairing {
  std::vector<CompiledPair> pairs;       // in the compiled side's execution order, then the rest
  std::vector<UnpairedKernel> unpaired;  // an eager kernel a fusion never materialised: why set
};

// Pairs the kernels of every graph of `a` and `b`, iteration by iteration (only `iteration`
// when set): each compiled kernel with the eager kernel of its standing-for operator's line
// and scope, of its operator where one is, with an output of one of its outputs' size; the
// kernels that ran eagerly on the compiled side as PairKernels does, the compiled module's
// wrapper (_orig_mod) left out of their names. REQUIRES: IsCompiled(a) != IsCompiled(b).
CompiledPairing PairCompiled(const RankEntry& a, const RankEntry& b,
                             std::optional<int64_t> iteration);

// A rank of dump A and the rank of dump B it is compared with (the indexes they belong to give
// the source lines).
struct RankPair {
  const DumpIndex* a = nullptr;
  const RankEntry* ra = nullptr;
  const DumpIndex* b = nullptr;
  const RankEntry* rb = nullptr;
};

// CompareDumps of `pairs` short of Summarize: appends the kernel comparisons (compared on
// options.threads threads, attributed, counted and sorted as CompareResult::kernels), the
// unpaired kernels, the call count differences and the unreadable files to `result`, whose
// `kernels` must be empty.
void ComparePairs(const std::vector<RankPair>& pairs, const CompareOptions& options,
                  CompareResult* result);

// Sorts kernel comparisons as CompareResult::kernels: rank, graph, iteration (constants last),
// call, execution order; a compiled comparison's (KernelComparison::ran set): rank, iteration,
// the order they ran in over every graph. Stable.
void SortKernels(std::vector<KernelComparison>* kernels);

// How the statistic columns of two statistic.csv files pair up. The rows of a file share its
// titles, so this is found once per pair of files and used for each of their row pairs.
struct StatisticPlan {
  struct Column {
    size_t a = 0, b = 0;                  // the column's position in each file's titles
    const StatisticInfo* info = nullptr;  // its catalogue entry; null for a title it lacks
    StatisticTitle title;                 // A's file's title
  };
  std::vector<Column> columns;  // the comparable titles both files hold, sorted by title
  std::optional<size_t> md5_a, md5_b;
};
StatisticPlan PlanStatistics(const StatisticCells& a, const StatisticCells& b);

// One tensor pair: maps the files (when both exist) and fills metrics or statistics.
// Unreadable files are added to `skipped` under `mu`. `plan`: PlanStatistics of the two
// tensors' statistic.csv files, when both have a row there (null: found here).
// `flat`: tensors of different shapes but as many elements compare element for element (a
// compiled kernel's (16, 96) buffer stands for an eager (2, 8, 96) output).
void CompareTensor(const TensorEntry* ta, const TensorEntry* tb, const CompareOptions& options,
                   const StatisticPlan* plan, TensorComparison* out, std::vector<Skipped>* skipped,
                   std::mutex* mu, bool flat = false);

// Backward kernels (Gradients/{forward scope}/{Node}-op{N}) compute from tensors the forward
// pass saved, which are not dumped as their inputs. Their inherited error therefore also counts
// the forward kernels of their scope: the largest tensor error of the operator kernels whose
// full name lies below each scope, by (rank, graph, iteration, call,
// scope).
using ScopeKey = std::tuple<uint32_t, uint32_t, int64_t, uint32_t, std::string>;
std::map<ScopeKey, double> ForwardScopeErrors(const std::vector<KernelComparison>& kernels);

// The forward error a backward kernel inherits through saved tensors; NaN when none is known.
double SavedTensorError(const std::map<ScopeKey, double>& forward, const KernelComparison& k);

// Fills the kernel's attribution fields, then its verdict (compare.h states the rules).
// `saved_error`: a backward kernel's SavedTensorError (counted as an input's), else NaN.
void Attribute(const CompareOptions& options, double saved_error, KernelComparison* k);

// Identity of a reference tensor's values (shape, dtype, elements, sum, sum of squares), to
// tell which earlier kernel output an input, or which parameter holds it; none for a tensor
// compared by statistics or not at all.
using Fingerprint = std::tuple<std::string, std::string, int64_t, double, double>;
std::optional<Fingerprint> FingerprintOf(const TensorComparison& t);

// first_failure, first_adding_error, contributors, differing sources and graph inputs.
void Summarize(CompareResult* r);

}  // namespace graphdump::analysis::compare_internal
