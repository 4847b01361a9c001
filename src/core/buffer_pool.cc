#include "graphdump/internal/buffer_pool.h"

#include <sys/mman.h>

#include <bit>
#include <cstdlib>
#include <new>
#include <utility>

namespace graphdump {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kHugePage = size_t{2} << 20;

// Rounds a request up so that tensors of similar sizes share buffers: to a whole page, then to
// an eighth of the enclosing power of two (at most 12.5% more memory).
size_t CapacityFor(size_t size) {
  size_t capacity = std::max(size, kPage);
  const size_t step = std::max(kPage, std::bit_floor(capacity) / 8);
  return (capacity + step - 1) / step * step;
}

uint8_t* Allocate(size_t capacity) {
  const size_t alignment = capacity >= kHugePage ? kHugePage : kPage;
  void* data = nullptr;
  if (posix_memalign(&data, alignment, capacity) != 0) throw std::bad_alloc();
  // Only an advice: without transparent huge pages the buffer simply keeps 4 KiB pages.
  if (alignment == kHugePage) madvise(data, capacity / kHugePage * kHugePage, MADV_HUGEPAGE);
  return static_cast<uint8_t*>(data);
}

}  // namespace

BufferPool::Buffer::Buffer(Buffer&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      capacity_(std::exchange(other.capacity_, 0)) {}

BufferPool::Buffer& BufferPool::Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Buffer old(std::move(*this));
    pool_ = std::exchange(other.pool_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

BufferPool::Buffer::~Buffer() {
  if (pool_ != nullptr) pool_->Give(data_, capacity_);
}

BufferPool::BufferPool(size_t keep_bytes) : keep_bytes_(keep_bytes) {}

BufferPool::~BufferPool() {
  for (auto& [capacity, data] : idle_) std::free(data);
}

BufferPool::Buffer BufferPool::Take(size_t size) {
  const size_t capacity = CapacityFor(size);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = idle_.lower_bound(capacity);
    if (it != idle_.end() && it->first / 2 <= capacity) {
      Buffer buffer(this, it->second, it->first);
      idle_bytes_ -= it->first;
      idle_.erase(it);
      return buffer;
    }
    ++allocations_;
  }
  return Buffer(this, Allocate(capacity), capacity);
}

void BufferPool::Give(uint8_t* data, size_t capacity) {
  if (capacity > keep_bytes_) {  // could never be kept: keep the smaller ones instead
    std::free(data);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  idle_.emplace(capacity, data);
  idle_bytes_ += capacity;
  // Over the bound: free the smallest idle buffers, which save the least when reused.
  while (idle_bytes_ > keep_bytes_ && !idle_.empty()) {
    auto smallest = idle_.begin();
    idle_bytes_ -= smallest->first;
    std::free(smallest->second);
    idle_.erase(smallest);
  }
}

size_t BufferPool::idle_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_bytes_;
}

uint64_t BufferPool::allocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocations_;
}

}  // namespace graphdump
