// Which bytes a tensor view reads, as far as the host says (TensorView::origin): the allocation,
// its version, and the view's offset, dtype, shape and strides. Two views with equal keys read
// the same bytes in the same order, so what was computed or written from one holds for the
// other: the statistics cache and the links between tensor files use it.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "graphdump/tensor_view.h"

namespace graphdump {

struct BytesKey {
  const void* storage;
  uint64_t version;
  int64_t offset;
  DType dtype;
  Dims shape;
  Dims strides;  // explicit, 0 for dimensions of size 1
  auto operator<=>(const BytesKey&) const = default;
};

// The key of `view`, or nothing when the host gave it no origin (then nothing may be reused).
std::optional<BytesKey> BytesKeyOf(const TensorView& view);

// A hash of every field of `key`, for hash maps keyed by it.
size_t HashBytesKey(const BytesKey& key);

// Mixes `value` into `seed` (boost's hash_combine with a 64-bit constant).
inline void MixHash(size_t* seed, uint64_t value) {
  *seed ^= std::hash<uint64_t>{}(value) + 0x9e3779b97f4a7c15ull + (*seed << 6) + (*seed >> 2);
}

}  // namespace graphdump
