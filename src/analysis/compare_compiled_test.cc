// compare of a compiled dump against an eager one (docs/analysis.md, "Compiled against eager"):
// each compiled kernel with the eager kernel whose value it stands for.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "graphdump/internal/compare_parts.h"

namespace graphdump::analysis::compare_internal {
namespace {

TensorEntry Tensor(bool is_input, uint32_t slot, RowShape shape, const std::string& max = "1") {
  TensorEntry t;
  t.is_input = is_input;
  t.slot = slot;
  t.dtype_name = "bfloat16";
  StatisticRow row;
  row.is_input = is_input;
  row.slot = slot;
  row.dtype = InternDTypeName("bfloat16");
  row.shape = std::move(shape);
  row.values["Max Value"] = max;
  t.stats = std::move(row);
  return t;
}

KernelEntry Kernel(const std::string& full_name, std::vector<TensorEntry> tensors,
                   uint64_t timestamp) {
  KernelEntry k;
  k.full_name = full_name;
  const size_t slash = full_name.rfind('/');
  k.op_type = OpTypeFromFullName(full_name);
  k.op_name = full_name.substr(0, slash == std::string::npos ? 0 : slash + 1) + k.op_type;
  k.tensors = std::move(tensors);
  k.first_timestamp = timestamp;
  return k;
}

// The .ir lines that give `full_name` its line of script.py.
std::string IrLines(const std::string& full_name, int line) {
  return "  %0(x) = x()\n      : () -> ()\n      # Fullname with scope: (" + full_name +
         ")\n      # In file /work/script.py(" + std::to_string(line) + ")/code/\n";
}

struct Dumps {
  RankEntry compiled, eager;
};

// Compiled: graph 1 holds addmm (up, line 7), then a fusion of gelu (line 7) and a shift
// (add, sub: line 8) reading addmm's buffer as "buf5". Eager: linear, gelu (line 7), add, sub
// (line 8), each a (2, 8, 128) output.
Dumps Block() {
  Dumps d;
  GraphEntry& g = d.compiled.graphs.emplace_back();
  g.graph_id = 1;
  IterationEntry& it = g.iterations.emplace_back();
  it.kernels.push_back(Kernel("Default/up-Linear/addmm-op0",
                              {Tensor(true, 0, {128}), Tensor(true, 1, {16, 32}),
                               Tensor(true, 2, {32, 128}), Tensor(false, 0, {16, 128}, "7.5")},
                              10));
  it.kernels.push_back(Kernel("Default/FusionOp_mul_erf_add_sub-op1",
                              {Tensor(true, 0, {16, 128}, "7.5"), Tensor(false, 0, {16, 128})},
                              20));
  g.compiled_kernels["Default/up-Linear/addmm-op0"] = {
      "extern_kernels.addmm", "aten.addmm.default (script.py:7)", "",
      {"arg0_1", "arg1_1", "arg2_1"}};
  g.compiled_kernels["Default/FusionOp_mul_erf_add_sub-op1"] = {
      "cpp_fused_add_gelu_sub_view_1",
      "aten.reshape.default (script.py:7); aten.mul.Tensor (script.py:7); aten.erf.default "
      "(script.py:7); aten.add.Tensor (script.py:8); aten.sub.Tensor (script.py:8); "
      "prims.convert_element_type.default (script.py:8)",
      "",
      {"buf5"}};
  GraphEntry& e = d.eager.graphs.emplace_back();
  IterationEntry& ie = e.iterations.emplace_back();
  const std::vector<std::pair<std::string, int>> eager = {{"Default/up-Linear/linear-op0", 7},
                                                          {"Default/gelu-op1", 7},
                                                          {"Default/add-op2", 8},
                                                          {"Default/sub-op3", 8}};
  std::string ir;
  uint64_t timestamp = 100;
  for (const auto& [name, line] : eager) {
    ie.kernels.push_back(Kernel(name, {Tensor(true, 0, {2, 8, 128}), Tensor(false, 0, {2, 8, 128})},
                                timestamp += 10));
    ir += IrLines(name, line);
  }
  e.execution_order = {"Default/up-Linear/linear-op0", "Default/gelu-op1", "Default/add-op2",
                       "Default/sub-op3"};
  e.SetIrText(ir);
  return d;
}

TEST(ParseFusedOpsTest, GivesEachOperatorWithItsLine) {
  const std::vector<FusedOp> ops = ParseFusedOps(
      "aten.relu.default (script.py:7); prims.convert_element_type.default; aten.add_.Tensor "
      "(a/b.py:12)");
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].op, "relu");
  EXPECT_EQ(ops[0].line, "script.py:7");
  EXPECT_EQ(ops[1].op, "convert_element_type");
  EXPECT_EQ(ops[1].line, "");
  EXPECT_EQ(ops[2].op, "add");  // in place: the operator it is
  EXPECT_EQ(ops[2].line, "a/b.py:12");
}

