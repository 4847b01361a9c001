#include "graphdump/analysis/ascend_format.h"

#include <algorithm>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <cstring>
#include <numeric>
#include <string>

#include "fmt/format.h"
#include "graphdump/analysis/ascend_dump.h"

namespace graphdump {
namespace {

enum class Kind { kNC1HWC0, kNDC1HWC0, kC1HWNCoC0, kFractalZ, kFractalNZ };

// Everything a conversion loop needs, derived from the device and host shapes. Spatial
// dimensions are H·W flattened into `hw`; 4-D formats have d = 1.
struct Plan {
  Kind kind = Kind::kNC1HWC0;
  int64_t n = 1, c = 1, d = 1, hw = 1;                          // host
  int64_t c0 = 1, c1 = 1;                                       // channel cube
  int64_t n0 = 1, n1 = 1;                                       // FRACTAL_Z output-channel cube
  int64_t groups = 1, e_mult = 1;                               // FRACTAL_Z groups
  int64_t t = 1, h = 1, w = 1, h0 = 1, h1 = 1, w0 = 1, w1 = 1;  // FRACTAL_NZ
};

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t Lcm(int64_t a, int64_t b) { return a / std::gcd(a, b) * b; }
int64_t Product(const std::vector<int64_t>& v, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = from; i < std::min(to, v.size()); ++i) p *= v[i];
  return p;
}

std::string Dims(const std::vector<int64_t>& v) { return fmt::format("({})", fmt::join(v, ",")); }

Status Mismatch(const DeviceTensorDesc& desc, const std::vector<int64_t>& expected) {
  return Status::InvalidArgument(fmt::format(
      "device shape {} does not match original shape {} in {}: expected {}", Dims(desc.shape),
      Dims(desc.original_shape), AscendFormatName(desc.format), Dims(expected)));
}

// MindSpore pads host shapes of fewer than 4 dimensions to NCHW as (1, C, H, W) before laying
// them out in a 4-D device format.
std::vector<int64_t> PadTo4D(const std::vector<int64_t>& shape) {
  std::vector<int64_t> nchw = {1, 1, 1, 1};
  if (shape.size() >= 4) return shape;
  for (size_t i = 0; i < shape.size(); ++i) nchw[1 + i] = shape[i];
  return nchw;
}

StatusOr<Plan> PlanNC1HWC0(const DeviceTensorDesc& desc) {
  const std::vector<int64_t> host = PadTo4D(desc.original_shape);
  if (host.size() != 4 || desc.shape.size() != 5 || desc.shape[4] <= 0) {
    return Status::InvalidArgument(fmt::format(
        "{} needs a 5-D device shape and an original shape of at most 4 dimensions, got {} "
        "and {}",
        AscendFormatName(desc.format), Dims(desc.shape), Dims(desc.original_shape)));
  }
  Plan p;
  p.kind = Kind::kNC1HWC0;
  p.n = host[0], p.c = host[1], p.hw = host[2] * host[3];
  p.c0 = desc.shape[4], p.c1 = CeilDiv(p.c, p.c0);
  std::vector<int64_t> expected = {p.n, p.c1, host[2], host[3], p.c0};
  if (desc.shape != expected) return Mismatch(desc, expected);
  return p;
}

StatusOr<Plan> PlanNDC1HWC0(const DeviceTensorDesc& desc) {
  const std::vector<int64_t>& host = desc.original_shape;
  if (host.size() != 5 || desc.shape.size() != 6 || desc.shape[5] <= 0) {
    return Status::InvalidArgument(fmt::format(
        "NDC1HWC0 needs a 6-D device shape and a 5-D (NCDHW) original shape, got {} and {}",
        Dims(desc.shape), Dims(host)));
  }
  Plan p;
  p.kind = Kind::kNDC1HWC0;
  p.n = host[0], p.c = host[1], p.d = host[2], p.hw = host[3] * host[4];
  p.c0 = desc.shape[5], p.c1 = CeilDiv(p.c, p.c0);
  std::vector<int64_t> expected = {p.n, p.d, p.c1, host[3], host[4], p.c0};
  if (desc.shape != expected) return Mismatch(desc, expected);
  return p;
}

StatusOr<Plan> PlanC1HWNCoC0(const DeviceTensorDesc& desc) {
  const std::vector<int64_t> host = PadTo4D(desc.original_shape);
  if (host.size() != 4 || desc.shape.size() != 6 || desc.shape[5] <= 0) {
    return Status::InvalidArgument(fmt::format(
        "C1HWNCoC0 needs a 6-D device shape and an original shape of at most 4 dimensions, got "
        "{} and {}",
        Dims(desc.shape), Dims(desc.original_shape)));
  }
  Plan p;
  p.kind = Kind::kC1HWNCoC0;
  p.n = host[0], p.c = host[1], p.hw = host[2] * host[3];
  p.c0 = desc.shape[5], p.c1 = CeilDiv(p.c, p.c0);
  std::vector<int64_t> expected = {p.c1, host[2], host[3], p.n, p.c0, p.c0};
  if (desc.shape != expected) return Mismatch(desc, expected);
  return p;
}

// FRACTAL_Z (4-D host) and FRACTAL_Z_3D (5-D host), with or without groups.
StatusOr<Plan> PlanFractalZ(const DeviceTensorDesc& desc, bool three_d) {
  const std::vector<int64_t> host = three_d ? desc.original_shape : PadTo4D(desc.original_shape);
  const size_t rank = three_d ? 5 : 4;
  if (host.size() != rank || desc.shape.size() != 4 || desc.shape[2] <= 0 || desc.shape[3] <= 0) {
    return Status::InvalidArgument(fmt::format(
        "{} needs a 4-D device shape and a {}-D original shape, got {} and {}",
        AscendFormatName(desc.format), rank, Dims(desc.shape), Dims(desc.original_shape)));
  }
  Plan p;
  p.kind = Kind::kFractalZ;
  p.n = host[0], p.c = host[1];
  p.d = three_d ? host[2] : 1;
  p.hw = host[rank - 2] * host[rank - 1];
  p.groups = std::max<int64_t>(1, desc.sub_format);
  p.n0 = desc.shape[2], p.c0 = desc.shape[3];
  if (p.n % p.groups != 0) {
    return Status::InvalidArgument(fmt::format(
        "{}: original shape {} has {} output channels, not a multiple of sub_format (groups) {}",
        AscendFormatName(desc.format), Dims(host), p.n, p.groups));
  }
  const int64_t cout = p.n / p.groups;
  if (cout == 0 || p.c == 0) return p;  // empty: nothing to check or copy
  p.e_mult = std::min(Lcm(Lcm(p.c, p.c0) / p.c, Lcm(cout, p.n0) / cout), p.groups);
  p.c1 = CeilDiv(p.e_mult * p.c, p.c0);
  p.n1 = CeilDiv(p.e_mult * cout, p.n0);
  const int64_t g_dim = CeilDiv(p.groups, p.e_mult);
  std::vector<int64_t> expected = {g_dim * p.d * p.c1 * p.hw, p.n1, p.n0, p.c0};
  if (desc.shape != expected) return Mismatch(desc, expected);
  return p;
}

StatusOr<Plan> PlanFractalNZ(const DeviceTensorDesc& desc) {
  const std::vector<int64_t>& host = desc.original_shape;
  if (host.empty() || desc.shape.size() < 4) {
    return Status::InvalidArgument(fmt::format(
        "FRACTAL_NZ needs a device shape of at least 4 dimensions and a non-scalar original "
        "shape, got {} and {}",
        Dims(desc.shape), Dims(host)));
  }
  Plan p;
  p.kind = Kind::kFractalNZ;
  const size_t r = host.size();
  p.w = host[r - 1];
  p.h = r >= 2 ? host[r - 2] : 1;
  p.t = r >= 2 ? Product(host, 0, r - 2) : 1;
  const size_t k = desc.shape.size();
  p.h0 = desc.shape[k - 2], p.w0 = desc.shape[k - 1];
  if (p.h0 <= 0 || p.w0 <= 0) return Mismatch(desc, {});
  p.w1 = CeilDiv(p.w, p.w0), p.h1 = CeilDiv(p.h, p.h0);
  const bool ok = desc.shape[k - 4] == p.w1 && desc.shape[k - 3] == p.h1 &&
                  Product(desc.shape, 0, k - 4) == p.t;
  if (!ok) {
    std::vector<int64_t> expected(host.begin(), host.end() - std::min<size_t>(r, 2));
    expected.insert(expected.end(), {p.w1, p.h1, p.h0, p.w0});
    return Mismatch(desc, expected);
  }
  return p;
}

StatusOr<Plan> MakePlan(const DeviceTensorDesc& desc) {
  switch (desc.item_bytes) {
    case 1:
    case 2:
    case 4:
    case 8:
    case 16:
      break;
    default:
      return Status::InvalidArgument(
          fmt::format("elements of {} bits cannot be rearranged (1, 2, 4, 8 or 16 bytes are)",
                      desc.item_bytes * 8));
  }
  switch (desc.format) {
    case kAscendNC1HWC0:
    case kAscendNC1HWC0C04:
      return PlanNC1HWC0(desc);
    case kAscendNDC1HWC0:
      return PlanNDC1HWC0(desc);
    case kAscendC1HWNCoC0:
      return PlanC1HWNCoC0(desc);
    case kAscendFractalZ:
      return PlanFractalZ(desc, false);
    case kAscendFractalZ3D:
      return PlanFractalZ(desc, true);
    case kAscendFractalNZ:
      return PlanFractalNZ(desc);
    default:
      return Status::Unsupported(
          fmt::format("no conversion from {} to a host layout", AscendFormatName(desc.format)));
  }
}

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

template <typename T>
inline void Transpose(const T* src, int64_t src_rs, int64_t src_cs, T* dst, int64_t dst_rs,
                      int64_t rows, int64_t cols) {
  TransposeScalar(src, src_rs, src_cs, dst, dst_rs, rows, cols);
}

#if defined(__SSE2__)
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

template <>
inline void Transpose(const Element<2>* src, int64_t src_rs, int64_t src_cs, Element<2>* dst,
                      int64_t dst_rs, int64_t rows, int64_t cols) {
  if (src_cs != 1) return TransposeScalar(src, src_rs, src_cs, dst, dst_rs, rows, cols);
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
#endif

template <typename T>
void RunNC1HWC0(const Plan& p, const T* src, T* dst) {
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t c1 = 0; c1 < p.c1; ++c1) {
      const int64_t cols = std::min(p.c0, p.c - c1 * p.c0);
      Transpose(src + (n * p.c1 + c1) * p.hw * p.c0, p.c0, 1, dst + (n * p.c + c1 * p.c0) * p.hw,
                p.hw, p.hw, cols);
    }
  }
}

