// graphdump compare A B without --json: what its text shows of the result, kept while the rank
// pairs are compared one at a time, and the per-tensor CSV of --out streamed to a temporary
// file as they finish (docs/scale.md, "Memory and speed at scale"). Memory holds what is
// shown, not every kernel's comparison.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graphdump/analysis/compare.h"
#include "graphdump/status.h"

namespace graphdump::tools {

// What `compare`'s text prints. Kernels are kept without their tensors and source traces.
struct CompareShown {
  size_t kernels = 0;  // paired kernels in all
  int passed = 0, warnings = 0, errors = 0;
  std::vector<analysis::KernelComparison> not_passed;  // the first 21 with a warning or error
  // CompareResult's first_failure and first_adding_error, each with its precision chain text
  // (PrecisionChainText, indent "  ") when it adds error.
  std::optional<analysis::KernelComparison> first_failure, first_adding_error;
  std::string first_failure_chain, first_adding_error_chain;
  std::vector<analysis::KernelComparison> contributors;  // ranked, every one
  std::vector<analysis::KernelComparison> sources;        // the first 11 differing sources
  // The first 11 differing graph inputs: the kernel and the input slot.
  std::vector<std::pair<analysis::KernelComparison, uint32_t>> graph_inputs;
  std::vector<analysis::UnpairedKernel> unpaired;
  std::vector<analysis::CallCountDifference> call_count_differences;
  std::vector<analysis::Skipped> skipped;
};

// Takes the rank pairs of CompareDumpDirs' each_part in order.
class CompareCollector {
 public:
  // `csv`: spill the CSV rows of every part (for WriteCsv).
  explicit CompareCollector(bool csv);
  ~CompareCollector();
  CompareCollector(const CompareCollector&) = delete;
  CompareCollector& operator=(const CompareCollector&) = delete;

  // A part as each_part gives it: summarized alone.
  void Add(analysis::CompareResult& part);

  // Ranks the contributors over every part; `index_skipped` (CompareDumpDirs' result's) come
  // first among the skipped files. Call once, after the last Add.
  CompareShown Finish(std::vector<analysis::Skipped> index_skipped);

  // The CSV (CompareResultCsv's bytes) to `path` through a temporary name: nothing is under
  // `path` unless all of it was written. After Finish.
  Status WriteCsv(const std::string& path);

 private:
  struct Contributor {
    analysis::ContributionKey key;  // its place in the ranking (CompareContribution)
    analysis::KernelComparison kernel;
  };
  std::FILE* spill_ = nullptr;  // the CSV rows, contribution ranks left out; removed on close
  Status spill_status_;
  uint64_t spilled_ = 0;
  // Where a contribution rank belongs in the spill, and whose (index into contributors_).
  std::vector<std::pair<uint64_t, uint32_t>> rank_at_;
  std::vector<Contributor> contributors_;  // in execution order
  std::vector<int> rank_of_;               // contribution rank by index into contributors_
  CompareShown shown_;
};

}  // namespace graphdump::tools