// The fusion stands for its last computing operator's value (sub at line 8, the cast after it
// skipped), not for gelu's or add's, which it never materialises: those are intermediates.
TEST(PairCompiledTest, AFusionStandsForItsLastOperatorsValue) {
  const Dumps d = Block();
  ASSERT_TRUE(IsCompiled(d.compiled));
  ASSERT_FALSE(IsCompiled(d.eager));
  const CompiledPairing p = PairCompiled(d.compiled, d.eager, std::nullopt);
  ASSERT_EQ(p.pairs.size(), 2u);
  EXPECT_EQ(p.pairs[0].a->full_name, "Default/up-Linear/addmm-op0");
  EXPECT_EQ(p.pairs[0].b->full_name, "Default/up-Linear/linear-op0");
  EXPECT_EQ(p.pairs[1].a->full_name, "Default/FusionOp_mul_erf_add_sub-op1");
  EXPECT_EQ(p.pairs[1].b->full_name, "Default/sub-op3");
  EXPECT_EQ(p.pairs[1].pairing, Pairing::kStandsFor);
  EXPECT_NE(p.pairs[1].fused_ops.find("aten.sub.Tensor (script.py:8)"), std::string::npos);
  // The fusion's input is addmm's buffer (its statistic row equals addmm's output's): it is
  // compared with the value addmm stands for, eager linear's output; then its own output with
  // eager sub's.
  const CompiledPair& fused = p.pairs[1];
  ASSERT_EQ(fused.tensors.size(), 2u);
  EXPECT_TRUE(fused.tensors[0].a->is_input);
  EXPECT_EQ(fused.tensors[0].b, &d.eager.graphs[0].iterations[0].kernels[0].tensors[1]);
  EXPECT_FALSE(fused.tensors[1].a->is_input);
  EXPECT_EQ(fused.tensors[1].b, &d.eager.graphs[0].iterations[0].kernels[3].tensors[1]);
  // addmm's graph inputs (arg*) would take eager linear's inputs of their size: none has one.
  ASSERT_EQ(p.pairs[0].tensors.size(), 1u);
  EXPECT_FALSE(p.pairs[0].tensors[0].a->is_input);
  ASSERT_EQ(p.unpaired.size(), 2u);
  for (const UnpairedKernel& u : p.unpaired) {
    EXPECT_EQ(u.side, 'B');
    EXPECT_EQ(u.why, "intermediate") << u.full_name;
  }
  EXPECT_EQ(p.unpaired[0].full_name, "Default/gelu-op1");
  EXPECT_EQ(p.unpaired[1].full_name, "Default/add-op2");
}

// With the eager dump as A, the same pairs, sides swapped: A's tensor first in each pair.
TEST(PairCompiledTest, EagerAsAPairsTheSame) {
  const Dumps d = Block();
  const CompiledPairing p = PairCompiled(d.eager, d.compiled, std::nullopt);
  ASSERT_EQ(p.pairs.size(), 2u);
  EXPECT_EQ(p.pairs[1].a->full_name, "Default/sub-op3");
  EXPECT_EQ(p.pairs[1].b->full_name, "Default/FusionOp_mul_erf_add_sub-op1");
  ASSERT_EQ(p.pairs[1].tensors.size(), 2u);
  EXPECT_EQ(p.pairs[1].tensors[1].a,
            &d.eager.graphs[0].iterations[0].kernels[3].tensors[1]);
  for (const UnpairedKernel& u : p.unpaired) EXPECT_EQ(u.side, 'A');
}