template <typename T>
void RunNDC1HWC0(const Plan& p, const T* src, T* dst) {
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t d = 0; d < p.d; ++d) {
      for (int64_t c1 = 0; c1 < p.c1; ++c1) {
        const int64_t cols = std::min(p.c0, p.c - c1 * p.c0);
        Transpose(src + ((n * p.d + d) * p.c1 + c1) * p.hw * p.c0, p.c0, 1,
                  dst + ((n * p.c + c1 * p.c0) * p.d + d) * p.hw, p.d * p.hw, p.hw, cols);
      }
    }
  }
}

template <typename T>
void RunC1HWNCoC0(const Plan& p, const T* src, T* dst) {
  const int64_t row = p.n * p.c0 * p.c0;  // one (h, w) position
  for (int64_t c1 = 0; c1 < p.c1; ++c1) {
    const int64_t cols = std::min(p.c0, p.c - c1 * p.c0);
    for (int64_t n = 0; n < p.n; ++n) {
      Transpose(src + c1 * p.hw * row + n * p.c0 * p.c0, row, p.c0 + 1,
                dst + (n * p.c + c1 * p.c0) * p.hw, p.hw, p.hw, cols);
    }
  }
}

// Output channels outer: each one's (C, D, H, W) block is written whole, front to back, and the
// next output channel reads the neighbouring C0 elements of the same source cache lines. (With
// input channels outer, the old order, each pass wrote 288 bytes every 18 KB across the whole
// output: 1.7x slower on FRACTAL_Z (1000, 1000, 3, 3); blocks of 32 output channels were slower
// than one at a time.)
template <typename T>
void RunFractalZ(const Plan& p, const T* src, T* dst) {
  const int64_t cout = p.n / p.groups;
  const int64_t np_c0 = p.n1 * p.n0 * p.c0;  // one (c1, d, h, w) row of the device tensor
  for (int64_t g = 0; g < p.groups; ++g) {
    const int64_t e = g % p.e_mult;
    const int64_t cube = g / p.e_mult;
    const int64_t ci_end = e * p.c + p.c;
    for (int64_t n = 0; n < cout; ++n) {
      T* out = dst + (g * cout + n) * p.c * p.d * p.hw;
      for (int64_t ci = e * p.c; ci < ci_end;) {
        const int64_t c1 = ci / p.c0, c0 = ci % p.c0;
        const int64_t cols = std::min(p.c0 - c0, ci_end - ci);
        const int64_t c_host = ci - e * p.c;
        for (int64_t d = 0; d < p.d; ++d) {
          const T* block = src + ((cube * p.d + d) * p.c1 + c1) * p.hw * np_c0 + c0;
          Transpose(block + (e * cout + n) * p.c0, np_c0, 1, out + (c_host * p.d + d) * p.hw,
                    p.d * p.hw, p.hw, cols);
        }
        ci += cols;
      }
    }
  }
}

