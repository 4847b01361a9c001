// libFuzzer target: replay's reading of a kernel's recorded call (replay_call.h): the operator it
// chooses and the argument literals it parses, from a graph file (graphs/*.pb) or from a kernel
// record given as text. The first byte picks the form and how many input tensors were dumped:
//   even: the rest is a serialized GraphProto; every kernel of it is planned;
//   odd:  the rest is "FULL_NAME\nOP_TYPE\nSCHEMA\nNAME=VALUE\n..." (one kernel).
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>

#include "graphdump/graph_files.h"
#include "graphdump/replay_call.h"

namespace {

// Checks what PlanReplayCall promises of a plan it accepts.
void Plan(const graphdump::KernelInfo& kernel, size_t inputs) {
  auto plan = graphdump::PlanReplayCall(kernel, inputs);
  if (const auto* p = std::get_if<graphdump::ReplayCallPlan>(&plan)) {
    if (p->input_slots != inputs || p->arguments.size() != kernel.arguments.size() ||
        p->op.name != "aten::" + graphdump::OpTypeFromFullName(kernel.full_name) ||
        !graphdump::IsReplayableOperator(p->op.name.substr(6))) {
      __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace graphdump;
  if (size == 0) return 0;
  const size_t inputs = data[0] >> 1 & 7;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    auto graph = ParseGraphProto(rest, "fuzz.pb");
    if (!graph.ok()) return 0;
    for (const KernelInfo& k : graph->kernels) Plan(k, inputs);
    return 0;
  }
  KernelInfo kernel;
  size_t start = 0;
  for (int line = 0; start <= rest.size(); ++line) {
    size_t end = rest.find('\n', start);
    if (end == std::string::npos) end = rest.size();
    const std::string text = rest.substr(start, end - start);
    start = end + 1;
    if (line == 0) {
      kernel.full_name = text;
    } else if (line == 1) {
      kernel.op_type = text;
    } else if (line == 2) {
      kernel.schema = text;
    } else {
      const size_t eq = text.find('=');
      kernel.arguments.push_back(
          {text.substr(0, eq), eq == std::string::npos ? "" : text.substr(eq + 1)});
    }
  }
  Plan(kernel, inputs);
  return 0;
}
