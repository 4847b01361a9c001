// The element side of Ascend device-to-host conversion (ascend_format.h, docs/ascend.md): the
// loops that move each device format's channel cubes and tiles into host order, through
// blocked transposes of N-byte elements (SSE2, AVX2 and AVX-512 kernels for 16-bit ones on
// x86-64), a range of host rows at a time. The shape checks and the plan are ascend_plan.cc's.
#include "graphdump/analysis/ascend_format.h"

#include <algorithm>
#include <array>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <cstring>

#include "ascend_plan.h"
#include "fmt/format.h"
#include "graphdump/internal/cpu.h"

namespace graphdump {

using ascend_internal::Dims;
using ascend_internal::Kind;
using ascend_internal::MakePlan;
using ascend_internal::Plan;

namespace {

// An element as bytes: copies compile to plain loads and stores of N bytes, and, unlike
// uint16_t*, need no alignment (tensor data follows a header of any length in the file).
template <size_t N>
struct Element {
  uint8_t bytes[N];
};

// dst[j * dst_rs + i] = src[i * src_rs + j * src_cs] for i < rows, j < cols, in tiles of rows
// so that the source lines a tile touches stay in L1 while each destination row is written.
template <typename T>
inline void TransposeScalar(const T* src, int64_t src_rs, int64_t src_cs, T* dst, int64_t dst_rs,
                            int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 64;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
    const int64_t i1 = std::min(rows, i0 + kTile);
    for (int64_t j = 0; j < cols; ++j) {
      const T* s = src + j * src_cs;
      T* d = dst + j * dst_rs;
      for (int64_t i = i0; i < i1; ++i) d[i] = s[i * src_rs];
    }
  }
}

// As TransposeScalar; `readable` is how many elements from the start of each source row may be
// read (vector kernels load whole rows of 16 even when fewer columns are wanted).
template <typename T>
inline void Transpose(const T* src, int64_t src_rs, int64_t src_cs, T* dst, int64_t dst_rs,
                      int64_t rows, int64_t cols, int64_t readable) {
  TransposeScalar(src, src_rs, src_cs, dst, dst_rs, rows, cols);
}

#if defined(__x86_64__)
// 8x8 blocks of 16-bit elements (float16, bfloat16: the common case) are transposed in SSE2
// registers; the ragged edges (rows or channels not a multiple of 8) go through the scalar loop.
[[gnu::always_inline]] inline void Transpose8x8(const Element<2>* src, int64_t src_rs,
                                                Element<2>* dst, int64_t dst_rs) {
  __m128i a[8], t[8], u[8];
  for (int k = 0; k < 8; ++k) {
    a[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k * src_rs));
  }
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm_unpacklo_epi16(a[2 * k], a[2 * k + 1]);
    t[2 * k + 1] = _mm_unpackhi_epi16(a[2 * k], a[2 * k + 1]);
  }
  u[0] = _mm_unpacklo_epi32(t[0], t[2]);
  u[1] = _mm_unpackhi_epi32(t[0], t[2]);
  u[2] = _mm_unpacklo_epi32(t[1], t[3]);
  u[3] = _mm_unpackhi_epi32(t[1], t[3]);
  u[4] = _mm_unpacklo_epi32(t[4], t[6]);
  u[5] = _mm_unpackhi_epi32(t[4], t[6]);
  u[6] = _mm_unpacklo_epi32(t[5], t[7]);
  u[7] = _mm_unpackhi_epi32(t[5], t[7]);
  for (int k = 0; k < 4; ++k) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * k) * dst_rs),
                     _mm_unpacklo_epi64(u[k], u[k + 4]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * k + 1) * dst_rs),
                     _mm_unpackhi_epi64(u[k], u[k + 4]));
  }
}

inline void TransposeSse2(const Element<2>* src, int64_t src_rs, Element<2>* dst, int64_t dst_rs,
                          int64_t rows, int64_t cols) {
  const int64_t full_rows = rows / 8 * 8, full_cols = cols / 8 * 8;
  // Rows outer: the source lines (one (h, w) position, C0 channels) are used whole at once.
  for (int64_t i = 0; i < full_rows; i += 8) {
    for (int64_t j = 0; j < full_cols; j += 8) {
      Transpose8x8(src + i * src_rs + j, src_rs, dst + j * dst_rs + i, dst_rs);
    }
  }
  // Ragged edges: the last rows of every column block, then the last columns.
  TransposeScalar(src + full_rows * src_rs, src_rs, 1, dst + full_rows, dst_rs, rows - full_rows,
                  full_cols);
  TransposeScalar(src + full_cols, src_rs, 1, dst + full_cols * dst_rs, dst_rs, rows,
                  cols - full_cols);
}

