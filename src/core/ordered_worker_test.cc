#include "graphdump/internal/ordered_worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace graphdump {
namespace {

struct Record {
  std::mutex mu;
  std::vector<int> ran;
  std::vector<std::thread::id> destroyed_on;
  std::atomic<size_t> held{0}, most_held{0};
};

class RecordingTask : public OrderedWorker::Task {
 public:
  RecordingTask(Record* record, int number, size_t bytes)
      : record_(record), number_(number), bytes_(bytes) {
    const size_t held = record_->held.fetch_add(bytes) + bytes;
    size_t most = record_->most_held.load();
    while (held > most && !record_->most_held.compare_exchange_weak(most, held)) {
    }
  }
  ~RecordingTask() override {
    record_->held.fetch_sub(bytes_);
    std::lock_guard<std::mutex> lock(record_->mu);
    record_->destroyed_on.push_back(std::this_thread::get_id());
  }
  void Run() override {
    std::this_thread::sleep_for(std::chrono::microseconds(number_ % 7 * 50));
    std::lock_guard<std::mutex> lock(record_->mu);
    record_->ran.push_back(number_);
  }

 private:
  Record* record_;
  int number_;
  size_t bytes_;
};

TEST(OrderedWorkerTest, RunsTasksInOrderWithinTheBudgetAndFreesThemOnTheSubmitter) {
  Record record;
  constexpr int kTasks = 200;
  {
    OrderedWorker worker(/*budget_bytes=*/1000);
    for (int i = 1; i <= kTasks; ++i) {
      EXPECT_EQ(worker.Next(), static_cast<uint64_t>(i));
      // Tasks are made before Submit waits for room: at most one more is held.
      EXPECT_EQ(worker.Submit(std::make_unique<RecordingTask>(&record, i, 300), 300),
                static_cast<uint64_t>(i));
      if (i == 50) {
        worker.WaitFor(50);
        EXPECT_GE(worker.Done(), 50u);
        std::lock_guard<std::mutex> lock(record.mu);
        EXPECT_GE(record.ran.size(), 50u);
      }
    }
    worker.Wait();
    EXPECT_EQ(worker.Done(), static_cast<uint64_t>(kTasks));
    worker.Release();
    EXPECT_EQ(record.held.load(), 0u);  // every task was destroyed by Wait and Release
  }
  ASSERT_EQ(record.ran.size(), static_cast<size_t>(kTasks));
  for (int i = 0; i < kTasks; ++i) EXPECT_EQ(record.ran[i], i + 1);
  // 1000 bytes of budget: three 300-byte tasks in flight, and the one being made.
  EXPECT_LE(record.most_held.load(), 1200u);
  ASSERT_EQ(record.destroyed_on.size(), static_cast<size_t>(kTasks));
  for (const std::thread::id& id : record.destroyed_on) EXPECT_EQ(id, std::this_thread::get_id());
}

TEST(OrderedWorkerTest, ATaskLargerThanTheBudgetRunsAlone) {
  Record record;
  OrderedWorker worker(/*budget_bytes=*/10);
  worker.Submit(std::make_unique<RecordingTask>(&record, 1, 0), 100);
  worker.Submit(std::make_unique<RecordingTask>(&record, 2, 0), 100);
  worker.Wait();
  std::lock_guard<std::mutex> lock(record.mu);
  EXPECT_EQ(record.ran, (std::vector<int>{1, 2}));
}

TEST(OrderedWorkerTest, RecyclesTasksThatHaveRunOnTheSubmitterInOrder) {
  Record record;
  std::vector<int> recycled;
  std::vector<std::thread::id> recycled_on;
  {
    OrderedWorker worker(/*budget_bytes=*/1000, [&](std::unique_ptr<OrderedWorker::Task> task) {
      recycled.push_back(static_cast<int>(recycled.size()) + 1);
      recycled_on.push_back(std::this_thread::get_id());
      // Kept by the host (here: destroyed at once, still on this thread).
    });
    for (int i = 1; i <= 20; ++i) worker.Submit(std::make_unique<RecordingTask>(&record, i, 1), 1);
    worker.Wait();
  }
  EXPECT_EQ(recycled.size(), 20u);  // none destroyed by the worker itself
  for (const std::thread::id& id : recycled_on) EXPECT_EQ(id, std::this_thread::get_id());
  for (const std::thread::id& id : record.destroyed_on) EXPECT_EQ(id, std::this_thread::get_id());
  std::lock_guard<std::mutex> lock(record.mu);
  ASSERT_EQ(record.ran.size(), 20u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(record.ran[i], i + 1);
}

}  // namespace
}  // namespace graphdump
