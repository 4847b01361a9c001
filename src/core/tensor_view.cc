#include "graphdump/tensor_view.h"

#include <charconv>
#include <cstring>
#include <string>

#include "graphdump/internal/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace graphdump {
namespace internal {

#if defined(__x86_64__)
namespace {

// dst row m (of 8, `dst_stride` floats apart) = column m of the 8 rows at `src`, `src_stride`
// floats apart. Unrolled by pragma so that the arrays stay in registers (see stats.cc).
__attribute__((target("avx2"))) inline void Transpose8x8(const float* src, int64_t src_stride,
                                                         float* dst, int64_t dst_stride) {
  __m256 r[8], t[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(src + k * src_stride);
#pragma GCC unroll 8
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
  }
#pragma GCC unroll 8
  for (int k = 0; k < 8; k += 4) {
    r[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
    r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xee);
    r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
    r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xee);
  }
#pragma GCC unroll 8
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(dst + k * dst_stride, _mm256_permute2f128_ps(r[k], r[k + 4], 0x20));
    _mm256_storeu_ps(dst + (k + 4) * dst_stride, _mm256_permute2f128_ps(r[k], r[k + 4], 0x31));
  }
}

// Any 4-byte elements: the floats are only moved, never computed on.
__attribute__((target("avx2"))) void GatherTile32Avx2(const uint8_t* src, int64_t stride, int64_t n,
                                                      int64_t rows, uint8_t* dst) {
  const int64_t block_rows = rows / 8 * 8, block_cols = n / 8 * 8;
  const auto* s = reinterpret_cast<const float*>(src);
  auto* d = reinterpret_cast<float*>(dst);
  for (int64_t j = 0; j < block_cols; j += 8) {
    for (int64_t r = 0; r < block_rows; r += 8) {
      Transpose8x8(s + j * stride + r, stride, d + r * n + j, n);
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    const int64_t first = j < block_cols ? block_rows : 0;  // the rest of column j
    for (int64_t r = first; r < rows; ++r)
      std::memcpy(dst + 4 * (r * n + j), src + 4 * (j * stride + r), 4);
  }
}

}  // namespace

bool GatherTileVector(const uint8_t* src, int64_t stride, int64_t n, int64_t rows, size_t item,
                      uint8_t* dst) {
  if (item != 4 || rows < 8 || n < 8 || !UseAvx2()) return false;
  GatherTile32Avx2(src, stride, n, rows, dst);
  return true;
}
#else
bool GatherTileVector(const uint8_t*, int64_t, int64_t, int64_t, size_t, uint8_t*) { return false; }
#endif

}  // namespace internal

int64_t TensorView::NumElements() const {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  return count;
}

bool TensorView::IsContiguous() const {
  if (strides.empty() || dtype == DType::kInt4) return true;
  if (strides.size() != shape.size()) return false;
  if (NumElements() == 0) return true;
  int64_t expected = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    // A dimension of size 1 is never stepped over, so its stride does not matter.
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

size_t TensorView::ContiguousBytes() const { return DTypeStorageBytes(dtype, NumElements()); }

void CopyContiguousTo(const TensorView& view, uint8_t* out) {
  ForEachContiguousChunk(view, size_t{1} << 20, [&](const uint8_t* bytes, size_t n) {
    std::memcpy(out, bytes, n);
    out += n;
  });
}

std::string ShapeToString(std::span<const int64_t> shape) {
  std::string text;
  AppendShape(shape, &text);
  return text;
}

void AppendShape(std::span<const int64_t> shape, std::string* out) {
  // MindSpore joins the dimensions with ',' and no trailing comma: "(5)" for 1-D, not "(5,)".
  char number[24];
  out->push_back('(');
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out->push_back(',');
    out->append(number, std::to_chars(number, number + sizeof number, shape[i]).ptr);
  }
  out->push_back(')');
}

}  // namespace graphdump
