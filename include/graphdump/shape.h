// Overflow-checked shape arithmetic: the one place where element counts and byte sizes of
// shapes read from files (a .npy header, statistic.csv, an Ascend dump header, a file name) are
// computed. A product that does not fit int64_t is an error for the caller to report, never a
// wrapped value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace graphdump {

// a * b, or nullopt when either is negative or the product exceeds INT64_MAX. Inline: the
// analysis checks the shape of every statistic.csv row (millions) with ShapeElements.
inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t product = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

// The number of elements of `shape` (1 for a scalar, 0 when a dimension is 0), or nullopt when
// a dimension is negative or the count exceeds INT64_MAX.
std::optional<int64_t> ShapeElements(std::span<const int64_t> shape);

// Bytes `count` elements of `bits` bits each occupy, rounded up to whole bytes, or nullopt
// when `count` is negative or the size exceeds INT64_MAX.
std::optional<int64_t> ElementBytes(int64_t count, size_t bits);

// ShapeElements then ElementBytes: the bytes of a tensor of `shape` with `bits`-bit elements.
std::optional<int64_t> ShapeBytes(std::span<const int64_t> shape, size_t bits);

}  // namespace graphdump