template <typename T>
void RunFractalNZ(const Plan& p, const T* src, T* dst) {
  const int64_t block = p.h1 * p.h0 * p.w0;  // one w1 column of tiles
  for (int64_t t = 0; t < p.t; ++t) {
    const T* s = src + t * p.w1 * block;
    T* o = dst + t * p.h * p.w;
    for (int64_t h = 0; h < p.h; ++h) {
      for (int64_t w1 = 0; w1 < p.w1; ++w1) {
        const int64_t cols = std::min(p.w0, p.w - w1 * p.w0);
        std::memcpy(o + h * p.w + w1 * p.w0, s + w1 * block + h * p.w0, cols * sizeof(T));
      }
    }
  }
}

template <typename T>
void Run(const Plan& p, const uint8_t* src_bytes, uint8_t* dst_bytes) {
  const T* src = reinterpret_cast<const T*>(src_bytes);
  T* dst = reinterpret_cast<T*>(dst_bytes);
  switch (p.kind) {
    case Kind::kNC1HWC0:
      return RunNC1HWC0(p, src, dst);
    case Kind::kNDC1HWC0:
      return RunNDC1HWC0(p, src, dst);
    case Kind::kC1HWNCoC0:
      return RunC1HWNCoC0(p, src, dst);
    case Kind::kFractalZ:
      return RunFractalZ(p, src, dst);
    case Kind::kFractalNZ:
      return RunFractalNZ(p, src, dst);
  }
}

}  // namespace

