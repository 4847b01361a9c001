// Template bodies for tensor_view.h. Not for direct inclusion.
#pragma once

#include <algorithm>
#include <cstring>
#include <vector>

namespace graphdump {

template <typename Visit>
void ForEachContiguousChunk(const TensorView& view, size_t chunk_bytes, Visit&& visit) {
  const int64_t count = view.NumElements();
  if (count == 0) return;
  const auto* base = static_cast<const uint8_t*>(view.data);
  if (view.IsContiguous()) {
    const size_t total = view.ContiguousBytes();
    const size_t item = std::max<size_t>(1, DTypeBits(view.dtype) / 8);
    const size_t step = std::max(item, chunk_bytes / item * item);
    for (size_t off = 0; off < total; off += step) visit(base + off, std::min(step, total - off));
    return;
  }
  // Strided gather: walk the index odometer in C order, filling a buffer of whole elements.
  const size_t item = DTypeBits(view.dtype) / 8;
  const size_t per_chunk = std::max<size_t>(1, chunk_bytes / item);
  std::vector<uint8_t> buffer(std::min<size_t>(per_chunk, static_cast<size_t>(count)) * item);
  const size_t rank = view.shape.size();
  std::vector<int64_t> index(rank, 0);
  int64_t offset = 0;  // element offset of `index`
  size_t filled = 0;
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(buffer.data() + filled * item, base + offset * static_cast<int64_t>(item), item);
    if (++filled * item == buffer.size()) {
      visit(buffer.data(), buffer.size());
      filled = 0;
    }
    for (size_t d = rank; d-- > 0;) {
      offset += view.strides[d];
      if (++index[d] < view.shape[d]) break;
      offset -= view.strides[d] * view.shape[d];
      index[d] = 0;
    }
  }
  if (filled > 0) visit(buffer.data(), filled * item);
}

}  // namespace graphdump
