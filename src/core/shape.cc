#include "graphdump/shape.h"

namespace graphdump {

std::optional<int64_t> ShapeElements(std::span<const int64_t> shape) {
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    empty = empty || d == 0;
  }
  if (empty) return 0;  // (0, 2^40, 2^40) holds nothing, whatever the other dimensions
  int64_t count = 1;
  for (int64_t d : shape) {
    std::optional<int64_t> next = CheckedMul(count, d);
    if (!next) return std::nullopt;
    count = *next;
  }
  return count;
}

std::optional<int64_t> ElementBytes(int64_t count, size_t bits) {
  if (count < 0 || bits > 4096) return std::nullopt;  // 4096: a 512-byte element, far above any
  std::optional<int64_t> total_bits = CheckedMul(count, static_cast<int64_t>(bits));
  if (total_bits) return *total_bits / 8 + (*total_bits % 8 != 0);
  // count * bits overflows but the bytes may not (a large int4 tensor): whole bytes first.
  const int64_t whole = count / 8, rest = count % 8;
  std::optional<int64_t> bytes = CheckedMul(whole, static_cast<int64_t>(bits));
  if (!bytes) return std::nullopt;
  const int64_t rest_bytes = (rest * static_cast<int64_t>(bits) + 7) / 8;
  if (*bytes > INT64_MAX - rest_bytes) return std::nullopt;
  return *bytes + rest_bytes;
}

std::optional<int64_t> ShapeBytes(std::span<const int64_t> shape, size_t bits) {
  std::optional<int64_t> count = ShapeElements(shape);
  if (!count) return std::nullopt;
  return ElementBytes(*count, bits);
}

}  // namespace graphdump
