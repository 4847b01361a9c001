// The description of an executed graph that a host (an executor) gives the dump session: its
// kernels in execution order, with full names, source traces, inputs and outputs. The session
// writes it as graphs/*.ir, graphs/*.pb and execution_order/*.csv, and selects kernels from it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graphdump/dtype.h"

namespace graphdump {

struct SourceLocation {
  std::string file;  // as recorded by the host, e.g. "/home/u/model.py"
  int line = 0;
  int column = 0;
  std::string code;  // the source text of that range, may span lines
};

struct TensorMeta {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
};

// One argument of a kernel's operator call, in the order of its schema, as `graphdump replay`
// rebuilds the call (docs/graph-proto.md). `value` is one of
//   input.N              the kernel's dumped input slot N (a tensor)
//   [input.N, input.M]   a list of tensors, each a dumped input slot
//   a constant           None, True, False, 3, -1.5, 1e-05, inf, "mean", [1, 1], [0.5, 2.0]
//   <runtime>            a non-tensor value computed while the graph ran (x.size(0)), or a
//                        tensor list whose length only the run knew: not recorded
struct KernelArgument {
  std::string name;   // the schema's name for it: "stride"
  std::string value;  // as above
};

struct KernelInfo {
  uint32_t graph_id = 0;
  uint32_t index = 0;        // position in GraphInfo::kernels; set by the session
  std::string full_name;     // "Default/features-Sequential/0-Conv2d/conv2d-op3"
  std::string op_type;       // "conv2d"; derived from full_name when empty (docs/layout.md)
  std::string module_path;   // "features.0": what set_dump marks (dump_mode 2)
  std::vector<SourceLocation> source_trace;  // innermost (the kernel's own line) first
  std::vector<std::string> input_names;      // producer value names for the .ir, may be empty
  std::vector<TensorMeta> inputs;            // as seen when the graph was compiled, may be empty
  std::vector<TensorMeta> outputs;
  std::map<std::string, std::string> attributes;  // non-tensor arguments (stride, padding...)
  // The operator's schema as LibTorch prints it ("aten::conv2d(Tensor input, Tensor weight,
  // Tensor? bias=None, int[2] stride=1, ...) -> Tensor") and every argument of the call in its
  // order; empty when the host records none.
  std::string schema;
  std::vector<KernelArgument> arguments;
  uint32_t stream_id = 0;
  bool marked_for_dump = false;  // set_dump marked this kernel's module (dump_mode 2)
  // The host has run the graph and this kernel has not run yet: it lies in a branch not taken
  // (the in-place branch of F.relu). False when the host does not know.
  bool not_run = false;
  // Slots holding uninitialised memory, which is not data (docs/file-format.md): the outputs of
  // an operator that allocates without writing (`empty`, `empty_like`, `new_empty`...: an
  // AllocatesUninitialized op type), and the inputs that hold such memory nothing wrote yet (an
  // in-place kernel's input, dumped before it writes). Ascending; empty when none or unknown.
  std::vector<uint32_t> uninitialized_inputs;
  std::vector<uint32_t> uninitialized_outputs;
};

// Does an operator of this op type return memory it does not write: `empty`, `empty_like`,
// `empty_strided`, `new_empty`, `new_empty_strided`, `empty_permuted` and the quantized
// `_empty_affine_quantized`, `_empty_per_channel_affine_quantized`, `empty_quantized`?
bool AllocatesUninitialized(const std::string& op_type);

struct GraphInfo {
  uint32_t graph_id = 0;
  std::string name;           // e.g. "forward"; informational
  std::vector<KernelInfo> kernels;  // in execution order
  // IR text for graphs/ms_output_trace_code_graph_{id}.ir. When empty, the session writes one
  // generated from `kernels` (see graph_files.h for the format).
  std::string ir_text;
};

// op_type from a full name: the last '/'-segment without its "-op{N}" suffix.
std::string OpTypeFromFullName(const std::string& full_name);

// Is `file` one of PyTorch's own library files (torch/nn/functional.py, torch/nn/modules/...,
// an archive's serialized code/__torch__/...), rather than the user's code?
bool IsTorchLibraryFile(const std::string& file);

// The frame of a source trace (innermost first) a user recognises as theirs: the innermost one
// outside PyTorch's own library files; the innermost frame when every frame is torch's; null
// for an empty trace. The whole trace stays in the .ir and .pb.
const SourceLocation* UserFrame(const std::vector<SourceLocation>& trace);

}  // namespace graphdump
