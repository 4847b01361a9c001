// Template bodies for tensor_view.h. Not for direct inclusion.
#pragma once

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

namespace graphdump {
namespace internal {

// Copies `n` elements of `item` bytes, `stride` elements apart, from `src` to `dst`.
inline void GatherStrided(const uint8_t* src, int64_t stride, int64_t n, size_t item,
                          uint8_t* dst) {
  if (stride == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * item);
    return;
  }
  const int64_t step = stride * static_cast<int64_t>(item);
  // Fixed-size memcpy calls compile to single loads and stores.
  auto copy = [&](auto size_tag) {
    constexpr size_t kSize = decltype(size_tag)::value;
    for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * kSize, src + i * step, kSize);
  };
  switch (item) {
    case 1:
      return copy(std::integral_constant<size_t, 1>());
    case 2:
      return copy(std::integral_constant<size_t, 2>());
    case 4:
      return copy(std::integral_constant<size_t, 4>());
    case 8:
      return copy(std::integral_constant<size_t, 8>());
    case 16:
      return copy(std::integral_constant<size_t, 16>());
    default:
      for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * item, src + i * step, item);
  }
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
  // outer dimensions), filling a buffer of whole elements.
  const size_t rank = view.shape.size();
  const int64_t inner = view.shape[rank - 1];
  const int64_t inner_stride = view.strides[rank - 1];
  const int64_t capacity = std::min<int64_t>(std::max<size_t>(1, chunk_bytes / item), count);
  std::vector<uint8_t> buffer(static_cast<size_t>(capacity) * item);
  std::vector<int64_t> index(rank - 1, 0);
  int64_t offset = 0;  // element offset of the current row's first element
  int64_t filled = 0;
  for (int64_t row = 0, rows = count / inner; row < rows; ++row) {
    for (int64_t j = 0; j < inner;) {
      const int64_t n = std::min(inner - j, capacity - filled);
      internal::GatherStrided(base + (offset + j * inner_stride) * static_cast<int64_t>(item),
                              inner_stride, n, item, buffer.data() + filled * item);
      filled += n;
      j += n;
      if (filled == capacity) {
        visit(static_cast<const uint8_t*>(buffer.data()), buffer.size());
        filled = 0;
      }
    }
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
