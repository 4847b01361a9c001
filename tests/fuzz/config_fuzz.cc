// libFuzzer target: the configuration parsers, both dialects (data_dump.json,
// docs/configuration.md, and the GE / TF-adapter {"dump": {...}}, docs/ascend.md). A file either
// parses or gives an error; a file that parses prints (ConfigToJson) a configuration that parses to
// the same text again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "graphdump/config.h"
#include "graphdump/ge_dialect.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace graphdump;
  const std::string text(reinterpret_cast<const char*>(data), size);
  StatusOr<ParsedConfig> parsed = ParseConfig(text, "fuzz.json", "/tmp/diagnostic");
  if (parsed.ok()) {
    const std::string printed = ConfigToJson(parsed->config);
    StatusOr<ParsedConfig> again = ParseConfig(printed, "printed.json", "");
    if (!again.ok() || ConfigToJson(again->config) != printed) std::abort();
  } else if (parsed.status().message().empty()) {
    std::abort();  // an error always says what is wrong
  }
  if (IsGeDumpConfig(text)) {
    StatusOr<std::unique_ptr<ParsedConfig>> ge = ParseGeDumpConfig(text, "ge.json");
    if (ge.ok() && *ge) (void)GeConfigToJson((*ge)->config);
  }
  return 0;
}
