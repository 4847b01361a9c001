// The `kernels` entry grammar (docs/configuration.md).
//
// MindSpore normalizes an entry with `json::dump()` and then deletes quotes and spaces. The dump
// step re-escapes backslashes, so a regex written in JSON as "name-regex(a\\.b)" reaches
// std::regex as `a\\.b` (a literal backslash, then any character) and cannot match as intended.
// graphdump uses the JSON-decoded string instead (`a\.b`, a literal dot), which is what the user
// meant; quotes and spaces are still removed as MindSpore does.
#include "graphdump/internal/kernel_entry.h"

#include <re2/re2.h>

#include <algorithm>
#include <string>

#include "graphdump/graph.h"

namespace graphdump::internal {

std::string NormalizeKernelEntry(const std::string& raw) {
  std::string text;
  text.reserve(raw.size());
  for (char c : raw) {
    if (c != '"' && c != ' ') text.push_back(c);
  }
  return text;
}

std::string AsciiLower(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) {
    return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  });
  return lower;
}

StatusOr<KernelPattern> ClassifyKernelEntry(const std::string& normalized) {
  KernelPattern entry;
  entry.text = normalized;
  const std::string prefix = kRegexPrefix;
  if (normalized.rfind(prefix, 0) == 0) {
    if (normalized.back() != ')' || normalized.size() == prefix.size()) {
      return Status::InvalidArgument(
          "\"" + normalized +
          "\" starts with \"name-regex(\" but does not end with ')'; "
          "write name-regex(REGEX), e.g. \"name-regex(Default/.+conv.*)\"");
    }
    entry.kind = KernelPattern::Kind::kRegex;
    entry.pattern = normalized.substr(prefix.size(), normalized.size() - prefix.size() - 1);
    RE2::Options options;
    options.set_log_errors(false);
    RE2 re(entry.pattern, options);
    if (!re.ok()) {
      return Status::InvalidArgument("\"" + normalized + "\" has an invalid regular expression \"" +
                                     entry.pattern + "\": " + re.error() +
                                     " (RE2 syntax, matched against the whole full name)");
    }
    return entry;
  }
  if (normalized.find('/') != std::string::npos || normalized.find("-op") != std::string::npos) {
    entry.kind = KernelPattern::Kind::kFullName;
    entry.pattern = normalized;
    return entry;
  }
  entry.kind = KernelPattern::Kind::kOpType;
  entry.pattern = AsciiLower(normalized);
  return entry;
}

bool OpTypeEntryMatches(const std::string& pattern, const std::string& full_name) {
  return AsciiLower(OpTypeFromFullName(full_name)).find(pattern) != std::string::npos;
}

}  // namespace graphdump::internal
