// Precision bisection (docs/precision.md, "Bisect"): which kernels must run in float32 for a
// bfloat16 (or float16) run of a model to match its float32 run?
//
//   auto model = graphdump::TorchModel::Load("model.pt", nullptr);   // as loaded, no precision
//   graphdump::BisectOptions options;                                 // bf16, tolerance 0.01
//   auto result = graphdump::BisectPrecision(**model, {x}, options, PrintRound);
//   // result->keep: kernel indices into (*model)->graph().kernels, 1-minimal
//
// The model is loaded once: the float32 reference runs once, then the low-precision model runs
// once per set of kernels tried, the set changed between runs through TorchModel::SetKeepFp32
// (the mechanism of `run --keep-fp32`), so a set found reproduces with
// `graphdump run MODEL --precision bf16 --keep-fp32 NAME...`.
#pragma once

#include <torch/script.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "graphdump/status.h"
#include "graphdump/torch/torch_model.h"

namespace graphdump {

struct BisectOptions {
  at::ScalarType dtype = at::kBFloat16;  // the run under test: kBFloat16 or kHalf
  // The largest error (RelativeL2Error) that counts as matching the float32 run.
  double tolerance = 0.01;
  // A kernel entry as in --keep-fp32 (full name, op type, name-regex(RE)) that selects exactly
  // one kernel: the error is measured on its outputs. Empty: on the model's output.
  std::string target;
};

// One run of the low-precision model with a set of kernels kept in float32.
struct BisectRound {
  enum class Phase {
    kNone,    // no kernel kept: the plain low-precision run
    kAll,     // every candidate kept: the best keeping kernels can do
    kBisect,  // a part of the set found so far
    kPrune,   // the set found so far without one kernel (`removed`)
  };
  int number = 0;  // 1, 2, ... in the order the runs happened
  Phase phase = Phase::kNone;
  std::vector<size_t> kept;       // candidate ids (BisectResult), ascending
  std::optional<size_t> removed;  // kPrune: the candidate left out
  double error = 0;               // RelativeL2Error; +inf when a value is NaN or infinite
  bool pass = false;              // error <= tolerance
};

struct BisectResult {
  enum class Outcome {
    kFound,           // `keep` meets the tolerance and is 1-minimal
    kAlreadyMatches,  // the run with nothing kept meets the tolerance: `keep` is empty
    kUnreachable,     // even every candidate kept misses the tolerance: `keep` is empty
  };
  Outcome outcome = Outcome::kFound;
  std::optional<size_t> target;  // the kernel measured (BisectOptions::target)
  // Candidates, kept sets and `keep` hold candidate ids: an id below `kernel_count` is a kernel
  // (an index into graph().kernels), an id at or above it the floating parameter or buffer
  // StateNames()[id - kernel_count].
  size_t kernel_count = 0;
  // The kernels that ran with a floating input or output, in graph order, then every floating
  // parameter and buffer.
  std::vector<size_t> candidates;
  double error_none = 0;           // nothing kept
  double error_all = 0;            // every candidate kept
  std::vector<size_t> keep;        // the set found, in graph order
  double error = 0;                // with `keep`
  std::vector<BisectRound> rounds;
};

// Called after each run, as it happens (a CLI prints progress with it).
using BisectProgress = std::function<void(const BisectRound& round)>;

// ||actual - reference||_2 / ||reference||_2 over all elements, computed in float64 (the
// absolute ||actual - reference||_2 when the reference is all zeros). Elements where the
// reference is NaN or infinite count as equal when `actual` holds the same value there, else
// make the error +inf; a NaN or infinity in `actual` only makes it +inf too. Tensors of
// different shapes: +inf.
double RelativeL2Error(const at::Tensor& actual, const at::Tensor& reference);
// The largest RelativeL2Error of the pairs `actual[i]`, `reference[i]`; +inf when the counts
// differ: the error of a run whose output holds several tensors.
double MaxRelativeL2Error(const std::vector<at::Tensor>& actual,
                          const std::vector<at::Tensor>& reference);

// One run with the candidates `kept` (ids, ascending) in float32: its error.
using BisectMeasure = std::function<StatusOr<double>(const std::vector<size_t>& kept)>;

// The search of BisectPrecision over runs any caller makes (a script's, bisect_script.h): the
// run with nothing kept, then `find_candidates` (which fills result->candidates and
// kernel_count), the run with every candidate kept, bisection and pruning (steps 1-3 below).
// Fills `result` (rounds, errors, keep, outcome); errors of `measure` or `find_candidates`
// stop it.
Status BisectSearch(const BisectMeasure& measure,
                    const std::function<Status(BisectResult*)>& find_candidates, double tolerance,
                    const BisectProgress& progress, BisectResult* result);

// Finds a small set of kernels that must compute in float32 for the model run in
// `options.dtype` to match its float32 run within `options.tolerance` on the model's output
// (every tensor in it; the error is the largest over them) or on the target kernel's outputs
// (every time it ran in the step).
//   1. runs the float32 reference (as `run --precision fp32`), then the model in `options.dtype`
//      with nothing kept and with every candidate kept: candidates are the kernels that ran
//      with a floating-point input or output and the floating parameters and buffers (kept in
//      float32 as --keep-fp32 keeps them);
//   2. bisection: splits the set in halves in graph order and keeps a half that passes alone;
//      when neither does, reduces each half with the other kept;
//   3. pruning: drops each member whose removal still passes, until a whole pass drops none,
//      so removing any one kernel of the result misses the tolerance (1-minimal).
// Runs of the same set are not repeated. `progress` (may be null) sees each run.
// REQUIRES: `model` as loaded (SetPrecision not called); it is left cast to `options.dtype`.
// Returns InvalidArgument for a dtype other than bf16/fp16, a tolerance that is negative or not
// finite, a target entry that is malformed, selects no kernel or several, or did not run, a
// model output without a tensor, or inputs the model does not take; Internal naming the kernel
// when a kernel fails. An unreachable tolerance or a model that already matches is not an
// error: see BisectResult::outcome.
StatusOr<BisectResult> BisectPrecision(TorchModel& model, const std::vector<c10::IValue>& inputs,
                                       const BisectOptions& options,
                                       const BisectProgress& progress = nullptr);

}  // namespace graphdump
