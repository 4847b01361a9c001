// GraphCompiler: turns a TorchScript method into a plan the executor runs node by node.
//
// The method graph is copied, inlined and cleaned of dead code. Every ATen node that produces a
// tensor (or a list of tensors) becomes a kernel of the GraphInfo handed to the dump session:
//   full name  Default/{attr}-{Class}/.../{op_type}-op{N}   (docs/layout.md)
//   op_type    the ATen operator's unqualified name as written: aten::conv2d -> "conv2d",
//              aten::relu_ -> "relu_", aten::max_pool2d -> "max_pool2d"
//   N          the kernel's position among all kernels of the graph (0, 1, ...), unique
//   module     the attribute path of the module that ran it ("features.0"); "" for top level
//   source     the node's original Python line, then the call sites it was inlined from
// Each value gets a slot in a flat frame; a slot is released after its last use, where a use
// inside a nested block (an If branch, a Loop body) counts as a use by the If or Loop node in
// the value's own block, so values a loop reads stay alive until the loop ends.
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graphdump/graph.h"
#include "graphdump/status.h"

namespace graphdump::torch_internal {

enum class StepKind {
  kConstant,
  kGetAttr,
  kSetAttr,
  kIf,
  kLoop,
  kListConstruct,
  kListUnpack,
  kTupleConstruct,
  kTupleUnpack,
  kTupleIndex,
  kTupleSlice,
  kDictConstruct,
  kUninitialized,
  kPassThrough,  // prim::unchecked_cast: the value itself
  kOperation,    // anything with a registered operator, kernels included
};

struct BlockPlan;

struct StepPlan {
  const torch::jit::Node* node = nullptr;
  StepKind kind = StepKind::kOperation;
  mutable std::optional<torch::jit::Operation> op;  // kOperation (calling it is non-const)
  c10::IValue constant;                             // kConstant
  std::string attr_name;                            // kGetAttr, kSetAttr
  c10::TypePtr type;                                // construct kinds: the output type
  int64_t slice_begin = 0;                          // kTupleSlice
  int64_t slice_end = 0;
  int kernel = -1;                         // index in GraphInfo::kernels; -1: not a kernel
  std::vector<size_t> written_inputs;      // kernels: inputs the operator writes in place
  bool allocates = false;  // kernels: the operator allocates without writing (`empty`...)
  std::vector<size_t> unannotated_writes;  // of those, the ones its schema does not declare
  std::vector<uint32_t> inputs;            // slots
  std::vector<uint32_t> outputs;           // slots
  std::vector<uint32_t> frees;             // slots whose last use is this step
  std::vector<BlockPlan> blocks;           // kIf: then, else; kLoop: body
};

struct BlockPlan {
  std::vector<uint32_t> params;  // slots of the block's inputs
  std::vector<StepPlan> steps;
  std::vector<uint32_t> returns;       // slots of the block's outputs
  std::vector<uint32_t> return_frees;  // slots released once the outputs are read
};

struct CompiledGraph {
  std::shared_ptr<torch::jit::Graph> graph;  // owns every Node the plan points to
  BlockPlan body;
  uint32_t num_slots = 0;
  GraphInfo info;                      // kernels in graph order, metas empty
  std::vector<c10::IValue> constants;  // tensor and number constants, for OnConstant
  // Module path ("features.0") -> scope ("features-Sequential/0-Conv2d"); "" -> "".
  std::map<std::string, std::string> module_scopes;
};

// Compiles `method` of `module` as graph `graph_id`. Errors (kUnsupported) name a node kind the
// executor cannot run and where it comes from.
StatusOr<std::unique_ptr<CompiledGraph>> CompileGraph(torch::jit::Module& module,
                                                      const std::string& method, uint32_t graph_id);

// "file:line `code`" of the frame of a kernel's or node's source trace a user recognises as
// theirs (UserFrame: the innermost outside PyTorch's own files), for messages.
std::string DescribeTrace(const std::vector<SourceLocation>& trace);
std::string DescribeSource(const KernelInfo& kernel);
std::string DescribeNodeSource(const torch::jit::Node* node);

// A constant as KernelArgument writes it (graph.h): a Python literal a replay parses back
// (None, True, 3, -1.5, inf, "mean", [1, 1]); nullopt for a value with no such form (an object,
// a tensor). Both front ends record arguments with it.
std::optional<std::string> ArgumentLiteral(const c10::IValue& value);

}  // namespace graphdump::torch_internal