// 16x16 blocks of 16-bit elements in AVX2 registers: three rounds of unpacks leave an 8x8
// transpose in each 128-bit lane (low lane: columns 0-7, high lane: columns 8-15) for rows 0-7
// and for rows 8-15; pairing the lanes of the two gives the 16 transposed rows.
__attribute__((target("avx2"))) inline void Transpose8x8Lanes(const __m256i* a, __m256i* v) {
  __m256i t[8], u[8];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_epi16(a[2 * k], a[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_epi16(a[2 * k], a[2 * k + 1]);
  }
#pragma GCC unroll 2
  for (int k = 0; k < 2; ++k) {
    u[4 * k] = _mm256_unpacklo_epi32(t[4 * k], t[4 * k + 2]);
    u[4 * k + 1] = _mm256_unpackhi_epi32(t[4 * k], t[4 * k + 2]);
    u[4 * k + 2] = _mm256_unpacklo_epi32(t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm256_unpackhi_epi32(t[4 * k + 1], t[4 * k + 3]);
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    v[2 * k] = _mm256_unpacklo_epi64(u[k], u[k + 4]);
    v[2 * k + 1] = _mm256_unpackhi_epi64(u[k], u[k + 4]);
  }
}

// Rows [i0, i0 + r) of the transpose, r <= 16, every source row holding 16 readable elements.
// With `spill`, a column's 32-byte store may run past its r elements into destination elements
// that a later store of this same call writes (see TransposeAvx2); otherwise the column's tail
// is copied exactly.
__attribute__((target("avx2"))) inline void TransposeBlockAvx2(const Element<2>* src,
                                                               int64_t src_rs, Element<2>* dst,
                                                               int64_t dst_rs, int64_t i0,
                                                               int64_t r, int64_t cols,
                                                               bool packed) {
  __m256i a[16], x[8], y[8];
#pragma GCC unroll 16
  for (int k = 0; k < 16; ++k) {
    a[k] = k < r ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + (i0 + k) * src_rs))
                 : _mm256_setzero_si256();
  }
  Transpose8x8Lanes(a, x);
  Transpose8x8Lanes(a + 8, y);
  // Fully unrolled, so that x and y stay in registers.
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) {
    if (j >= cols) break;
    const __m256i row = j < 8 ? _mm256_permute2x128_si256(x[j % 8], y[j % 8], 0x20)
                              : _mm256_permute2x128_si256(x[j % 8], y[j % 8], 0x31);
    Element<2>* d = dst + j * dst_rs + i0;
    // Packed destination rows: the 16 - r elements after this column's r land in the head of
    // the next column's row, stored later (by this block's next column, or by the full blocks
    // that follow the partial one).
    if (r == 16 || (packed && j * dst_rs + i0 + 16 <= cols * dst_rs)) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), row);
    } else {
      alignas(32) Element<2> tail[16];
      _mm256_store_si256(reinterpret_cast<__m256i*>(tail), row);
      std::memcpy(d, tail, r * sizeof(Element<2>));
    }
  }
}

__attribute__((target("avx2"))) void TransposeAvx2(const Element<2>* src, int64_t src_rs,
                                                   Element<2>* dst, int64_t dst_rs, int64_t rows,
                                                   int64_t cols) {
  const int64_t tail = rows % 16, full = rows - tail;
  const bool packed = dst_rs == rows;
  // The partial block first: when packed, its stores spill into heads of rows that the full
  // blocks then overwrite.
  if (tail != 0) TransposeBlockAvx2(src, src_rs, dst, dst_rs, full, tail, cols, packed);
  for (int64_t i0 = 0; i0 < full; i0 += 16) {
    TransposeBlockAvx2(src, src_rs, dst, dst_rs, i0, 16, cols, packed);
  }
}

