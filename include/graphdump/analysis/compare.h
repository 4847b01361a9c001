// Compare two dump directories kernel by kernel (docs/analysis.md, `graphdump compare`).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "graphdump/analysis/dump_index.h"
#include "graphdump/analysis/tensor_math.h"
#include "graphdump/status.h"

namespace graphdump::analysis {

struct CompareOptions {
  std::optional<int64_t> iteration;  // only this iteration; all common ones when unset
  // false (the default): each tensor pair is judged by the precision standard of the lower
  // precision of its two dtypes (StandardFor, docs/precision.md), and `atol`/`rtol` are unused.
  // true (the CLI's --atol/--rtol): every pair is checked with |a-b| <= atol + rtol*|b|.
  bool user_tolerances = false;
  double atol = 1e-8;  // torch.allclose's defaults
  double rtol = 1e-5;
  int threads = 0;       // 0: DefaultThreads()
  bool progress = true;  // progress bar on a terminal
};

// The tolerance standard of a dtype (docs/precision.md gives the table and its sources): an
// element passes when |a-b| <= rtol * max(|b|, small_value), and relative errors divide by
// max(|b|, small_value).
struct PrecisionStandard {
  std::string dtype;  // "bfloat16", "float16", "float32", "float64"; "exact" for integer pairs
  double rtol = 0;
  double small_value = 0;
};

// The standard a tensor pair is judged by: that of the lower precision of its two dtypes
// (the larger rtol and small-value floor), named as in dump file names ("bfloat16",
// MindSpore's "Float32"); an unknown or missing name counts as float32; integers and bool are
// exact (rtol 0), and a floating dtype against an integer one takes the floating one's.
PrecisionStandard StandardFor(const std::string& dtype_a, const std::string& dtype_b);

// A kernel whose output grows the error of its inputs by this factor or more adds error
// (msprobe's "output error >= 10x input error" warning rule).
inline constexpr double kGrowthLimit = 10.0;

enum class Verdict { kPass = 0, kWarning = 1, kError = 2 };
const char* VerdictName(Verdict v);

// How two kernels were paired. kStandsFor: a compiled kernel with the eager kernel whose value it
// stands for (docs/analysis.md, "Compiled against eager").
enum class Pairing { kFullName, kNameWithoutOpId, kExecutionOrder, kStandsFor };
const char* PairingName(Pairing p);

// A statistic column's title ("Max Value"), its text kept once for the whole process: a dump
// names a few titles, and millions of tensor comparisons name them. Reads as its text.
class StatisticTitle {
 public:
  StatisticTitle() = default;
  StatisticTitle(std::string_view title);  // implicit, as the text it stands for
  StatisticTitle(const char* title) : StatisticTitle(std::string_view(title)) {}
  StatisticTitle(const std::string& title) : StatisticTitle(std::string_view(title)) {}
  std::string_view view() const { return text_; }
  operator std::string_view() const { return text_; }
  friend bool operator==(const StatisticTitle& a, std::string_view b) { return a.text_ == b; }
  friend bool operator<(const StatisticTitle& a, const StatisticTitle& b) {
    return a.text_ < b.text_;
  }

 private:
  std::string_view text_;
};
std::ostream& operator<<(std::ostream& out, const StatisticTitle& title);

// A kernel's source trace (innermost frame first), shared by the index it came from and every
// comparison of the kernel rather than copied into each. Reads as the frames' vector.
class SharedTrace {
 public:
  SharedTrace() = default;
  SharedTrace(std::vector<SourceLocation> frames)  // implicit, as the frames it holds
      : frames_(std::make_shared<const std::vector<SourceLocation>>(std::move(frames))) {}
  explicit SharedTrace(std::shared_ptr<const std::vector<SourceLocation>> frames)
      : frames_(std::move(frames)) {}
  const std::vector<SourceLocation>& get() const { return frames_ ? *frames_ : None(); }
  operator const std::vector<SourceLocation>&() const { return get(); }
  bool empty() const { return get().empty(); }
  size_t size() const { return get().size(); }
  const SourceLocation& operator[](size_t i) const { return get()[i]; }
  auto begin() const { return get().begin(); }
  auto end() const { return get().end(); }

