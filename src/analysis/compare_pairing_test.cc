// compare's pairing of kernels (docs/analysis.md, "Pairing kernels"): by name, by name without
// op ids, then by execution order and op type.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "graphdump/internal/compare_parts.h"

namespace graphdump::analysis::compare_internal {
namespace {

std::vector<KernelEntry> Kernels(const std::vector<std::pair<std::string, std::string>>& typed) {
  std::vector<KernelEntry> out;
  for (const auto& [type, name] : typed) {
    KernelEntry& k = out.emplace_back();
    k.op_type = type;
    k.op_name = k.full_name = name;
  }
  return out;
}

// Names that share nothing: each kernel of A takes B's first kernel of its op type (in any case)
// after the last one taken, so a kernel whose type only comes earlier in B stays unpaired.
TEST(PairKernelsTest, ByExecutionOrderEachTakesTheNextOfItsTypeAfterTheLastTaken) {
  const std::vector<KernelEntry> a = Kernels({{"Conv", "a0"}, {"Relu", "a1"}, {"Conv", "a2"},
                                              {"Add", "a3"}, {"MatMul", "a4"}});
  const std::vector<KernelEntry> b = Kernels({{"conv", "b0"}, {"Add", "b1"}, {"Conv", "b2"},
                                              {"RELU", "b3"}, {"MatMul", "b4"}});
  std::vector<const KernelEntry*> only_a, only_b;
  std::vector<std::pair<std::string, std::string>> paired;
  for (const KernelPair& p : PairKernels(a, b, &only_a, &only_b)) {
    EXPECT_EQ(p.pairing, Pairing::kExecutionOrder);
    paired.emplace_back(p.a->op_name, p.b->op_name);
  }
  EXPECT_EQ(paired, (std::vector<std::pair<std::string, std::string>>{
                        {"a0", "b0"}, {"a1", "b3"}, {"a4", "b4"}}));
  ASSERT_EQ(only_a.size(), 2u);
  EXPECT_EQ(only_a[0]->op_name, "a2");
  EXPECT_EQ(only_a[1]->op_name, "a3");
  ASSERT_EQ(only_b.size(), 2u);
  EXPECT_EQ(only_b[0]->op_name, "b1");
  EXPECT_EQ(only_b[1]->op_name, "b2");
}

// A kernel paired by name is not taken again by execution order; parameters and other calls
// are never paired by it.
TEST(PairKernelsTest, ExecutionOrderSkipsKernelsPairedByNameParametersAndOtherCalls) {
  std::vector<KernelEntry> a = Kernels({{"Add", "same"}, {"Add", "a1"}, {"Parameter", "w"},
                                        {"Mul", "a3"}});
  std::vector<KernelEntry> b = Kernels({{"Add", "b0"}, {"Add", "same"}, {"Parameter", "v"},
                                        {"Mul", "b3"}});
  a[2].is_parameter = b[2].is_parameter = true;
  b[3].call = 1;
  std::vector<const KernelEntry*> only_a, only_b;
  std::vector<std::pair<std::string, std::string>> paired;
  for (const KernelPair& p : PairKernels(a, b, &only_a, &only_b)) {
    paired.emplace_back(p.a->op_name, p.b->op_name);
  }
  EXPECT_EQ(paired, (std::vector<std::pair<std::string, std::string>>{{"same", "same"},
                                                                      {"a1", "b0"}}));
  EXPECT_EQ(only_a.size(), 2u);  // w, a3
  EXPECT_EQ(only_b.size(), 2u);  // v, b3 (call 1)
}

}  // namespace
}  // namespace graphdump::analysis::compare_internal
