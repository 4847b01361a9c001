// EagerGraph (src/torch/eager/eager_graph.h): a kernel is found again by its key (scope,
// operator, occurrence) in every call of the root, whatever order the calls ask in, with the
// kernels the host adds between them.
#include "eager/eager_graph.h"

#include <gtest/gtest.h>

namespace graphdump::torch_internal {
namespace {

KernelInfo Named(const std::string& full_name) {
  KernelInfo k;
  k.full_name = full_name;
  return k;
}

TEST(EagerGraphTest, FindsEachKernelByItsKeyInAnyOrder) {
  EagerGraph graph(0, /*session=*/nullptr, {{"", "Net"}}, {}, {});
  // The first call: three kernels of scope 0, a kernel the host adds, one of scope 1.
  EXPECT_EQ(graph.Find(0, 0, 0), -1);
  EXPECT_EQ(graph.Add(0, 0, 0, Named("Default/add")).index, 0u);
  EXPECT_EQ(graph.Add(0, 1, 0, Named("Default/mul")).index, 1u);
  EXPECT_EQ(graph.Add(0, 0, 1, Named("Default/add")).index, 2u);
  EXPECT_EQ(graph.AddHostKernel("Gradients/Default", "AddBackward0", "").index, 3u);
  EXPECT_EQ(graph.Add(1, 0, 0, Named("Default/fc-Linear/add")).index, 4u);

  // The next call, in the same order: each found, across the host's kernel.
  EXPECT_EQ(graph.Find(0, 0, 0), 0);
  EXPECT_EQ(graph.Find(0, 1, 0), 1);
  EXPECT_EQ(graph.Find(0, 0, 1), 2);
  EXPECT_EQ(graph.Find(1, 0, 0), 4);
  // Another order (a branch taken the other way): each still its own kernel.
  EXPECT_EQ(graph.Find(0, 0, 1), 2);
  EXPECT_EQ(graph.Find(0, 0, 0), 0);
  EXPECT_EQ(graph.Find(1, 0, 0), 4);
  EXPECT_EQ(graph.Find(0, 1, 0), 1);
  // Keys never added, the one after the last kernel included: new.
  EXPECT_EQ(graph.Find(0, 1, 1), -1);
  EXPECT_EQ(graph.Find(1, 0, 1), -1);
  EXPECT_EQ(graph.Find(2, 0, 0), -1);
  // A kernel added after a miss is found where the last one left off.
  EXPECT_EQ(graph.Add(1, 0, 1, Named("Default/fc-Linear/add")).index, 5u);
  EXPECT_EQ(graph.Find(0, 0, 0), 0);
  EXPECT_EQ(graph.Find(1, 0, 1), 5);

  // Names: the program's kernels numbered in the order first seen, the host's apart.
  EXPECT_EQ(graph.kernel(4).full_name, "Default/fc-Linear/add-op3");
  EXPECT_EQ(graph.kernel(5).full_name, "Default/fc-Linear/add-op4");
  EXPECT_EQ(graph.kernel(3).full_name, "Gradients/Default/AddBackward0-op1000000000");
}

}  // namespace
}  // namespace graphdump::torch_internal
