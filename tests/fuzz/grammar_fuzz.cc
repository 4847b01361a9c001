// libFuzzer target: the iteration and kernel entry grammars (docs/configuration.md). The input is
// split at its first newline: the iteration text, then one kernel entry. A parsed iteration set
// prints a canonical form that parses to itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "graphdump/config.h"
#include "graphdump/internal/kernel_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace graphdump;
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string iteration = input.substr(0, newline);
  const std::string kernel = newline == std::string::npos ? input : input.substr(newline + 1);

  StatusOr<IterationSet> set = IterationSet::Parse(iteration, "common_dump_settings.iteration");
  if (set.ok()) {
    const std::string canonical = set->ToString();
    StatusOr<IterationSet> again = IterationSet::Parse(canonical, "again");
    if (!again.ok() || again->ToString() != canonical) std::abort();
    for (uint64_t i : {uint64_t{0}, uint64_t{1}, uint64_t{7}, UINT64_MAX}) {
      if (again->Contains(i) != set->Contains(i)) std::abort();
    }
  }
  const std::string normalized = internal::NormalizeKernelEntry(kernel);
  if (!normalized.empty()) {
    StatusOr<KernelPattern> entry = internal::ClassifyKernelEntry(normalized);
    if (entry.ok() && entry->kind == KernelPattern::Kind::kOpType) {
      (void)internal::OpTypeEntryMatches(entry->pattern, "Default/net-Net/Conv2D-op12");
      (void)internal::OpTypeEntryMatches(entry->pattern, kernel);
    }
  }
  return 0;
}
