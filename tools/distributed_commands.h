// The distributed forms of watch and compare --ranks (analysis_distributed_run.cc): run in
// every process of the job; the merged result on process 0, nullopt elsewhere (*exit_code 0)
// and after an error (*exit_code set, process 0 told stderr).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graphdump/analysis/rank_compare.h"
#include "graphdump/analysis/watch.h"

namespace graphdump::tools {

std::optional<analysis::WatchResult> DistributedWatch(const std::string& dir,
                                                      const std::vector<analysis::WatchCheck>& checks,
                                                      const analysis::WatchOptions& options,
                                                      int* exit_code);

std::optional<analysis::RankCompareResult> DistributedCompareRanks(
    const std::string& dir, const analysis::RankCompareOptions& options, int* exit_code);

}  // namespace graphdump::tools
