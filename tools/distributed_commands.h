// The distributed forms of watch and compare --ranks (analysis_distributed_run.cc): run in
// every process of the job; the merged result on process 0, nullopt elsewhere (*exit_code 0)
// and after an error (*exit_code set, process 0 told stderr).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analysis_distributed.h"
#include "graphdump/analysis/rank_compare.h"
#include "graphdump/analysis/watch.h"

namespace graphdump::tools {

// `command` is what the process was asked (its DIR is read); every process of the job must be
// asked the same (AnalysisJob::Rendezvous: exit 2 otherwise, naming the process that differs).
std::optional<analysis::WatchResult> DistributedWatch(const JobCommand& command,
                                                      const std::vector<analysis::WatchCheck>& checks,
                                                      const analysis::WatchOptions& options,
                                                      int* exit_code);

std::optional<analysis::RankCompareResult> DistributedCompareRanks(
    const JobCommand& command, const analysis::RankCompareOptions& options, int* exit_code);

}  // namespace graphdump::tools
