#include "graphdump/internal/buffer_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

namespace graphdump {
namespace {

TEST(BufferPoolTest, ReusesGivenBackBuffers) {
  BufferPool pool(size_t{64} << 20);
  uint8_t* first = nullptr;
  {
    BufferPool::Buffer a = pool.Take(3 << 20);
    ASSERT_GE(a.capacity(), size_t{3} << 20);
    std::memset(a.data(), 1, 3 << 20);  // writable over its whole size
    first = a.data();
  }
  EXPECT_GE(pool.idle_bytes(), size_t{3} << 20);
  BufferPool::Buffer b = pool.Take((3 << 20) - 100);  // a similar size gets the same buffer
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(pool.idle_bytes(), 0u);
  EXPECT_EQ(pool.allocations(), 1u);
  BufferPool::Buffer c = pool.Take(3 << 20);  // the idle one is taken: a new allocation
  EXPECT_NE(c.data(), first);
  EXPECT_EQ(pool.allocations(), 2u);
}

TEST(BufferPoolTest, DoesNotHandOutMuchLargerBuffers) {
  BufferPool pool(size_t{64} << 20);
  { BufferPool::Buffer big = pool.Take(16 << 20); }
  BufferPool::Buffer small = pool.Take(4096);
  EXPECT_LT(small.capacity(), size_t{1} << 20);
  EXPECT_EQ(pool.allocations(), 2u);
  EXPECT_GE(pool.idle_bytes(), size_t{16} << 20);  // the big one stays for a big tensor
}

TEST(BufferPoolTest, KeepsAtMostTheBoundIdle) {
  BufferPool pool(size_t{8} << 20);
  {
    std::vector<BufferPool::Buffer> held;
    for (int i = 0; i < 6; ++i) held.push_back(pool.Take(3 << 20));
    BufferPool::Buffer huge = pool.Take(32 << 20);  // larger than the bound: never kept
  }
  EXPECT_LE(pool.idle_bytes(), size_t{8} << 20);
  EXPECT_GT(pool.idle_bytes(), 0u);
}

TEST(BufferPoolTest, MovedBufferIsGivenBackOnce) {
  BufferPool pool(size_t{64} << 20);
  {
    BufferPool::Buffer a = pool.Take(1 << 20);
    BufferPool::Buffer b = std::move(a);
    BufferPool::Buffer c;
    c = std::move(b);
    EXPECT_EQ(a.data(), nullptr);
  }
  EXPECT_EQ(pool.idle_bytes(), BufferPool::Buffer().capacity() + (size_t{1} << 20));
}

TEST(BufferPoolTest, ThreadsTakeAndGiveBack) {
  BufferPool pool(size_t{32} << 20);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < 200; ++i) {
        BufferPool::Buffer b = pool.Take(static_cast<size_t>((i % 7 + 1) * 100000));
        std::memset(b.data(), t, b.capacity());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LE(pool.idle_bytes(), size_t{32} << 20);
  EXPECT_LT(pool.allocations(), 4u * 200u);
}

}  // namespace
}  // namespace graphdump