 private:
  static const std::vector<SourceLocation>& None();
  std::shared_ptr<const std::vector<SourceLocation>> frames_;
};

struct TensorComparison {
  bool is_input = false;
  uint32_t slot = 0;
  std::string path_a, path_b;
  std::string dtype_a, dtype_b;
  std::string shape_a, shape_b;
  std::string mode;  // "tensor", "statistic", "missing"
  PairMetrics metrics;
  // statistic mode: relative differences of the statistic columns both sides hold
  std::vector<std::pair<StatisticTitle, double>> stat_diffs;
  // statistic mode, verdict error: the statistic outside the standard by the largest relative
  // difference ("Max Value"), with its value on each side; empty otherwise.
  std::string worst_statistic;
  double worst_statistic_a = 0, worst_statistic_b = 0;
  Verdict verdict = Verdict::kPass;
  std::string reason;  // empty when pass
  // Where the first failing element (or NaN/Inf mismatch) lies in A's shape, e.g. {5, 3}; the
  // reason names it and its row. Empty when no element fails.
  std::vector<int64_t> first_index;
  // The elementwise standard applied: a dtype name from StandardFor, or "user" (--atol/--rtol).
  std::string standard;
  // The error attribution uses: metrics.norm_rel_err for compared tensors, +inf when shapes
  // or NaN/Inf positions differ, NaN when not measured (statistic-only, missing, skipped).
  double error = 0;
  // What rounding the reference to A's dtype alone gives (RoundingError, the norm_rel_err
  // floor of the standard) when A's dtype is a lower floating precision than B's (bfloat16
  // against float32); NaN otherwise.
  double rounding = std::nan("");
  // A discrete pair: integer or bool on both sides (indices of topk/max/sort/argmax, a mask),
  // compared element for element. Its `error` is the share of elements that differ
  // (metrics.allclose_failures of metrics.elements): no rounding explains a different index.
  bool discrete = false;
  // The shapes differ (a data-dependent shape: nonzero, boolean indexing).
  bool shape_differs = false;
  // The tensor holds uninitialised memory (the output of `empty`, or such memory not yet
  // written, as the dump's graph files mark it): it is not data and was not compared.
  bool uninitialized = false;
};

// A discrete change a tensor comparison shows: a discrete pair whose elements differ, or a
// shape that differs.
bool DiscreteChange(const TensorComparison& t);

// What a compared kernel is. Parameters (Parameter.* files) and graph constants (constants/)
// are sources of values, not computations: attribution never names them.
enum class KernelRole { kOperator, kParameter, kConstant };
const char* KernelRoleName(KernelRole r);  // "operator", "parameter", "constant"

struct KernelComparison {
  uint32_t rank = 0;
  uint32_t graph_id = 0;
  int64_t iteration = 0;
  uint32_t call = 0;           // the call of the kernel in the iteration, the same on both sides
  uint32_t calls = 1;          // A's calls of the kernel in the iteration
  int64_t order = 0;           // position in A's execution order (sort key)
  // Of a compiled dump against an eager one: A's kernel's position among the iteration's
  // kernels of every graph of its rank, in the order they ran (a compiled forward, the eager
  // code after it in graph 0, the compiled backward); the sort key there instead of graph and
  // order. -1 otherwise.
  int64_t ran = -1;
  std::string name_a, name_b;  // full names
  std::string op_type;
  Pairing pairing = Pairing::kFullName;
  std::string source_line;  // the user's "file:line" from A (or B) .ir, may be empty
  SharedTrace source_trace;  // the whole trace it came from (--json)
  // A compiled kernel's (kStandsFor pairing; A's or B's) ATen operators with their lines, as
  // CompiledKernelInfo::fused_ops; empty otherwise.
  std::string fused_ops;
  std::vector<TensorComparison> tensors;
  // pass / warning / error and why. An operator kernel is an error only when it adds error
  // (below; an output whose shape or NaN/Inf positions differ from agreeing inputs does) or an
  // output fails where no error could be measured (statistic-only); an output that fails its
  // standard while the kernel only inherits its inputs' error is a warning ("inherits error").
  // Inputs that fail their standard never make the kernel fail: they were made upstream (an
  // earlier kernel, a graph input or a parameter, reported apart); they make it a warning only
  // when no output was compared (an inputs-only dump, AccumulateGrad). Sources (parameters,
  // constants) take their worst tensor's verdict.
  Verdict verdict = Verdict::kPass;
  std::string reason;
  KernelRole role = KernelRole::kOperator;

