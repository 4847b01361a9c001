// Reusable byte buffers for the tensor copies of asynchronous mode. A fresh allocation of tens of
// MiB comes from the kernel unmapped, so copying a tensor into it pays a page fault and a zeroed
// page per 4 KiB: as much time as the copy itself. Buffers given back are kept (up to a bound)
// and handed out again already mapped; new large ones are 2 MiB aligned and advised as huge pages,
// so even the first use faults once per 2 MiB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace graphdump {

class BufferPool {
 public:
  // A buffer of at least the size asked for; gives itself back to its pool when destroyed.
  class Buffer {
   public:
    Buffer() = default;
    Buffer(Buffer&& other) noexcept;
    Buffer& operator=(Buffer&& other) noexcept;
    ~Buffer();

    uint8_t* data() const { return data_; }
    size_t capacity() const { return capacity_; }

   private:
    friend class BufferPool;
    Buffer(BufferPool* pool, uint8_t* data, size_t capacity)
        : pool_(pool), data_(data), capacity_(capacity) {}
    BufferPool* pool_ = nullptr;
    uint8_t* data_ = nullptr;
    size_t capacity_ = 0;
  };

  // Keeps at most `keep_bytes` of idle buffers; more are freed when given back.
  explicit BufferPool(size_t keep_bytes);
  // REQUIRES: every Buffer taken from this pool has been destroyed.
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // An idle buffer that fits `size` without wasting more than half of itself, or a new one.
  // Thread-safe.
  Buffer Take(size_t size);

  size_t idle_bytes() const;
  // Buffers allocated so far (not reused), for tests and benchmarks.
  uint64_t allocations() const;

 private:
  void Give(uint8_t* data, size_t capacity);

  const size_t keep_bytes_;
  mutable std::mutex mu_;
  std::multimap<size_t, uint8_t*> idle_;  // by capacity
  size_t idle_bytes_ = 0;
  uint64_t allocations_ = 0;
};

}  // namespace graphdump