// Destination rows of at most 16 elements back to back (FRACTAL_Z 3x3 and other small kernels,
// small feature maps): the block is 16 x rows contiguous elements, a fixed permutation of the
// rows x 16 source elements. The 16x16 transpose would store each short row separately, 32 bytes
// every 2 x rows bytes, and was no faster than SSE2; AVX-512 BW permutes 16-bit elements across
// a pair of registers (source rows 4p..4p+3), so each destination register is one permute per
// pair, merged by pair, and one store.
struct SmallTransposeTable {
  alignas(64) uint16_t index[8][32];  // destination register m: element index within its pair
  uint32_t from_pair[8][4];           // destination register m: the elements pair p supplies
};

const SmallTransposeTable& SmallTransposeTableFor(int64_t rows) {
  static const std::array<SmallTransposeTable, 17> tables = [] {
    std::array<SmallTransposeTable, 17> all{};
    for (int r = 1; r <= 16; ++r) {
      for (int o = 0; o < 16 * r; ++o) {
        const int i = o % r, j = o / r;  // source row (spatial position), column (channel)
        all[r].index[o / 32][o % 32] = static_cast<uint16_t>((i % 4) * 16 + j);
        all[r].from_pair[o / 32][i / 4] |= 1u << (o % 32);
      }
    }
    return all;
  }();
  return tables[rows];
}

__attribute__((target("avx512f,avx512bw"))) void TransposeSmallAvx512(const Element<2>* src,
                                                                      int64_t src_rs,
                                                                      Element<2>* dst, int64_t rows,
                                                                      int64_t cols) {
  const SmallTransposeTable& table = SmallTransposeTableFor(rows);
  __m512i in[8];  // in[q]: source rows 2q and 2q + 1
#pragma GCC unroll 8
  for (int q = 0; q < 8; ++q) {
    // Row 2q into the low half, row 2q + 1 broadcast and merged into the high half (GCC 12's
    // _mm512_inserti64x4 trips -Wmaybe-uninitialized).
    in[q] = _mm512_setzero_si512();
    if (2 * q >= rows) continue;
    in[q] = _mm512_mask_broadcast_i64x4(
        in[q], 0x0f, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * q * src_rs)));
    if (2 * q + 1 >= rows) continue;
    in[q] = _mm512_mask_broadcast_i64x4(
        in[q], 0xf0,
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + (2 * q + 1) * src_rs)));
  }
  const int64_t total = cols * rows;
#pragma GCC unroll 8
  for (int m = 0; m < 8; ++m) {
    if (m * 32 >= total) break;
    const __m512i index = _mm512_load_si512(table.index[m]);
    __m512i out = _mm512_permutex2var_epi16(in[0], index, in[1]);
#pragma GCC unroll 3
    for (int p = 1; p < 4; ++p) {
      if (4 * p >= rows) break;
      out = _mm512_mask_mov_epi16(out, table.from_pair[m][p],
                                  _mm512_permutex2var_epi16(in[2 * p], index, in[2 * p + 1]));
    }
    const int64_t left = total - m * 32;
    const __mmask32 keep = left >= 32 ? ~__mmask32{0} : (__mmask32{1} << left) - 1;
    _mm512_mask_storeu_epi16(dst + m * 32, keep, out);
  }
}

template <>
inline void Transpose(const Element<2>* src, int64_t src_rs, int64_t src_cs, Element<2>* dst,
                      int64_t dst_rs, int64_t rows, int64_t cols, int64_t readable) {
  if (src_cs != 1) return TransposeScalar(src, src_rs, src_cs, dst, dst_rs, rows, cols);
  if (readable >= 16 && cols <= 16) {
    if (dst_rs == rows && rows <= 16 && UseAvx512Bw()) {
      return TransposeSmallAvx512(src, src_rs, dst, rows, cols);
    }
    if (UseAvx2()) return TransposeAvx2(src, src_rs, dst, dst_rs, rows, cols);
  }
  TransposeSse2(src, src_rs, dst, dst_rs, rows, cols);
}
#endif

// Each Run function writes host rows [first, last) (see HostRowsOf) to dst.