  // Attribution (docs/precision.md), in TensorComparison::error units (norm_rel_err):
  // the worst error over the compared inputs and over the compared outputs; NaN when no such
  // tensor was compared (an output-only dump has no input error). A backward kernel
  // (Gradients/{scope}/...) computes from tensors its forward pass saved, which are not
  // dumped as its inputs: its input_error also counts every tensor of the forward operator
  // kernels below {scope} in the same iteration.
  double input_error = std::nan("");
  double output_error = std::nan("");
  // output_error / max(input_error, rtol of the outputs' standard): how much the kernel
  // multiplies the error it receives; NaN when either error is unknown.
  double growth = std::nan("");
  // output_error - input_error (output_error alone when no input was compared): the error the
  // kernel adds; used to rank the contributors.
  double added_error = std::nan("");
  // The kernel adds error: an operator whose outputs fail their standard, and whose growth is
  // >= kGrowthLimit, or whose inputs are close (input_error < 0.1) while an output is far
  // (output_error > 0.5) (msprobe's rules); with no input compared, any output failure counts.
  bool adds_error = false;
  // 1-based position in CompareResult::contributors; 0 when not listed.
  int contribution_rank = 0;
  // The largest TensorComparison::rounding over the compared inputs (NaN when none was
  // measured), and whether input_error is within kRoundingMultiple of it: the inputs carry
  // nothing but their rounding to A's dtype (docs/precision.md, "Verdicts").
  double input_rounding = std::nan("");
  bool inputs_near_rounding = false;
  // The operator that added the error this kernel carries (index into CompareResult::kernels):
  // itself when it adds error, else the origin of the earlier operator that made its input of
  // largest error; -1 when none is known (the error came from a source, or nothing differs).
  int64_t error_origin = -1;
  // A discrete divergence (docs/precision.md, "Discrete outputs"): an output's indices, mask or
  // shape differ from the reference while its inputs carry no discrete difference and no error
  // an earlier kernel added. It adds error whatever its growth and ranks before every other
  // contributor. `discrete_change` says what differs ("output 1: 198 of 256 indices differ",
  // "output 0: shape (55,1) vs (17,1)"), also for a kernel that inherits such a change; empty
  // when no output changed discretely.
  bool discrete_divergence = false;
  std::string discrete_change;
  // The graph files record an argument of A's kernel as `<runtime>` (an index list, a size
  // computed while it ran): it reads values the comparison cannot see.
  bool reads_unrecorded = false;
};

// The ranked order of contributors (CompareResult::contributors): discrete divergences first
// (among them execution order decides), then the larger added_error, then the larger growth.
// Negative when `a` comes first, positive when `b` does, 0 when the caller's execution order
// decides.
struct ContributionKey {
  bool discrete = false;
  double added_error = 0;
  double growth = 0;
};
ContributionKey ContributionKeyOf(const KernelComparison& k);
int CompareContribution(const ContributionKey& a, const ContributionKey& b);

struct UnpairedKernel {
  char side = 'A';
  uint32_t rank = 0, graph_id = 0;
  int64_t iteration = 0;
  uint32_t call = 0;
  std::string full_name;
  // Why it is unpaired where that is known, not a failure: "intermediate" for an eager
  // kernel whose value a fusion of the compiled side never materialises (docs/analysis.md,
  // "Compiled against eager"); empty otherwise.
  std::string why;
};

// A paired kernel that ran a different number of times in one iteration on the two sides
// (calls pair by number; the extra calls are unpaired).
struct CallCountDifference {
  uint32_t rank = 0, graph_id = 0;
  int64_t iteration = 0;
  std::string name_a, name_b;
  uint32_t calls_a = 0, calls_b = 0;
};

struct CompareResult {
  std::vector<KernelComparison> kernels;  // rank, graph, iteration, call, execution order
  std::vector<UnpairedKernel> unpaired;
  std::vector<CallCountDifference> call_count_differences;
  std::vector<Skipped> skipped;  // unreadable files (both sides), reasons name them
  int passed = 0, warnings = 0, errors = 0;
  // Index into `kernels` of the first kernel with verdict error in execution order (sorted
  // as `kernels`), -1 when none. Plain compare skips sources (parameters, constants): it is
  // the first operator that adds error or, where outputs were not dumped, that fails.
  // CompareRanks counts parameters too (they are what it checks).
  int64_t first_failure = -1;
  // Index into `kernels` of the first kernel with adds_error, in execution order; -1 none.
  // Equal to first_failure when outputs were dumped. What `compare` prints as the first
  // divergence.
  int64_t first_adding_error = -1;
  // Indices into `kernels` of every kernel with adds_error, discrete divergences first, then
  // the largest added_error (CompareContribution; ties: execution order). `compare --replay N`
  // replays the first N.
  std::vector<int64_t> contributors;
  // Indices into `kernels` of parameters and constants whose values differ beyond their
  // standard (verdict error), in execution order: reported apart, never a divergence.
  std::vector<int64_t> differing_sources;
  // Inputs of operator kernels that no earlier dumped kernel produced (graph inputs: the
  // input of the first kernels, not a parameter) whose values differ beyond their standard:
  // (kernel index, input slot), in execution order.
  std::vector<std::pair<int64_t, uint32_t>> differing_graph_inputs;
};

// A copy of `k` without its tensors and source trace: what a summary keeps of a kernel it shows.
// `k` is left as it was (its tensors are moved aside while it is copied, not copied).
KernelComparison KernelWithoutTensors(KernelComparison& k);

// Compares two indexed dumps. Tensor files are mapped one pair at a time, in parallel.
CompareResult CompareDumps(const DumpIndex& a, const DumpIndex& b, const CompareOptions& options);

// What CompareDumpDirs read besides the result, for the messages around it.
struct CompareDirsInfo {
  std::vector<std::string> warnings_a, warnings_b;  // the indexes' warnings, as IndexDump's
  // The dumped iterations of any rank and graph of each dump (constants left out).
  std::set<int64_t> iterations_a, iterations_b;
};

// CompareDumps of the dump directories `a` and `b` (as IndexDump accepts them), indexed one rank
// pair at a time: each rank of A with B's rank of the same id (B's only rank when it holds one),
// as CompareDumps pairs them, as many pairs at once as there are threads and each pair's tensors
// on the threads left over. Memory holds the rank pairs being compared and the result, not the
// dumps' indexes; the result equals CompareDumps' on the whole indexes. `each_a`, when set, is
// called with every rank of A (its position, its one-rank index, and the threads its own work
// may use), on the thread that indexed it, before the rank is compared. Errors as IndexDump's,
// A's first. `each_part`, when set, is called with each rank pair's result, summarized alone
// (its indices count within it; contribution_rank is left 0), in A's rank order, one call at a
// time, and the part is freed after: the result then holds the indexes' skipped files only, and
// the concatenation of the parts' kernels is CompareDumps' `kernels`.
StatusOr<CompareResult> CompareDumpDirs(
    const std::string& a, const std::string& b, const CompareOptions& options,
    CompareDirsInfo* info,
    const std::function<void(size_t, const DumpIndex&, int threads)>& each_a = {},
    const std::function<void(CompareResult&)>& each_part = {});

// The per-tensor CSV's header line and the rows of one kernel (CompareResultCsv is the header
// and the rows of every kernel), its contribution_rank given. With `rank_at`, the rank is left
// out and where it belongs in `out` (before each row's newline) is appended to `rank_at`.
std::string CompareCsvHeader();
void AppendCompareCsvRows(const KernelComparison& k, int contribution_rank, std::string* out,
                          std::vector<size_t>* rank_at = nullptr);

// The per-tensor CSV (columns documented in docs/analysis.md), header included.
std::string CompareResultCsv(const CompareResult& result);

// The result as JSON text.
std::string CompareResultJson(const CompareResult& result);

}  // namespace graphdump::analysis
