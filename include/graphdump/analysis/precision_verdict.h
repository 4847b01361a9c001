// The verdict model of precision debugging (docs/precision.md, "Verdicts"), one judgement shared
// by compare, replay, report and graphdump.compare/replay, so that they never contradict: each
// measures what it can (compare: a kernel's inputs and outputs against the reference dump;
// replay also the kernel's own error and its conditioning) and asks JudgePrecision.
//
// Also the advice that follows an ill-conditioned (or error-adding) kernel: what to keep in
// float32, the kernel and the chain of kernels and parameters that produces its inputs, found
// in a comparison by the reference values each input holds.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graphdump/analysis/compare.h"

namespace graphdump::analysis {

// Inputs that differ from the reference by at most this many times their own rounding to the
// run's dtype carry nothing but rounding (docs/precision.md gives the measurements behind it).
inline constexpr double kRoundingMultiple = 4;

// Unit roundoff of a dtype named as in dump file names: bfloat16 2^-8, float16 2^-11, float32
// (and a name graphdump does not know) 2^-24, float64 2^-53.
double UnitRoundoff(const std::string& dtype);

// `v` rounded to the nearest value a `dtype` tensor holds (ties to even): bfloat16, float16 and
// float32; any other dtype returns `v`.
double RoundToDtype(double v, const std::string& dtype);

// Is `low` a floating dtype of lower precision than `high` (bfloat16 against float32)?
bool LowerPrecision(const std::string& low, const std::string& high);

enum class PrecisionVerdict {
  kAccurate,        // the output's error is what the dtype explains
  kInaccurate,      // its own error (the kernel in its dtype against float64) dominates
  kIllConditioned,  // it magnifies the error of its inputs, which carry (nearly) only rounding
                    // or which it multiplies by kGrowthLimit or more
  kInherits,        // its inputs carry error made upstream, which it passes on
  kAddsError,       // inaccurate or ill-conditioned: own error not measured (compare)
};

// "accurate", "inaccurate", "ill-conditioned", "inherits", "adds error".
const char* PrecisionVerdictName(PrecisionVerdict verdict);

// What a tool measured of one kernel; NaN where it measured nothing.
struct PrecisionEvidence {
  // The output's error exceeds what rounding to the dtype explains (compare: an output fails its
  // standard; replay: own, conditioning or inherited error above kRoundingMultiple roundings).
  bool significant = false;
  // The standard's rtol of the output's dtype (StandardFor): the floor of the growth.
  double growth_floor = 0;
  double input_difference = std::nan("");  // largest relative L2 of an input vs the reference
  double input_rounding = std::nan("");  // largest relative L2 of a reference input rounded
  double output_error = std::nan("");    // relative L2 of the output vs the reference
  // replay only: the kernel's own error and the two shares of the rest (replay.h)
  double own = std::nan(""), conditioning = std::nan(""), inherited = std::nan("");
  double own_floor = 0;  // kRoundingMultiple roundings of the dtype: own above it counts
  // A discrete output differs from the reference (indices of topk/max/sort/argmax, a mask, a
  // data-dependent shape): a different choice, which no rounding explains and no tolerance
  // covers, so it counts as magnifying whatever the growth (docs/precision.md, "Discrete
  // outputs").
  bool discrete = false;
  // The kernel's inputs already carry a discrete difference (indices or a shape that differ) or
  // error an earlier kernel added: what differs was decided upstream, and the kernel inherits.
  bool discrete_upstream = false;
};

struct PrecisionJudgement {
  PrecisionVerdict verdict = PrecisionVerdict::kAccurate;
  // output_error / max(input_difference, growth_floor); NaN when either is unknown.
  double growth = std::nan("");
  // The output's error is large against its inputs': growth >= kGrowthLimit, or inputs close
  // (< 0.1) and output far (> 0.5), or no input measured.
  bool magnifies = false;
  // input_difference <= kRoundingMultiple * input_rounding: the inputs carry only rounding.
  bool inputs_near_rounding = false;
};

// The rules, in order (docs/precision.md, "Verdicts"):
//   1. not significant: accurate;
//   2. own measured, above own_floor and at least conditioning and inherited: inaccurate;
//   3. discrete_upstream: inherits;
//   4. magnifies, or a discrete output differs: ill-conditioned (adds error when own was not
//      measured), whatever the inherited share;
//   5. otherwise: inherits.
PrecisionJudgement JudgePrecision(const PrecisionEvidence& evidence);

// A parameter or buffer rounded to the run's dtype that feeds a kernel's chain.
struct RoundedSource {
  int64_t source = -1;    // index into CompareResult::kernels (role parameter)
  int64_t consumer = -1;  // the operator of the chain that reads it
  double error = 0;       // its norm_rel_err against the reference's values
  std::string dtype_a, dtype_b;
};

// What to keep in float32 for a kernel that adds error: the kernel and every operator its
// inputs come from back to the graph inputs (`kernels`, execution order, the kernel last), and
// the parameters and buffers among those inputs that the run rounded (`parameters`), reported
// even when they pass their standard. `upstream`: the kernel's error_origin when that is
// another kernel (-1 otherwise), which an inheriting kernel names.
struct PrecisionChain {
  std::vector<int64_t> kernels;
  std::vector<RoundedSource> parameters;
  int64_t upstream = -1;
};

// The chain of `r.kernels[kernel]`, traced by reference values: an input comes from the last
// earlier operator of the same iteration and call whose output holds the same reference values
// (shape, dtype, sum and sum of squares), else from a parameter that holds them.
PrecisionChain InputChain(const CompareResult& r, int64_t kernel);

// The --keep-fp32 entries of a chain: the kernels' full names, then the parameters' names.
std::vector<std::string> KeepEntries(const CompareResult& r, const PrecisionChain& chain);

// The advice as lines for a terminal, each indented by `indent`: "keep in float32 ...", a line
// per kernel with its source line, a line per rounded parameter with its error and consumer.
std::string PrecisionChainText(const CompareResult& r, const PrecisionChain& chain,
                               const std::string& indent);

// The chain as JSON: {"keep_fp32": KeepEntries, "kernels": [{"kernel", "op_type",
// "source_line"}], "parameters": [{"parameter", "dtype", "reference_dtype", "error",
// "within_standard", "consumer", "consumer_source_line"}], "upstream": a full name or null}.
nlohmann::json PrecisionChainJson(const CompareResult& r, const PrecisionChain& chain);

}  // namespace graphdump::analysis
