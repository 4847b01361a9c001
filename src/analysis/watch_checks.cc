// The table of watch checks (watch_checks.h) and the parsing of --check lists against it.
#include "graphdump/analysis/watch_checks.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

namespace graphdump::analysis {
namespace {

constexpr WatchCheckInfo kChecks[] = {
    {"nan", WatchKind::kNan, false, 0, ""},
    {"inf", WatchKind::kInf, false, 0, ""},
    {"overflow", WatchKind::kOverflow, false, 0, "float16 range"},
    {"zero", WatchKind::kZero, false, 0, "all zero"},
    {"large", WatchKind::kLarge, true, 1e4, "|x| > T"},
    {"grad-vanish", WatchKind::kGradVanish, true, 1e-7, "gradient l2norm < T"},
    {"grad-explode", WatchKind::kGradExplode, true, 1e3, "> T"},
    {"weight-unchanged", WatchKind::kWeightUnchanged, false, 0, ""},
    {"weight-change", WatchKind::kWeightChange, true, 0.1, "||w-w_prev||/||w_prev|| > T"},
};

std::string Spelling(const WatchCheckInfo& info) {
  return std::string(info.name) + (info.has_threshold ? "[:T]" : "");
}

}  // namespace

std::span<const WatchCheckInfo> WatchCheckTable() { return kChecks; }

std::string WatchChecksAllowed() {
  std::string text;
  for (const WatchCheckInfo& info : kChecks) text += (text.empty() ? "" : ", ") + Spelling(info);
  return text;
}

std::string WatchChecksHelp() {
  std::string text;
  for (const WatchCheckInfo& info : kChecks) {
    text += (text.empty() ? "" : ", ") + Spelling(info);
    if (info.has_threshold) {
      text += fmt::format(" ({}, {:g})", info.hits_when, info.default_threshold);
    } else if (*info.hits_when != '\0') {
      text += fmt::format(" ({})", info.hits_when);
    }
  }
  return text;
}

StatusOr<std::vector<WatchCheck>> ParseWatchChecks(const std::string& text) {
  const std::string allowed = " (allowed: " + WatchChecksAllowed() + ")";
  std::vector<WatchCheck> checks;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    start = comma + 1;
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (item.empty()) {
      return Status::InvalidArgument("--check: empty item in '" + text + "'" + allowed);
    }
    const size_t colon = item.find(':');
    const std::string name = item.substr(0, colon);
    const WatchCheckInfo* spec = nullptr;
    for (const WatchCheckInfo& s : kChecks)
      if (name == s.name) spec = &s;
    if (!spec) {
      return Status::InvalidArgument("--check: unknown watchpoint '" + name + "'" + allowed);
    }
    WatchCheck check{spec->kind, spec->default_threshold, item};
    if (colon != std::string::npos) {
      const std::string value = item.substr(colon + 1);
      char* end = nullptr;
      check.threshold = std::strtod(value.c_str(), &end);
      if (!spec->has_threshold || value.empty() || *end != '\0' || !(check.threshold >= 0)) {
        return Status::InvalidArgument("--check: '" + item + "': " +
                                       (spec->has_threshold
                                            ? "threshold must be a non-negative number"
                                            : std::string(spec->name) + " takes no threshold") +
                                       allowed);
      }
    } else if (spec->has_threshold) {
      check.text = fmt::format("{}:{:g}", spec->name, spec->default_threshold);
    }
    checks.push_back(check);
    if (comma == text.size()) break;
  }
  return checks;
}

}  // namespace graphdump::analysis
