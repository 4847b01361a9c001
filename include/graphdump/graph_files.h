// The graph description files of a dump (docs/layout.md): graphs/*.ir, graphs/*.pb and
// execution_order/*.csv.
//
// The .ir text follows MindSpore's ms_output_trace_code_graph layout, one entry per kernel:
//
//   # IR entry: @graph_0
//   # Total kernels: 2
//   # Producer: graphdump 0.1.0
//
//   subgraph @graph_0() {
//     %0(conv2d) = conv2d(%x, %features.0.weight) {stride: [4, 4], padding: [2, 2]}
//         : (<Tensor[float32], (1, 3, 64, 64)>, <Tensor[float32], (64, 3, 11, 11)>)
//         -> (<Tensor[float32], (1, 64, 15, 15)>)
//         # Fullname with scope: (Default/features-Sequential/0-Conv2d/conv2d-op0)
//         # In file /home/u/model.py(30)/        x = self.conv(x)/
//         # Schema: aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, ...) -> Tensor
//         # Arguments: (input=input.0, weight=input.1, bias=input.2, stride=[4, 4], ...)
//     ...
//   }
//
// Readers find a kernel by its "# Fullname with scope: (...)" line and its source lines by the
// "# In file {path}({line})/{code}/" lines that follow it (innermost first).
#pragma once

#include <string>

#include "graphdump/graph.h"
#include "graphdump/status.h"

namespace graphdump {

// Header "NodeExecutionOrder-FullNameWithScope", then one full name per line.
std::string ExecutionOrderCsv(const GraphInfo& graph);

// The .ir text described above. Used when the host gives no ir_text of its own.
std::string GenerateIrText(const GraphInfo& graph);

// The graph as a serialized graphdump.proto.GraphProto (proto/graphdump_graph.proto).
std::string SerializeGraphProto(const GraphInfo& graph);

// The graph a serialized GraphProto (a graphs/*.pb file's `bytes`) describes, kernels in
// execution order with their schemas and arguments. kCorrupt naming `path` when the bytes are
// not a GraphProto or name an unknown dtype.
StatusOr<GraphInfo> ParseGraphProto(const std::string& bytes, const std::string& path);

// "<Tensor[float32], (1, 3)>"
std::string TensorMetaToIr(const TensorMeta& meta);

}  // namespace graphdump
