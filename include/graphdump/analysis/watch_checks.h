// The table of watch checks: one row per check `graphdump watch --check` knows (docs/analysis.md,
// `graphdump watch`), with its threshold, what it hits and the test it applies to a tensor (or to
// a weight against its previous iteration). watch, parsing --check, the --help text and the
// Python package read the checks from here. A new check is its WatchKind, its row and its test
// (watch_checks.cc), and its words in docs/analysis.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "graphdump/analysis/tensor_math.h"
#include "graphdump/dtype.h"
#include "graphdump/npy.h"
#include "graphdump/status.h"

namespace graphdump::analysis {

enum class WatchKind {
  kNan,
  kInf,
  kOverflow,
  kZero,
  kLarge,
  kGradVanish,
  kGradExplode,
  kWeightUnchanged,
  kWeightChange,
  kLossSpike,
};

// What a tensor's summary rests on: the file's elements (every count exact), or a statistic.csv
// row, whose columns may lack a count (then only what max and min prove is known).
struct TensorEvidence {
  FiniteSummary s;
  NpyInfo info;  // the file's header (from_file)
  bool from_file = true;
  // The tensor's intended infinities, as watch reports them ("16 -Inf of 64 elements, written
  // on purpose by masked_fill(value=-inf)"); empty when none. Their counts are taken out of `s`.
  std::string intended;
  bool nan_counted = true, inf_counted = true, overflow_counted = true;
  const char* nan_seen_in = "";  // statistics only: "max", "min" or "max and min" is NaN
};

// What a tensor is, beside its values.
struct TensorTraits {
  bool gradient;  // an output of a backward kernel
  bool floating;  // floating-point or complex (or of unknown dtype)
  bool computed;  // made by a kernel of an iteration (not a parameter or a graph constant)
  std::optional<DType> dtype;
};

// A weight against its value one iteration before, or (an optimizer's update kernel) the
// parameter its update wrote against the parameter before the update.
struct WeightDelta {
  bool identical;
  double ratio;  // ||w - w_prev|| / ||w_prev||; with lower_bound, at least this
  int64_t previous_iteration;
  bool update = false;  // an update kernel's parameter after (output 0) and before (input 0)
  // Judged from statistic.csv's L2 norms, without the elements: the ratio is then the lower
  // bound |(||w|| - ||w_prev||)| / ||w_prev|| (the triangle inequality), and `identical` is
  // false (unknown).
  bool lower_bound = false;
  double norm_before = 0, norm_after = 0;  // ||w_prev||, ||w||
};

// Where a tensor check's hit reports the first bad element (files' elements only).
enum class BadElement { kNone, kNan, kInf, kNanElseInf };

struct WatchCheckInfo {
  const char* name;  // as --check spells it: "grad-vanish"
  WatchKind kind;
  bool has_threshold;        // written "name[:T]"
  double default_threshold;  // without ":T"
  const char* hits_when;     // for --help: "gradient l2norm < T"; "" when the name says it
  // A tensor check: the hit's detail ("3 NaN of 64 elements"), or "" when the tensor passes.
  std::string (*tensor)(const TensorEvidence&, const TensorTraits&, double threshold);
  BadElement position;
  // Whether it hits infinities (then intended infinities are taken out before it looks).
  bool hits_infinities;
  // A weight check (tensor is null): the hit's detail, or "".
  std::string (*weight)(const WeightDelta&, double threshold);
  // What the check needs from a dump, said when it judged nothing (`watch` prints it instead
  // of an all-clear): what it looks at and how to dump it.
  const char* needs;
};

// Whether a tensor check judged a tensor (for WatchResult::judged): the check applies to it
// and its evidence holds what the check reads (a gradient's L2 norm, a computed floating-point
// tensor's values).
bool TensorJudged(WatchKind kind, const TensorEvidence& e, const TensorTraits& t);

// A loss against the losses of the iterations before: the hit's detail when `loss` is
// non-finite or more than `threshold` times `usual` (the median of `before` earlier losses),
// else "".
std::string LossSpike(double loss, double usual, size_t before, int64_t first_iteration,
                      double threshold);

// Every check, in the order --help lists them (the order of WatchKind).
std::span<const WatchCheckInfo> WatchCheckTable();

// The row of `kind`.
const WatchCheckInfo& WatchCheckOf(WatchKind kind);

struct WatchCheck {
  WatchKind kind;
  double threshold = 0;  // the checks with has_threshold
  std::string text;      // as the user wrote it ("large:1e4"); "name:default" without ":T"
};

// Parses a comma-separated list of checks ("nan,large:5,grad-vanish"): each a name of the table,
// with ":T" (a non-negative number) where the check has a threshold. Errors are
// kInvalidArgument naming the bad item and listing the allowed ones.
StatusOr<std::vector<WatchCheck>> ParseWatchChecks(const std::string& text);

// "nan, inf, ..., large[:T], ...": the names as --check accepts them.
std::string WatchChecksAllowed();

// The names with what each hits and its default threshold, for --help:
// "nan, inf, overflow (float16 range), ..., large[:T] (|x| > T, 1e4), ...".
std::string WatchChecksHelp();

}  // namespace graphdump::analysis