// A compiled kernel whose size no eager kernel of its line and scope has stays unpaired, and
// is not called an intermediate; kernels that ran eagerly on the compiled side (parameters
// of the wrapped module) pair by name without the wrapper.
TEST(PairCompiledTest, NoKernelOfItsSizeLeavesItUnpairedAndParametersPairUnwrapped) {
  Dumps d = Block();
  d.compiled.graphs[0].iterations[0].kernels[1].tensors[1].stats->shape = {16, 64};
  GraphEntry& g0 = d.compiled.graphs.emplace_back();
  g0.graph_id = 0;
  IterationEntry& it0 = g0.iterations.emplace_back();
  KernelEntry param = Kernel("Parameter._orig_mod_up_weight", {Tensor(false, 0, {128, 32})}, 1);
  param.op_type = "Parameter";
  param.op_name = param.full_name;
  param.is_parameter = true;
  it0.kernels.push_back(param);
  KernelEntry eager_param = param;
  eager_param.full_name = eager_param.op_name = "Parameter.up_weight";
  d.eager.graphs[0].iterations[0].kernels.insert(
      d.eager.graphs[0].iterations[0].kernels.begin(), eager_param);
  const CompiledPairing p = PairCompiled(d.compiled, d.eager, std::nullopt);
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const CompiledPair& x : p.pairs) pairs.emplace_back(x.a->full_name, x.b->full_name);
  EXPECT_EQ(pairs, (std::vector<std::pair<std::string, std::string>>{
                       {"Default/up-Linear/addmm-op0", "Default/up-Linear/linear-op0"},
                       {"Parameter._orig_mod_up_weight", "Parameter.up_weight"}}));
  bool fusion_unpaired = false;
  for (const UnpairedKernel& u : p.unpaired) {
    if (u.full_name == "Default/FusionOp_mul_erf_add_sub-op1") {
      fusion_unpaired = true;
      EXPECT_EQ(u.side, 'A');
      EXPECT_EQ(u.why, "");
    }
  }
  EXPECT_TRUE(fusion_unpaired);
}

// What ran eagerly between compiled graphs (graph 0's pow, after the forward's addmm and before
// its fusion) keeps its place: pairs carry A's kernels' positions in the order they ran over
// every graph, and the comparisons sort by it, not graph by graph.
TEST(PairCompiledTest, KernelsKeepTheOrderTheyRanInAcrossGraphs) {
  Dumps d = Block();
  GraphEntry& g0 = d.compiled.graphs.emplace_back();
  g0.graph_id = 0;
  g0.iterations.emplace_back().kernels.push_back(
      Kernel("Default/pow-op0", {Tensor(true, 0, {2, 8, 128}), Tensor(false, 0, {2, 8, 128})},
             15));
  d.eager.graphs[0].iterations[0].kernels.push_back(
      Kernel("Default/pow-op4", {Tensor(true, 0, {2, 8, 128}), Tensor(false, 0, {2, 8, 128})},
             200));
  const CompiledPairing p = PairCompiled(d.compiled, d.eager, std::nullopt);
  std::vector<std::pair<std::string, int64_t>> ran;
  for (const CompiledPair& x : p.pairs) ran.emplace_back(x.a->full_name, x.ran);
  EXPECT_EQ(ran, (std::vector<std::pair<std::string, int64_t>>{
                     {"Default/up-Linear/addmm-op0", 0},
                     {"Default/FusionOp_mul_erf_add_sub-op1", 2},
                     {"Default/pow-op0", 1}}));
  std::vector<KernelComparison> kernels;
  for (const CompiledPair& x : p.pairs) {
    KernelComparison& k = kernels.emplace_back();
    k.graph_id = x.graph_a->graph_id;
    k.name_a = x.a->full_name;
    k.ran = x.ran;
  }
  SortKernels(&kernels);
  std::vector<std::string> names;
  for (const KernelComparison& k : kernels) names.push_back(k.name_a);
  EXPECT_EQ(names, (std::vector<std::string>{"Default/up-Linear/addmm-op0", "Default/pow-op0",
                                             "Default/FusionOp_mul_erf_add_sub-op1"}));
  // Without `ran` (two plain dumps), graph by graph as before.
  for (KernelComparison& k : kernels) k.ran = -1;
  SortKernels(&kernels);
  EXPECT_EQ(kernels[0].name_a, "Default/pow-op0");
}

