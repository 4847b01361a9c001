// The results of watch and compare as bytes and back, exactly (NaN and infinities included), so
// that processes analysing parts of one dump (docs/scale.md, "Distributed analysis") can send
// their results to one that merges them. MessagePack; only for graphdump's own processes of one
// build (no promise across versions).
#pragma once

#include <string>

#include "graphdump/analysis/compare.h"
#include "graphdump/analysis/watch.h"
#include "graphdump/status.h"

namespace graphdump::analysis {

std::string EncodeWatchResult(const WatchResult& result);
// Errors: kCorrupt when `bytes` is not what EncodeWatchResult writes.
StatusOr<WatchResult> DecodeWatchResult(const std::string& bytes);

std::string EncodeCompareResult(const CompareResult& result);
StatusOr<CompareResult> DecodeCompareResult(const std::string& bytes);

std::string EncodeSkipped(const std::vector<Skipped>& skipped);
StatusOr<std::vector<Skipped>> DecodeSkipped(const std::string& bytes);

}  // namespace graphdump::analysis