template <typename T>
void RunNC1HWC0(const Plan& p, const T* src, T* dst, int64_t first, int64_t last) {
  for (int64_t n = first; n < last; ++n) {
    T* out = dst + (n - first) * p.c * p.hw;
    for (int64_t c1 = 0; c1 < p.c1; ++c1) {
      const int64_t cols = std::min(p.c0, p.c - c1 * p.c0);
      Transpose(src + (n * p.c1 + c1) * p.hw * p.c0, p.c0, 1, out + c1 * p.c0 * p.hw, p.hw, p.hw,
                cols, p.c0);
    }
  }
}

template <typename T>
void RunNDC1HWC0(const Plan& p, const T* src, T* dst, int64_t first, int64_t last) {
  for (int64_t n = first; n < last; ++n) {
    T* out = dst + (n - first) * p.c * p.d * p.hw;
    for (int64_t d = 0; d < p.d; ++d) {
      for (int64_t c1 = 0; c1 < p.c1; ++c1) {
        const int64_t cols = std::min(p.c0, p.c - c1 * p.c0);
        Transpose(src + ((n * p.d + d) * p.c1 + c1) * p.hw * p.c0, p.c0, 1,
                  out + (c1 * p.c0 * p.d + d) * p.hw, p.d * p.hw, p.hw, cols, p.c0);
      }
    }
  }
}

template <typename T>
void RunC1HWNCoC0(const Plan& p, const T* src, T* dst, int64_t first, int64_t last) {
  const int64_t row = p.n * p.c0 * p.c0;  // one (h, w) position
  for (int64_t c1 = 0; c1 < p.c1; ++c1) {
    const int64_t cols = std::min(p.c0, p.c - c1 * p.c0);
    for (int64_t n = first; n < last; ++n) {
      Transpose(src + c1 * p.hw * row + n * p.c0 * p.c0, row, p.c0 + 1,
                dst + ((n - first) * p.c + c1 * p.c0) * p.hw, p.hw, p.hw, cols, p.c0);
    }
  }
}

// Asks for `rows` runs of `bytes`, `stride` bytes apart, to be brought into the cache.
inline void PrefetchRows(const void* start, int64_t stride, int64_t rows, int64_t bytes) {
  const char* row = static_cast<const char*>(start);
  for (int64_t r = 0; r < rows; ++r, row += stride) {
    for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b);
  }
}

// Output channels in blocks of one N0 tile, input channel cubes inside: the N0 x C0 tiles of a
// (c1, d, h, w) row are read whole, once, and each output channel's (C, D, H, W) block is
// written front to back as c1 advances. The tiles two cubes ahead are prefetched: they are short
// runs (N0 x C0 elements) n1 x N0 x C0 elements apart, which the hardware prefetchers do not
// follow (FRACTAL_Z (1000, 1000, 3, 3) float16: 2.1 -> 3.3 GB/s). Reading one output channel at
// a time instead (32 bytes of every tile) maps the lines to a few cache sets and misses on
// nearly every load; input cubes outer sweeps the whole output once per cube.
template <typename T>
void RunFractalZ(const Plan& p, const T* src, T* dst, int64_t first, int64_t last) {
  const int64_t cout = p.n / p.groups;
  const int64_t np_c0 = p.n1 * p.n0 * p.c0;  // one (c1, d, h, w) row of the device tensor
  const int64_t host_row = p.c * p.d * p.hw;
  constexpr int64_t kPrefetchCubes = 2;
  for (int64_t g = first / cout; g < p.groups && g * cout < last; ++g) {
    const int64_t e = g % p.e_mult;
    const int64_t cube = g / p.e_mult;
    const int64_t ci_end = e * p.c + p.c;
    const int64_t n_stop = std::min(cout, last - g * cout);
    for (int64_t n_begin = std::max<int64_t>(0, first - g * cout); n_begin < n_stop;) {
      // Output channels [n_begin, n_end) share one n1 tile of the device layout.
      const int64_t tile_end = ((e * cout + n_begin) / p.n0 + 1) * p.n0 - e * cout;
      const int64_t n_end = std::min(n_stop, tile_end);
      for (int64_t ci = e * p.c; ci < ci_end;) {
        const int64_t c1 = ci / p.c0, c0 = ci % p.c0;
        const int64_t cols = std::min(p.c0 - c0, ci_end - ci);
        const int64_t c_host = ci - e * p.c;
        if (c1 + kPrefetchCubes < p.c1 && (c1 + kPrefetchCubes) * p.c0 < ci_end) {
          for (int64_t d = 0; d < p.d; ++d) {
            PrefetchRows(src + ((cube * p.d + d) * p.c1 + c1 + kPrefetchCubes) * p.hw * np_c0 +
                             (e * cout + n_begin) * p.c0,
                         np_c0 * sizeof(T), p.hw, (n_end - n_begin) * p.c0 * sizeof(T));
          }
        }
        for (int64_t n = n_begin; n < n_end; ++n) {
          T* out = dst + (g * cout + n - first) * host_row;
          for (int64_t d = 0; d < p.d; ++d) {
            const T* block = src + ((cube * p.d + d) * p.c1 + c1) * p.hw * np_c0 + c0;
            Transpose(block + (e * cout + n) * p.c0, np_c0, 1, out + (c_host * p.d + d) * p.hw,
                      p.d * p.hw, p.hw, cols, p.c0 - c0);
          }
        }
        ci += cols;
      }
      n_begin = n_end;
    }
  }
}

