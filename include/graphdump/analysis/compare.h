// Compare two dump directories kernel by kernel (issue 4 / DESIGN "Compare").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graphdump/analysis/dump_index.h"
#include "graphdump/analysis/tensor_math.h"
#include "graphdump/status.h"

namespace graphdump::analysis {

struct CompareOptions {
  std::optional<int64_t> iteration;  // only this iteration; all common ones when unset
  double atol = 1e-8;
  double rtol = 1e-5;
  int threads = 0;       // 0: DefaultThreads()
  bool progress = true;  // progress bar on a terminal
};

enum class Verdict { kPass = 0, kWarning = 1, kError = 2 };
const char* VerdictName(Verdict v);

// How two kernels were paired.
enum class Pairing { kFullName, kNameWithoutOpId, kExecutionOrder };
const char* PairingName(Pairing p);

struct TensorComparison {
  bool is_input = false;
  uint32_t slot = 0;
  std::string path_a, path_b;
  std::string dtype_a, dtype_b;
  std::string shape_a, shape_b;
  std::string mode;  // "tensor", "statistic", "missing"
  PairMetrics metrics;
  // statistic mode: relative differences of the statistic columns both sides hold
  std::vector<std::pair<std::string, double>> stat_diffs;
  Verdict verdict = Verdict::kPass;
  std::string reason;  // empty when pass
};

struct KernelComparison {
  uint32_t rank = 0;
  uint32_t graph_id = 0;
  int64_t iteration = 0;
  int64_t order = 0;           // position in A's execution order (sort key)
  std::string name_a, name_b;  // full names
  std::string op_type;
  Pairing pairing = Pairing::kFullName;
  std::string source_line;  // the user's "file:line" from A (or B) .ir, may be empty
  std::vector<SourceLocation> source_trace;  // the whole trace it came from (--json)
  std::vector<TensorComparison> tensors;
  Verdict verdict = Verdict::kPass;
  std::string reason;  // of the worst tensor
};

struct UnpairedKernel {
  char side = 'A';
  uint32_t rank = 0, graph_id = 0;
  int64_t iteration = 0;
  std::string full_name;
};

struct CompareResult {
  std::vector<KernelComparison> kernels;  // rank, graph, iteration, execution order
  std::vector<UnpairedKernel> unpaired;
  std::vector<Skipped> skipped;  // unreadable files (both sides), reasons name them
  int passed = 0, warnings = 0, errors = 0;
  // Index into `kernels` of the first kernel with verdict error, in execution order; -1 none.
  int64_t first_failure = -1;
};

// Compares two indexed dumps. Tensor files are mapped one pair at a time, in parallel.
CompareResult CompareDumps(const DumpIndex& a, const DumpIndex& b, const CompareOptions& options);

// The per-tensor CSV (columns documented in docs/analysis.md), header included.
std::string CompareResultCsv(const CompareResult& result);

// The result as JSON text.
std::string CompareResultJson(const CompareResult& result);

}  // namespace graphdump::analysis
