// Replay's memory budget (src/torch/replay/replay_execute.h): inside a ReplayMemoryScope an allocation
// that would take replay's tensors over the budget throws before anything is allocated; freed
// tensors give their bytes back; other scopes of code allocate as before.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <thread>

#include "replay/replay_execute.h"

namespace graphdump::torch_internal {
namespace {

TEST(ReplayMemoryTest, AllocationsOverTheBudgetThrowBeforeAllocating) {
  const int64_t budget = static_cast<int64_t>(ReplayMemoryBudget());
  ReplayMemoryScope scope;
  // 640 GB in one tensor, and more than the budget in one: refused.
  EXPECT_THROW(at::empty({int64_t{160} << 30}, at::kFloat), c10::Error);
  try {
    at::empty({budget + 1}, at::kByte);
    FAIL() << "allocated more than the budget";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("over its memory budget of"),
              std::string::npos)
        << e.what_without_backtrace();
  }
  // Two tensors of 60% each: the second is refused while the first lives, allowed after.
  // (at::empty does not touch its pages: nothing is really taken.)
  const int64_t part = budget / 10 * 6;
  {
    at::Tensor first = at::empty({part}, at::kByte);
    EXPECT_THROW(at::empty({part}, at::kByte), c10::Error);
  }
  EXPECT_NO_THROW(at::empty({part}, at::kByte));
  // Small tensors and their arithmetic are unaffected.
  at::Tensor x = at::arange(10, at::kFloat);
  EXPECT_EQ((x * 2).sum().item<float>(), 90.0f);
}

TEST(ReplayMemoryTest, OtherThreadsAreNotCounted) {
  const int64_t budget = static_cast<int64_t>(ReplayMemoryBudget());
  ReplayMemoryScope scope;
  bool allocated = false;
  std::thread other([&] {
    at::Tensor t = at::empty({budget + 1}, at::kByte);  // untouched pages: nothing taken
    allocated = t.defined();
  });
  other.join();
  EXPECT_TRUE(allocated);
}

}  // namespace
}  // namespace graphdump::torch_internal
