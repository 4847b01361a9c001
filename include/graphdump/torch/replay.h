// Replay: re-executes one dumped kernel with LibTorch from its dumped inputs and splits its error
// against a reference run three ways (docs/precision.md, "Replay"):
//
//   own           the kernel in its dtype against float64 on the same inputs: it computes
//                 inaccurately at this precision (a bfloat16 accumulation);
//   conditioning  float64 on the reference run's inputs against float64 on those inputs rounded
//                 to the kernel's dtype: it magnifies the rounding of its inputs (a subtraction
//                 that cancels);
//   inherited     float64 on this run's inputs against float64 on the reference's inputs
//                 rounded: its inputs differ from the reference run's beyond rounding, through
//                 earlier kernels.
//
// The call is rebuilt from the graph files (graphs/*.pb: the operator's schema and each
// argument, a dumped input slot or a constant; docs/graph-proto.md). This header has no LibTorch
// types: the analysis commands can hold a ReplayResult without linking LibTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graphdump/status.h"

namespace graphdump {

struct ReplayRequest {
  std::string dump_dir;              // the run under test: a dump root, rank_{id} or {net_name} dir
  std::string kernel;                // a full name, or a unique substring of one / op type ("dot")
  std::string reference_dir;         // the reference run (same model in float32); empty: own only
  std::optional<uint32_t> rank;      // default: the dump's first rank
  std::optional<int64_t> iteration;  // default: the first iteration holding the kernel
  std::optional<uint32_t> call;      // the kernel's call in the iteration; default: call 0
};

// One tensor `a` against a reference `b`: the metrics of `graphdump compare` (tensor_math.h).
struct ReplayError {
  double rel_l2 = 0;   // ||a - b||_2 / ||reference||_2 (the reference is named per number)
  double max_abs = 0;  // max |a - b|
  double cosine = 1;   // a.b / (|a| |b|)
};

enum class ReplayVerdict {
  kAccurate,        // each of the three is within 4 roundings (4u) of the kernel's dtype
  kInaccurate,      // own dominates
  kIllConditioned,  // conditioning dominates
  kInherits,        // inherited dominates
  kNotReplayable,   // the call could not be rebuilt or run: `reason` says why
};

// "accurate", "inaccurate", "ill-conditioned", "inherits", "not replayable".
const char* ReplayVerdictName(ReplayVerdict verdict);

struct ReplayResult {
  std::string full_name;  // the kernel's full name
  std::string op_type;
  std::string schema;         // as recorded; empty when the graph files hold none
  std::string source;         // "file:line `code`" of the user's frame, or empty
  std::string dump_dir;       // the rank directory replayed from
  std::string reference_dir;  // the reference's rank directory; empty without one
  uint32_t rank = 0;
  uint32_t graph_id = 0;
  int64_t iteration = 0;
  uint32_t call = 0;  // which call of the kernel in the iteration (docs/analysis.md)
  std::string dtype;  // the dtype the kernel computed in ("bfloat16"): its floating inputs'

  ReplayVerdict verdict = ReplayVerdict::kNotReplayable;
  std::string reason;              // kNotReplayable: why; otherwise the verdict in words
  std::vector<std::string> notes;  // what the reader should also know, one sentence each

  // Replayed in its dtype, every output equals the dumped one bit for bit (NaN equal to NaN).
  bool reproduces = false;
  double reproduce_max_abs = 0;  // largest |replayed - dumped| over the outputs

  double unit_roundoff = 0;  // u of `dtype`: 2^-8 bfloat16, 2^-11 float16, 2^-24 float32
  // The output measured (`output_slot`): the first discrete output (integer or bool: the
  // indices of topk, max, sort, argmax) whose elements differ, where one does (from the
  // reference run's dumped output; without a reference, from float64's on the same inputs);
  // else the first floating output; else the first output. Every output is replayed.
  uint32_t output_slot = 0;
  // The measured output is discrete: own, conditioning, inherited and total are then the share
  // of its elements that differ (rel_l2), and rounding is 0 (an index has no rounding).
  bool discrete = false;
  std::string output_dtype;         // the measured output's dtype ("int64")
  int64_t discrete_elements = 0;    // its elements
  int64_t discrete_changed = 0;     // how many differ from the reference run's (see above)
  bool discrete_input_differs = false;  // an integer or bool input differs from the reference's
  // With a reference: the measured discrete output's change was made upstream (an integer or
  // bool input differs, or compare of the iteration finds the kernel inheriting its discrete
  // change rather than making it: the same judgement as compare's).
  bool discrete_upstream = false;
  ReplayError own;      // y_dtype(x) vs y_f64(x); rel_l2 over ||y_f64(x)||
  double rounding = 0;  // rel L2 of y_f64(x) rounded to dtype: what the output alone loses

  bool has_reference = false;
  ReplayError conditioning;     // y_f64(round(x_ref)) vs y_f64(x_ref); over ||y_f64(x_ref)||
  ReplayError inherited;        // y_f64(x) vs y_f64(round(x_ref)); over ||y_f64(x_ref)||
  ReplayError total;            // y_dtype(x) vs y_f64(x_ref): the error the three make up
  double input_difference = 0;  // largest rel L2 of a floating input vs the reference's
  double input_rounding = 0;    // largest rel L2 of a reference input rounded to dtype
  // total / max(input_difference, the dtype standard's rtol), and whether input_difference is
  // within kRoundingMultiple of input_rounding (docs/precision.md, "Verdicts").
  double growth = 0;
  bool inputs_near_rounding = false;

  // With a reference, from a comparison of the replayed iteration (precision_verdict.h):
  // ill-conditioned: the kernel and the chain producing its inputs to keep in float32, as JSON
  // (PrecisionChainJson) and as text lines; inherits: the kernel upstream that added the error.
  std::string float32_chain;
  std::string chain_text;
  std::string upstream;
};

// Replays `request.kernel` (docs/precision.md). Errors (kNotFound, kInvalidArgument: a usage
// error) name the directory or the kernel: a dump directory that does not exist or holds no
// dump, a kernel name that matches nothing or several kernels (the message lists them), an
// iteration or rank the dump lacks, a reference that lacks the kernel or whose inputs have
// other shapes. A kernel that cannot be replayed (a random operator, an argument computed at run
// time, no dumped inputs, no schema recorded) is not an error: the result's verdict is
// kNotReplayable and `reason` says why.
StatusOr<ReplayResult> ReplayKernel(const ReplayRequest& request);

// The result as one JSON object (docs/precision.md lists the keys); numbers that are not
// finite are null.
std::string ReplayResultJson(const ReplayResult& result);

// The result as text for a terminal: the kernel, the three numbers and the verdict in words.
std::string ReplayResultText(const ReplayResult& result);

}  // namespace graphdump
