#include "graphdump/internal/helper_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace graphdump {
namespace {

TEST(HelperThreadsTest, RunsEveryTaskOnce) {
  EXPECT_GE(HelperThreadCount(), 1);
  EXPECT_LE(HelperThreadCount(), 4);
  for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{1000}}) {
    std::vector<std::atomic<int>> runs(count);
    RunOnHelpers(count, [&](size_t i) { runs[i].fetch_add(1); });
    for (size_t i = 0; i < count; ++i) EXPECT_EQ(runs[i].load(), 1) << i << " of " << count;
  }
}

// Callers on several threads at once: one has the helpers, the others run their own tasks;
// every loop completes with each of its tasks run once.
TEST(HelperThreadsTest, CallersAtOnceEachFinish) {
  constexpr int kCallers = 4;
  constexpr size_t kTasks = 500;
  std::vector<std::vector<std::atomic<int>>> runs(kCallers);
  for (auto& r : runs) r = std::vector<std::atomic<int>>(kTasks);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 50; ++round) {
        RunOnHelpers(kTasks, [&](size_t i) { runs[c][i].fetch_add(1); });
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) {
    for (size_t i = 0; i < kTasks; ++i) EXPECT_EQ(runs[c][i].load(), 50) << c << "/" << i;
  }
}

}  // namespace
}  // namespace graphdump
