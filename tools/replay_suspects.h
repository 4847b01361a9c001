// Replays of the kernels a comparison ranks as adding the most error (`compare --replay N`,
// `report --compare A B --replay N`): each is `graphdump-torch replay A KERNEL --reference B
// --json`, a process of its own, since this executable does not link LibTorch.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graphdump/analysis/compare.h"

namespace graphdump::tools {

struct SuspectReplay {
  int64_t kernel = -1;  // index into CompareResult::kernels
  // The replay's JSON object (docs/precision.md, "Replay"); for a replay that printed none (a
  // usage error such as a kernel the reference lacks), {"replayable": false, "verdict": "not
  // replayable", "reason": <its error message>}.
  nlohmann::json result;

  // "inaccurate", "ill-conditioned", "inherits", "accurate" or "not replayable".
  std::string Verdict() const;
  // The replay's words after the verdict: Verdict() + Words() reads "inaccurate at bfloat16:
  // its own error ..." or "not replayable: ...".
  std::string Words() const;
};

// Replays the first `n` distinct kernels of `result.contributors` (a kernel listed for several
// iterations or calls is replayed once, at its first place; the dump under test is `a`, the
// reference `b`), telling stderr which one it is at. Returns an empty list when graphdump-torch is
// missing (after saying so on stderr as `command`).
std::vector<SuspectReplay> ReplaySuspects(const analysis::CompareResult& result,
                                          const std::string& a, const std::string& b, int n,
                                          const char* command);

// The words of one replay for a terminal: "inaccurate: ..." or "not replayable: ...".
std::string SuspectReplayText(const SuspectReplay& replay);

}  // namespace graphdump::tools
