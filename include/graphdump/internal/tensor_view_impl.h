// Template bodies for tensor_view.h. Not for direct inclusion.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

namespace graphdump {
namespace internal {

// Calls `f(std::integral_constant<size_t, item>)` for the common element sizes, so that the
// copies inside compile to single loads and stores; `f(0-sized tag)` never happens: other sizes
// call `fallback()`.
template <typename F, typename Fallback>
void WithItemSize(size_t item, F&& f, Fallback&& fallback) {
  switch (item) {
    case 1:
      return f(std::integral_constant<size_t, 1>());
    case 2:
      return f(std::integral_constant<size_t, 2>());
    case 4:
      return f(std::integral_constant<size_t, 4>());
    case 8:
      return f(std::integral_constant<size_t, 8>());
    case 16:
      return f(std::integral_constant<size_t, 16>());
    default:
      return fallback();
  }
}

// ForEachContiguousChunk's gather buffer: the thread's, kept for its next gather, where the thread
// has none in use (a buffer made per tensor was zero-filled first, and from 128 KiB on mapped
// and faulted in page by page: a statistic dump gathers every strided tensor of a step). Holds
// at least `bytes`, uninitialised.
class GatherBuffer {
 public:
  explicit GatherBuffer(size_t bytes) {
    Slot& slot = ThreadSlot();
    if (slot.busy) {  // a gather inside a visit of another: a buffer of its own
      own_.reset(new uint8_t[bytes]);
      data_ = own_.get();
      return;
    }
    if (slot.size < bytes) {
      slot.data.reset(new uint8_t[bytes]);
      slot.size = bytes;
    }
    slot.busy = true;
    slot_ = &slot;
    data_ = slot.data.get();
  }
  ~GatherBuffer() {
    if (slot_ != nullptr) slot_->busy = false;
  }
  GatherBuffer(const GatherBuffer&) = delete;
  GatherBuffer& operator=(const GatherBuffer&) = delete;
  uint8_t* data() const { return data_; }

 private:
  struct Slot {
    std::unique_ptr<uint8_t[]> data;
    size_t size = 0;
    bool busy = false;
  };
  static Slot& ThreadSlot() {
    thread_local Slot slot;
    return slot;
  }
  Slot* slot_ = nullptr;
  std::unique_ptr<uint8_t[]> own_;
  uint8_t* data_ = nullptr;
};

// Copies `n` elements of `item` bytes, `stride` elements apart, from `src` to `dst`.
inline void GatherStrided(const uint8_t* src, int64_t stride, int64_t n, size_t item,
                          uint8_t* dst) {
  if (stride == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * item);
    return;
  }
  const int64_t step = stride * static_cast<int64_t>(item);
  WithItemSize(
      item,
      [&](auto size_tag) {
        constexpr size_t kSize = decltype(size_tag)::value;
        for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * kSize, src + i * step, kSize);
      },
      [&] {
        for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * item, src + i * step, item);
      });
}

// GatherTile for 4-byte elements with AVX2 (8x8 blocks transposed in registers); false, with
// nothing done, where this machine has no such kernel. In tensor_view.cc.
bool GatherTileVector(const uint8_t* src, int64_t stride, int64_t n, int64_t rows, size_t item,
                      uint8_t* dst);

// Copies `rows` consecutive rows of `n` elements each, where the rows lie next to each other in
// memory (unit stride between rows) and a row's elements lie `stride` apart: the layout of a
// transposed matrix. Reads run along memory, `rows` elements at a time, instead of jumping
// `stride` for every element.
inline void GatherTile(const uint8_t* src, int64_t stride, int64_t n, int64_t rows, size_t item,
                       uint8_t* dst) {
  if (GatherTileVector(src, stride, n, rows, item, dst)) return;
  const int64_t step = stride * static_cast<int64_t>(item);
  WithItemSize(
      item,
      [&](auto size_tag) {
        constexpr size_t kSize = decltype(size_tag)::value;
        for (int64_t j = 0; j < n; ++j) {
          const uint8_t* column = src + j * step;
          for (int64_t r = 0; r < rows; ++r) {
            std::memcpy(dst + (r * n + j) * kSize, column + r * kSize, kSize);
          }
        }
      },
      [&] {
        for (int64_t j = 0; j < n; ++j) {
          for (int64_t r = 0; r < rows; ++r) {
            std::memcpy(dst + (r * n + j) * item, src + j * step + r * item, item);
          }
        }
      });
}

}  // namespace internal

