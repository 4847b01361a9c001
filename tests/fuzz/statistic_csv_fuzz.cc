// libFuzzer target: the statistic.csv reader (docs/file-format.md). A table parses into rows whose
// shapes have element counts that fit int64, or gives an error naming the file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "graphdump/analysis/dump_index.h"
#include "graphdump/shape.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace graphdump;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto rows = analysis::ParseStatisticCsvText(text, "statistic.csv");
  if (!rows.ok()) {
    if (rows.status().message().rfind("statistic.csv", 0) != 0) std::abort();
    return 0;
  }
  for (const analysis::StatisticRow& row : *rows) {
    if (!ShapeElements(row.shape)) std::abort();
  }
  return 0;
}