template <typename T>
void RunFractalNZ(const Plan& p, const T* src, T* dst, int64_t first, int64_t last) {
  const int64_t block = p.h1 * p.h0 * p.w0;  // one w1 column of tiles
  for (int64_t r = first; r < last; ++r) {
    const int64_t t = r / p.h, h = r % p.h;
    const T* s = src + t * p.w1 * block + h * p.w0;
    T* o = dst + (r - first) * p.w;
    for (int64_t w1 = 0; w1 < p.w1; ++w1) {
      const int64_t cols = std::min(p.w0, p.w - w1 * p.w0);
      std::memcpy(o + w1 * p.w0, s + w1 * block, cols * sizeof(T));
    }
  }
}

template <typename T>
void Run(const Plan& p, const uint8_t* src_bytes, uint8_t* dst_bytes, int64_t first, int64_t last) {
  const T* src = reinterpret_cast<const T*>(src_bytes);
  T* dst = reinterpret_cast<T*>(dst_bytes);
  switch (p.kind) {
    case Kind::kNC1HWC0:
      return RunNC1HWC0(p, src, dst, first, last);
    case Kind::kNDC1HWC0:
      return RunNDC1HWC0(p, src, dst, first, last);
    case Kind::kC1HWNCoC0:
      return RunC1HWNCoC0(p, src, dst, first, last);
    case Kind::kFractalZ:
      return RunFractalZ(p, src, dst, first, last);
    case Kind::kFractalNZ:
      return RunFractalNZ(p, src, dst, first, last);
  }
}

}  // namespace

Status ConvertHostRows(const DeviceTensorDesc& desc, const uint8_t* src, int64_t first,
                       int64_t last, uint8_t* dst) {
  GRAPHDUMP_ASSIGN_OR_RETURN(HostRows rows, AscendHostRows(desc));
  if (first < 0 || first > last || last > rows.count) {
    return Status::InvalidArgument(
        fmt::format("host rows [{}, {}) are outside the {} rows of original shape {}", first, last,
                    rows.count, Dims(desc.original_shape)));
  }
  if (first == last) return Status::Ok();
  GRAPHDUMP_ASSIGN_OR_RETURN(Plan plan, MakePlan(desc));
  switch (desc.item_bytes) {
    case 1:
      Run<Element<1>>(plan, src, dst, first, last);
      break;
    case 2:
      Run<Element<2>>(plan, src, dst, first, last);
      break;
    case 4:
      Run<Element<4>>(plan, src, dst, first, last);
      break;
    case 8:
      Run<Element<8>>(plan, src, dst, first, last);
      break;
    default:
      Run<Element<16>>(plan, src, dst, first, last);
      break;
  }
  return Status::Ok();
}

Status ConvertToHostLayout(const DeviceTensorDesc& desc, const uint8_t* src, uint8_t* dst) {
  GRAPHDUMP_ASSIGN_OR_RETURN(HostRows rows, AscendHostRows(desc));
  return ConvertHostRows(desc, src, 0, rows.count, dst);
}

}  // namespace graphdump
