// graphdump compare A B --json (and --out beside it): each rank pair's comparison spilled to
// temporary files as CompareDumpDirs hands it over, and the JSON and the CSV written from them
// merged, so memory holds what the output needs whole (the contributors, the first failure), not
// every kernel's comparison (docs/scale.md, "Memory and speed at scale").
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "graphdump/analysis/compare.h"
#include "graphdump/status.h"

namespace graphdump::analysis {

class SpilledCompare {
 public:
  // `csv`: spill the CSV's rows too. `keep_contributors`: keep the contributors' kernels
  // (without tensors) for ranked().
  SpilledCompare(bool csv, bool keep_contributors);
  ~SpilledCompare();
  SpilledCompare(const SpilledCompare&) = delete;
  SpilledCompare& operator=(const SpilledCompare&) = delete;

  // A rank pair as CompareDumpDirs' each_part gives it (summarized alone), one at a time. Its
  // records are spilled; the part may be freed after.
  void Add(CompareResult& part);

  // Ranks the contributors over every part as Summarize ranks them over the whole result;
  // `index_skipped` (CompareDumpDirs' result's) come first among the skipped files. Call once,
  // after the last Add. Errors: the temporary files'.
  Status Finish(std::vector<Skipped> index_skipped);

  size_t kernels() const;
  bool failed() const;  // CompareResult::first_failure is set
  const std::vector<Skipped>& skipped() const;
  // With keep_contributors: the contributors ranked, each its own index in `kernels` and listed
  // in `contributors` in rank order, contribution ranks set (what ReplaySuspects takes).
  const CompareResult& ranked() const;

  // CompareResultJson's text (no newline after it), in pieces, to `write`; with `replays` (a
  // JSON array's text), that array under "replays". After Finish.
  Status WriteJson(const std::string* replays,
                   const std::function<Status(std::string_view)>& write) const;
  // CompareResultCsv's bytes to `path` through a temporary name (no file unless all of it was
  // written). With `csv`, after Finish.
  Status WriteCsv(const std::string& path) const;

 private:
  struct Spill;
  std::unique_ptr<Spill> spill_;
};

}  // namespace graphdump::analysis
