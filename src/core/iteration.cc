// IterationSet: the `iteration` grammar of docs/configuration.md.
//
// MindSpore accepts only [0-9|-] or "all" and silently matches nothing for malformed segments
// (empty, reversed, dangling '-', overflow). graphdump reports each of those as an error, and
// accepts spaces around '|' and '-' as MindSpore's own tutorial writes them.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "graphdump/config.h"

namespace graphdump {
namespace {

constexpr char kAllowed[] =
    "allowed: \"all\", or numbers and inclusive ranges separated by '|', e.g. \"0|5-8|100-120\"";

std::string Trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  const size_t end = text.find_last_not_of(" \t");
  return text.substr(begin, end - begin + 1);
}

// Parses a decimal number; returns what is wrong with it ("is not ..."), empty on success.
std::string ParseNumber(const std::string& text, uint64_t* value) {
  if (text.find_first_not_of("0123456789") != std::string::npos) {
    return "is not a non-negative integer";
  }
  uint64_t result = 0;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  for (char c : text) {
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (result > (kMax - digit) / 10) return "is above 2^64-1 (18446744073709551615)";
    result = result * 10 + digit;
  }
  *value = result;
  return "";
}

// Parses one end of a LOW-HIGH range; returns an explanation on failure, empty on success.
std::string ParseBound(const std::string& text, uint64_t* value) {
  const std::string problem = ParseNumber(text, value);
  return problem.empty() ? "" : "has \"" + text + "\", which " + problem;
}

// Parses one '|'-separated segment; returns an explanation on failure, empty on success.
std::string ParseSegment(const std::string& segment, std::pair<uint64_t, uint64_t>* range) {
  const std::string text = Trim(segment);
  if (text.empty()) return "is empty (two '|' in a row, or a '|' at the start or end)";
  const size_t dash = text.find('-');
  if (dash == std::string::npos) {
    std::string problem = ParseNumber(text, &range->first);
    range->second = range->first;
    return problem;
  }
  if (text.find('-', dash + 1) != std::string::npos) return "has more than one '-'";
  const std::string low = Trim(text.substr(0, dash));
  const std::string high = Trim(text.substr(dash + 1));
  if (low.empty() || high.empty()) return "has a dangling '-' (write LOW-HIGH, e.g. 5-8)";
  std::string problem = ParseBound(low, &range->first);
  if (problem.empty()) problem = ParseBound(high, &range->second);
  if (problem.empty() && range->first > range->second) {
    problem = "is a reversed range (" + low + " > " + high + "; write " + high + "-" + low + ")";
  }
  return problem;
}

// Sorts and merges overlapping or adjacent ranges.
std::vector<std::pair<uint64_t, uint64_t>> Canonical(
    std::vector<std::pair<uint64_t, uint64_t>> in) {
  std::sort(in.begin(), in.end());
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const auto& range : in) {
    if (!out.empty() &&
        (range.first <= out.back().second || range.first - 1 == out.back().second)) {
      out.back().second = std::max(out.back().second, range.second);
    } else {
      out.push_back(range);
    }
  }
  return out;
}

}  // namespace

StatusOr<IterationSet> IterationSet::Parse(const std::string& text, const std::string& key_path) {
  const std::string trimmed = Trim(text);
  if (trimmed == "all") return All();
  const std::string head = key_path + ": \"" + text + "\" is not a valid iteration selection: ";
  if (trimmed.empty()) return Status::InvalidArgument(head + "it is empty; " + kAllowed);
  std::vector<std::string> problems;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  size_t start = 0;
  while (true) {
    const size_t bar = trimmed.find('|', start);
    const std::string segment =
        trimmed.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
    std::pair<uint64_t, uint64_t> range;
    const std::string problem = ParseSegment(segment, &range);
    if (problem.empty()) {
      ranges.push_back(range);
    } else {
      problems.push_back(head + "segment \"" + segment + "\" " + problem + "; " + kAllowed);
    }
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  if (!problems.empty()) {
    std::string message;
    for (const std::string& problem : problems) {
      message += (message.empty() ? "" : "\n") + problem;
    }
    return Status::InvalidArgument(message);
  }
  IterationSet set;
  set.ranges_ = Canonical(std::move(ranges));
  return set;
}

IterationSet IterationSet::All() {
  IterationSet set;
  set.all_ = true;
  return set;
}

bool IterationSet::Contains(uint64_t iteration) const {
  if (all_) return true;
  // The first range whose end is >= iteration; ranges are sorted and disjoint.
  auto it = std::lower_bound(ranges_.begin(), ranges_.end(), iteration,
                             [](const std::pair<uint64_t, uint64_t>& range, uint64_t value) {
                               return range.second < value;
                             });
  return it != ranges_.end() && it->first <= iteration;
}

std::string IterationSet::ToString() const {
  if (all_) return "all";
  std::string text;
  for (const auto& [low, high] : ranges_) {
    if (!text.empty()) text += "|";
    text += std::to_string(low);
    if (high != low) text += "-" + std::to_string(high);
  }
  return text;
}

}  // namespace graphdump
