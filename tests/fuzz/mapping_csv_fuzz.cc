// libFuzzer target: the mapping.csv reader (docs/layout.md: "{short name},{original name}" lines).
// Every entry has a non-empty short name without a newline or a comma.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "graphdump/analysis/ascend_dump.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& [short_name, name] : graphdump::ParseMappingCsv(text)) {
    if (short_name.empty() || short_name.find_first_of(",\n") != std::string::npos ||
        name.find('\n') != std::string::npos) {
      std::abort();
    }
  }
  return 0;
}