template <typename Visit>
void ForEachContiguousChunk(const TensorView& view, size_t chunk_bytes, Visit&& visit) {
  const int64_t count = view.NumElements();
  if (count <= 0) return;
  const auto* base = static_cast<const uint8_t*>(view.data);
  const size_t item = std::max<size_t>(1, DTypeBits(view.dtype) / 8);
  if (view.IsContiguous()) {
    const size_t total = view.ContiguousBytes();
    const size_t step = std::max(item, chunk_bytes / item * item);
    for (size_t off = 0; off < total; off += step) visit(base + off, std::min(step, total - off));
    return;
  }
  // Strided gather: walk the rows of the innermost dimension in C order (an odometer over the
  // outer dimensions), filling a buffer of whole elements. When consecutive rows are adjacent in
  // memory (a transpose), up to kTileRows rows are gathered together.
  constexpr int64_t kTileRows = 16;
  const size_t rank = view.shape.size();
  const int64_t inner = view.shape[rank - 1];
  const int64_t inner_stride = view.strides[rank - 1];
  const bool tiled = rank >= 2 && inner_stride != 1 && view.strides[rank - 2] == 1;
  const int64_t capacity = std::min<int64_t>(std::max<size_t>(1, chunk_bytes / item), count);
  const size_t buffer_bytes = static_cast<size_t>(capacity) * item;
  internal::GatherBuffer buffer(buffer_bytes);
  std::vector<int64_t> index(rank - 1, 0);
  int64_t offset = 0;  // element offset of the current row's first element
  int64_t filled = 0;
  auto flush_if_full = [&] {
    if (filled == capacity) {
      visit(static_cast<const uint8_t*>(buffer.data()), buffer_bytes);
      filled = 0;
    }
  };
  const int64_t rows = count / inner;
  // Rows that are each contiguous (a slice, a head split off by a view) are copied whole, as
  // many of the next dimension's rows as the buffer holds at once.
  const bool whole_rows = rank >= 2 && inner_stride == 1;
  for (int64_t row = 0; row < rows;) {
    int64_t block = 1;
    if (tiled || whole_rows) {
      block = std::min(view.shape[rank - 2] - index[rank - 2], (capacity - filled) / inner);
      if (tiled) block = std::min(block, kTileRows);
    }
    if (block > 1) {
      const uint8_t* src = base + offset * static_cast<int64_t>(item);
      uint8_t* dst = buffer.data() + filled * item;
      if (tiled) {
        internal::GatherTile(src, inner_stride, inner, block, item, dst);
      } else {
        const size_t row_bytes = static_cast<size_t>(inner) * item;
        const int64_t row_step = view.strides[rank - 2] * static_cast<int64_t>(item);
        for (int64_t r = 0; r < block; ++r) {
          std::memcpy(dst + r * row_bytes, src + r * row_step, row_bytes);
        }
      }
      filled += block * inner;
      flush_if_full();
      // Move to the block's last row; the odometer step below moves past it.
      index[rank - 2] += block - 1;
      offset += (block - 1) * view.strides[rank - 2];
    } else {
      for (int64_t j = 0; j < inner;) {
        const int64_t n = std::min(inner - j, capacity - filled);
        internal::GatherStrided(base + (offset + j * inner_stride) * static_cast<int64_t>(item),
                                inner_stride, n, item, buffer.data() + filled * item);
        filled += n;
        j += n;
        flush_if_full();
      }
      block = 1;
    }
    row += block;
    for (size_t d = rank - 1; d-- > 0;) {
      offset += view.strides[d];
      if (++index[d] < view.shape[d]) break;
      offset -= view.strides[d] * view.shape[d];
      index[d] = 0;
    }
  }
  if (filled > 0) visit(static_cast<const uint8_t*>(buffer.data()), filled * item);
}

}  // namespace graphdump
