// compare: which kernel of B each kernel of A is compared with (docs/analysis.md, "Pairing
// kernels").
#include <algorithm>
#include <map>
#include <regex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "graphdump/internal/compare_parts.h"

namespace graphdump::analysis::compare_internal {
namespace {

// "Default_net-Net_conv-Conv2d_Conv2D-op12" -> "Default_net-Net_conv-Conv2d_Conv2D".
std::string WithoutOpIds(const std::string& name) {
  static const std::regex kOpId("-op[0-9]+");
  return std::regex_replace(name, kOpId, "");
}

}  // namespace

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<KernelPair> PairKernels(const std::vector<KernelEntry>& a,
                                    const std::vector<KernelEntry>& b,
                                    std::vector<const KernelEntry*>* only_a,
                                    std::vector<const KernelEntry*>* only_b) {
  std::vector<KernelPair> pairs;
  std::vector<bool> used_a(a.size()), used_b(b.size());
  // (name, call) -> B's first such kernel; the names are views of B's.
  struct NameHash {
    size_t operator()(const std::pair<std::string_view, uint32_t>& k) const {
      return std::hash<std::string_view>()(k.first) * 31 + k.second;
    }
  };
  std::unordered_map<std::pair<std::string_view, uint32_t>, size_t, NameHash> by_name;
  by_name.reserve(b.size());
  for (size_t j = 0; j < b.size(); ++j) {
    by_name.emplace(std::pair<std::string_view, uint32_t>(b[j].op_name, b[j].call), j);
  }
  for (size_t i = 0; i < a.size(); ++i) {
    auto it = by_name.find(std::pair<std::string_view, uint32_t>(a[i].op_name, a[i].call));
    if (it != by_name.end() && !used_b[it->second]) {
      pairs.push_back({&a[i], &b[it->second], Pairing::kFullName});
      used_a[i] = used_b[it->second] = true;
    }
  }
  using StrippedKey = std::pair<std::string, uint32_t>;  // (name without op ids, call)
  std::map<StrippedKey, std::vector<size_t>> b_stripped;
  for (size_t j = 0; j < b.size(); ++j) {
    if (!used_b[j]) b_stripped[{WithoutOpIds(b[j].op_name), b[j].call}].push_back(j);
  }
  std::map<StrippedKey, size_t> taken;
  for (size_t i = 0; i < a.size(); ++i) {
    if (used_a[i]) continue;
    const StrippedKey key{WithoutOpIds(a[i].op_name), a[i].call};
    auto it = b_stripped.find(key);
    if (it == b_stripped.end() || taken[key] >= it->second.size()) continue;
    const size_t j = it->second[taken[key]++];
    pairs.push_back({&a[i], &b[j], Pairing::kNameWithoutOpId});
    used_a[i] = used_b[j] = true;
  }
  // By execution order: each kernel of A left takes B's first kernel left after the last one
  // taken this way with its op type (in any case) and call. B's kernels left are listed by (op
  // type, call) in order, so that each is found by a binary search, not by a scan from the
  // cursor (two runs whose names all differ would make that quadratic).
  using TypeKey = std::pair<std::string, uint32_t>;  // (lower-cased op type, call)
  std::map<TypeKey, std::vector<size_t>> b_by_type;
  for (size_t j = 0; j < b.size(); ++j) {
    if (!used_b[j] && !b[j].is_parameter) b_by_type[{Lower(b[j].op_type), b[j].call}].push_back(j);
  }
  size_t cursor = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (used_a[i] || a[i].is_parameter) continue;
    auto it = b_by_type.find({Lower(a[i].op_type), a[i].call});
    if (it == b_by_type.end()) continue;
    // Every kernel of B taken here lies before the cursor: the first one at or after it is free.
    auto next = std::lower_bound(it->second.begin(), it->second.end(), cursor);
    if (next == it->second.end()) continue;
    const size_t j = *next;
    pairs.push_back({&a[i], &b[j], Pairing::kExecutionOrder});
    used_a[i] = used_b[j] = true;
    cursor = j + 1;
  }
  for (size_t i = 0; i < a.size(); ++i)
    if (!used_a[i]) only_a->push_back(&a[i]);
  for (size_t j = 0; j < b.size(); ++j)
    if (!used_b[j]) only_b->push_back(&b[j]);
  return pairs;
}

}  // namespace graphdump::analysis::compare_internal