// A fused kernel writing two buffers (gelu's value, line 7; the shift's, line 8): each output
// is compared with the eager kernel of its own operator's line, neither eager value is left as
// an intermediate, and a later kernel reading the first buffer compares it with eager gelu's
// value, not with the value the kernel stands for.
TEST(PairCompiledTest, EachBufferOfAKernelWritingSeveralPairsWithItsOwnEagerKernel) {
  Dumps d = Block();
  GraphEntry& g = d.compiled.graphs[0];
  KernelEntry& fusion = g.iterations[0].kernels[1];
  fusion.tensors[1].stats->values["Max Value"] = "2.5";  // gelu's buffer, read below
  fusion.tensors.push_back(Tensor(false, 1, {16, 128}));
  g.compiled_kernels["Default/FusionOp_mul_erf_add_sub-op1"].output_ops =
      "aten.mul.Tensor (script.py:7); aten.sub.Tensor (script.py:8)";
  g.iterations[0].kernels.push_back(Kernel(
      "Default/down-Linear/addmm-op2",
      {Tensor(true, 0, {32}), Tensor(true, 1, {16, 128}, "2.5"), Tensor(false, 0, {16, 32})},
      30));
  g.compiled_kernels["Default/down-Linear/addmm-op2"] = {
      "extern_kernels.addmm", "aten.addmm.default (script.py:9)", "",
      {"arg3_1", "Default/FusionOp_mul_erf_add_sub-op1"}};
  IterationEntry& ie = d.eager.graphs[0].iterations[0];
  ie.kernels.push_back(Kernel("Default/down-Linear/linear-op4",
                              {Tensor(true, 0, {2, 8, 128}), Tensor(false, 0, {2, 8, 32})}, 200));
  std::string ir;
  const std::vector<std::pair<std::string, int>> lines = {
      {"Default/up-Linear/linear-op0", 7}, {"Default/gelu-op1", 7}, {"Default/add-op2", 8},
      {"Default/sub-op3", 8}, {"Default/down-Linear/linear-op4", 9}};
  for (const auto& [name, line] : lines) ir += IrLines(name, line);
  d.eager.graphs[0].execution_order.push_back("Default/down-Linear/linear-op4");
  d.eager.graphs[0].SetIrText(ir);

  const CompiledPairing p = PairCompiled(d.compiled, d.eager, std::nullopt);
  ASSERT_EQ(p.pairs.size(), 3u);
  const CompiledPair& fused = p.pairs[1];
  EXPECT_EQ(fused.b->full_name, "Default/sub-op3");  // the value the kernel stands for
  ASSERT_EQ(fused.tensors.size(), 3u);
  EXPECT_TRUE(fused.tensors[0].is_input);
  EXPECT_EQ(fused.tensors[1].slot, 0u);
  EXPECT_EQ(fused.tensors[1].b, &ie.kernels[1].tensors[1]);  // gelu's output
  EXPECT_EQ(fused.tensors[2].slot, 1u);
  EXPECT_EQ(fused.tensors[2].b, &ie.kernels[3].tensors[1]);  // sub's output
  const CompiledPair& down = p.pairs[2];
  EXPECT_EQ(down.b->full_name, "Default/down-Linear/linear-op4");
  ASSERT_EQ(down.tensors.size(), 2u);
  EXPECT_EQ(down.tensors[0].slot, 1u);
  EXPECT_EQ(down.tensors[0].b, &ie.kernels[1].tensors[1]);
  ASSERT_EQ(p.unpaired.size(), 1u);
  EXPECT_EQ(p.unpaired[0].full_name, "Default/add-op2");
  EXPECT_EQ(p.unpaired[0].why, "intermediate");
}

}  // namespace
}  // namespace graphdump::analysis::compare_internal