bool IsConvertibleAscendFormat(int format) {
  switch (format) {
    case kAscendNC1HWC0:
    case kAscendNC1HWC0C04:
    case kAscendNDC1HWC0:
    case kAscendC1HWNCoC0:
    case kAscendFractalZ:
    case kAscendFractalZ3D:
    case kAscendFractalNZ:
      return true;
    default:
      return false;
  }
}

bool IsHostAscendFormat(int format) {
  switch (format) {
    case kAscendNCHW:
    case kAscendNHWC:
    case kAscendND:
    case 14:  // CHWN
    case kAscendHWCN:
    case kAscendNDHWC:
    case kAscendNCDHW:
    case 31:  // DHWCN
    case 34:  // CN
    case 35:  // NC
    case 36:  // DHWNC
    case 47:  // NCL
      return true;
    default:
      return false;
  }
}

StatusOr<std::vector<int64_t>> AscendHostShape(const DeviceTensorDesc& desc) {
  if (Product(desc.original_shape) == 0 && !desc.original_shape.empty()) {
    if (Product(desc.shape) != 0) {
      return Status::InvalidArgument(
          fmt::format("original shape {} is empty but device shape {} is not",
                      Dims(desc.original_shape), Dims(desc.shape)));
    }
    return desc.original_shape;
  }
  GRAPHDUMP_ASSIGN_OR_RETURN(Plan plan, MakePlan(desc));
  (void)plan;
  return desc.original_shape;
}

Status ConvertToHostLayout(const DeviceTensorDesc& desc, const uint8_t* src, uint8_t* dst) {
  if (Product(desc.original_shape) == 0 && !desc.original_shape.empty()) {
    return AscendHostShape(desc).status();
  }
  GRAPHDUMP_ASSIGN_OR_RETURN(Plan plan, MakePlan(desc));
  switch (desc.item_bytes) {
    case 1:
      Run<Element<1>>(plan, src, dst);
      break;
    case 2:
      Run<Element<2>>(plan, src, dst);
      break;
    case 4:
      Run<Element<4>>(plan, src, dst);
      break;
    case 8:
      Run<Element<8>>(plan, src, dst);
      break;
    default:
      Run<Element<16>>(plan, src, dst);
      break;
  }
  return Status::Ok();
}

}  // namespace graphdump
