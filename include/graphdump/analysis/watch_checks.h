// The table of watch checks: one row per check `graphdump watch --check` knows (docs/analysis.md,
// `graphdump watch`), with its threshold and what it hits. Parsing --check, the --help text and
// the Python package read the names from here instead of listing them again.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "graphdump/status.h"

namespace graphdump::analysis {

enum class WatchKind {
  kNan,
  kInf,
  kOverflow,
  kZero,
  kLarge,
  kGradVanish,
  kGradExplode,
  kWeightUnchanged,
  kWeightChange,
};

struct WatchCheckInfo {
  const char* name;  // as --check spells it: "grad-vanish"
  WatchKind kind;
  bool has_threshold;        // written "name[:T]"
  double default_threshold;  // without ":T"
  const char* hits_when;     // for --help: "gradient l2norm < T"; "" when the name says it
};

// Every check, in the order --help lists them.
std::span<const WatchCheckInfo> WatchCheckTable();

struct WatchCheck {
  WatchKind kind;
  double threshold = 0;  // the checks with has_threshold
  std::string text;      // as the user wrote it ("large:1e4"); "name:default" without ":T"
};

// Parses a comma-separated list of checks ("nan,large:5,grad-vanish"): each a name of the table,
// with ":T" (a non-negative number) where the check has a threshold. Errors are
// kInvalidArgument naming the bad item and listing the allowed ones.
StatusOr<std::vector<WatchCheck>> ParseWatchChecks(const std::string& text);

// "nan, inf, ..., large[:T], ...": the names as --check accepts them.
std::string WatchChecksAllowed();

// The names with what each hits and its default threshold, for --help:
// "nan, inf, overflow (float16 range), ..., large[:T] (|x| > T, 1e4), ...".
std::string WatchChecksHelp();

}  // namespace graphdump::analysis
