// libFuzzer target: the .ir reader (source traces of graphs/ms_output_trace_code_graph_{id}.ir,
// which trace and compare show). Any text gives a map of names to source locations.
#include <cstddef>
#include <cstdint>
#include <string>

#include "graphdump/analysis/dump_index.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace graphdump;
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)analysis::ParseIrSourceTraces(
      text, {"Default/net-Net/Conv2D-op1", "Default/act-ReLU/ReLU-op2", "Gradients/x/MatMul-op3"});
  return 0;
}
