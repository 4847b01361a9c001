#include "graphdump/analysis/ascend_format.h"

#include <gtest/gtest.h>

#include <array>
#include <numeric>
#include <random>
#include <vector>

#include "fmt/format.h"
#include "graphdump/analysis/ascend_dump.h"

namespace graphdump {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Device buffers are filled with distinct values, host results are compared against a naive
// per-element evaluation of the docs/ascend.md index formulas.
std::vector<uint16_t> Iota(int64_t n) {
  std::vector<uint16_t> v(n);
  std::mt19937 rng(7);
  for (auto& x : v) x = static_cast<uint16_t>(rng());
  return v;
}

std::vector<uint16_t> Convert(const DeviceTensorDesc& desc, const std::vector<uint16_t>& src) {
  int64_t count = 1;
  for (int64_t d : desc.original_shape) count *= d;
  // A guard past the end: the vector kernels store whole registers and must stop at the end.
  constexpr int64_t kGuard = 64;
  std::vector<uint16_t> dst(count + kGuard, 0x5A5A);
  Status status = ConvertToHostLayout(desc, reinterpret_cast<const uint8_t*>(src.data()),
                                      reinterpret_cast<uint8_t*>(dst.data()));
  EXPECT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(std::vector<uint16_t>(dst.begin() + count, dst.end()),
            std::vector<uint16_t>(kGuard, 0x5A5A))
      << "wrote past the host tensor";
  dst.resize(count);
  return dst;
}

TEST(AscendFormat, NC1HWC0MatchesFormula) {
  for (auto [n, c, h, w] : std::vector<std::array<int64_t, 4>>{
           {2, 3, 4, 5}, {1, 17, 3, 3}, {3, 32, 1, 7}, {1, 100, 9, 9}}) {
    const int64_t c0 = 16, c1 = CeilDiv(c, c0);
    auto src = Iota(n * c1 * h * w * c0);
    auto dst = Convert({kAscendNC1HWC0, 2, {n, c1, h, w, c0}, {n, c, h, w}, 0}, src);
    for (int64_t in = 0; in < n; ++in)
      for (int64_t ic = 0; ic < c; ++ic)
        for (int64_t ih = 0; ih < h; ++ih)
          for (int64_t iw = 0; iw < w; ++iw)
            ASSERT_EQ(dst[((in * c + ic) * h + ih) * w + iw],
                      src[(((in * c1 + ic / c0) * h + ih) * w + iw) * c0 + ic % c0]);
  }
}

TEST(AscendFormat, FractalZMatchesFormula) {
  for (auto [n, c, h, w] :
       std::vector<std::array<int64_t, 4>>{{17, 3, 3, 3}, {64, 40, 1, 1}, {5, 33, 2, 3}}) {
    const int64_t c0 = 16, n0 = 16, c1 = CeilDiv(c, c0), n1 = CeilDiv(n, n0);
    auto src = Iota(c1 * h * w * n1 * n0 * c0);
    auto dst = Convert({kAscendFractalZ, 2, {c1 * h * w, n1, n0, c0}, {n, c, h, w}, 0}, src);
    for (int64_t in = 0; in < n; ++in)
      for (int64_t ic = 0; ic < c; ++ic)
        for (int64_t ih = 0; ih < h; ++ih)
          for (int64_t iw = 0; iw < w; ++iw) {
            const int64_t row = ((ic / c0) * h + ih) * w + iw;
            ASSERT_EQ(dst[((in * c + ic) * h + ih) * w + iw],
                      src[((row * n1 + in / n0) * n0 + in % n0) * c0 + ic % c0]);
          }
  }
}

// Every spatial size from 1 to 20 positions: the vector kernels take rows of up to 16 positions
// whole (AVX-512), in 16x16 blocks with a partial one (AVX2), or 8x8 (SSE2), by channel counts
// with and without a partial last cube.
TEST(AscendFormat, SpatialSizesOneToTwentyMatchFormula) {
  const int64_t c0 = 16, n0 = 16, n = 19, h = 1;
  for (int64_t w = 1; w <= 20; ++w) {
    for (int64_t c : {16, 21}) {
      const int64_t c1 = CeilDiv(c, c0), n1 = CeilDiv(n, n0);
      auto nc = Iota(n * c1 * h * w * c0);
      auto nc_host = Convert({kAscendNC1HWC0, 2, {n, c1, h, w, c0}, {n, c, h, w}, 0}, nc);
      auto fz = Iota(c1 * h * w * n1 * n0 * c0);
      auto fz_host = Convert({kAscendFractalZ, 2, {c1 * h * w, n1, n0, c0}, {n, c, h, w}, 0}, fz);
      for (int64_t in = 0; in < n; ++in)
        for (int64_t ic = 0; ic < c; ++ic)
          for (int64_t iw = 0; iw < w; ++iw) {
            const int64_t host = (in * c + ic) * w + iw;
            ASSERT_EQ(nc_host[host], nc[((in * c1 + ic / c0) * w + iw) * c0 + ic % c0])
                << "NC1HWC0 w=" << w << " c=" << c;
            const int64_t row = (ic / c0) * w + iw;
            ASSERT_EQ(fz_host[host], fz[((row * n1 + in / n0) * n0 + in % n0) * c0 + ic % c0])
                << "FRACTAL_Z w=" << w << " c=" << c;
          }
    }
  }
}

// Converting host rows a slice at a time gives the bytes of the whole conversion, for every
// format, slices of any size.
TEST(AscendFormat, SlicesEqualWholeConversion) {
  const std::vector<DeviceTensorDesc> descs = {
      {kAscendNC1HWC0, 2, {5, 2, 3, 4, 16}, {5, 17, 3, 4}, 0},
      {kAscendNDC1HWC0, 2, {2, 3, 2, 4, 5, 16}, {2, 17, 3, 4, 5}, 0},
      {kAscendC1HWNCoC0, 2, {2, 2, 2, 3, 16, 16}, {3, 17, 2, 2}, 0},
      {kAscendFractalZ, 2, {2 * 9, 3, 16, 16}, {40, 17, 3, 3}, 0},
      {kAscendFractalZ, 2, {2 * 9, 1, 16, 16}, {32, 1, 3, 3}, 32},  // depthwise: 32 groups
      {kAscendFractalZ3D, 2, {2 * 2 * 9, 2, 16, 16}, {20, 17, 2, 3, 3}, 0},
      {kAscendFractalNZ, 2, {3, 3, 2, 16, 16}, {3, 17, 40}, 0},
      {kAscendFractalZ, 1, {9, 2, 16, 32}, {17, 20, 3, 3}, 0},  // int8: C0 = 32
  };
  for (const DeviceTensorDesc& desc : descs) {
    SCOPED_TRACE(
        fmt::format("format {} original ({})", desc.format, fmt::join(desc.original_shape, ",")));
    StatusOr<HostRows> rows = AscendHostRows(desc);
    ASSERT_TRUE(rows.ok()) << rows.status().message();
    int64_t device = 1;
    for (int64_t d : desc.shape) device *= d;
    std::vector<uint8_t> src(device * desc.item_bytes);
    std::mt19937 rng(3);
    for (auto& b : src) b = static_cast<uint8_t>(rng());
    const size_t row_bytes = rows->elements * desc.item_bytes;
    std::vector<uint8_t> whole(rows->count * row_bytes);
    ASSERT_TRUE(ConvertToHostLayout(desc, src.data(), whole.data()).ok());
    for (int64_t slice : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{16}, rows->count}) {
      std::vector<uint8_t> pieces(whole.size(), 0xAB);
      for (int64_t first = 0; first < rows->count; first += slice) {
        const int64_t last = std::min(rows->count, first + slice);
        Status status =
            ConvertHostRows(desc, src.data(), first, last, pieces.data() + first * row_bytes);
        ASSERT_TRUE(status.ok()) << status.message();
      }
      ASSERT_EQ(pieces, whole) << "slices of " << slice << " rows";
    }
  }
}

TEST(AscendFormat, RowsOutsideTheTensorAreAnError) {
  DeviceTensorDesc desc{kAscendNC1HWC0, 2, {2, 1, 4, 5, 16}, {2, 16, 4, 5}, 0};
  std::vector<uint8_t> src(2 * 4 * 5 * 16 * 2), dst(src.size());
  Status status = ConvertHostRows(desc, src.data(), 1, 3, dst.data());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("host rows [1, 3) are outside the 2 rows"), std::string::npos)
      << status.message();
}

TEST(AscendFormat, FractalNZMatchesFormula) {
  const int64_t t = 3, h = 17, w = 40, h0 = 16, w0 = 16, h1 = 2, w1 = 3;
  auto src = Iota(t * w1 * h1 * h0 * w0);
  auto dst = Convert({kAscendFractalNZ, 2, {t, w1, h1, h0, w0}, {t, h, w}, 0}, src);
  for (int64_t it = 0; it < t; ++it)
    for (int64_t ih = 0; ih < h; ++ih)
      for (int64_t iw = 0; iw < w; ++iw)
        ASSERT_EQ(dst[(it * h + ih) * w + iw],
                  src[(((it * w1 + iw / w0) * h1 + ih / h0) * h0 + ih % h0) * w0 + iw % w0]);
}

TEST(AscendFormat, ShapeMismatchNamesBothShapes) {
  DeviceTensorDesc desc{kAscendNC1HWC0, 2, {2, 1, 4, 5, 16}, {2, 17, 4, 5}, 0};
  StatusOr<std::vector<int64_t>> host = AscendHostShape(desc);
  ASSERT_FALSE(host.ok());
  EXPECT_NE(host.status().message().find("(2,1,4,5,16)"), std::string::npos);
  EXPECT_NE(host.status().message().find("expected (2,2,4,5,16)"), std::string::npos);
}

TEST(AscendFormat, GroupsNeedDivisibleOutputChannels) {
  DeviceTensorDesc desc{kAscendFractalZ, 2, {9, 1, 16, 16}, {7, 4, 3, 3}, 2};
  StatusOr<std::vector<int64_t>> host = AscendHostShape(desc);
  ASSERT_FALSE(host.ok());
  EXPECT_NE(host.status().message().find("sub_format"), std::string::npos);
}

TEST(AscendFormat, UnsupportedFormatIsUnsupported) {
  DeviceTensorDesc desc{28, 2, {1, 16, 16}, {16, 16}, 0};
  EXPECT_EQ(AscendHostShape(desc).status().code(), StatusCode::kUnsupported);
  EXPECT_FALSE(IsConvertibleAscendFormat(28));
  EXPECT_TRUE(IsHostAscendFormat(kAscendND));
}

// Shapes from a file whose products wrap int64: a FRACTAL_Z original shape of 2^64 elements
// read as empty (0) and convert wrote a .npy header for it with no data; huge C0/N0 made the
// plan's lcm and ceil-div overflow (UBSan). They are errors now, computed without overflow.
TEST(AscendFormat, ShapesWhoseProductsOverflowAreErrors) {
  const int64_t big = int64_t{1} << 32;
  DeviceTensorDesc wraps{kAscendFractalZ, 2, {1, 1, 16, 16}, {big, big, 1, 1}, 0};
  StatusOr<HostRows> rows = AscendHostRows(wraps);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().message(),
            "original shape (4294967296,4294967296,1,1) has a negative dimension or more elements "
            "than fit int64");
  DeviceTensorDesc negative{kAscendNC1HWC0, 2, {1, 1, 1, 1, 16}, {-1, -1, 1, 1}, 0};
  EXPECT_FALSE(AscendHostRows(negative).ok());
  // Channels and C0 just above 2^62: the old ceil-div (a + b - 1) / b overflowed (UBSan);
  // the plan is consistent and computed exactly.
  const int64_t huge = (int64_t{1} << 62) + 1;
  DeviceTensorDesc wide{kAscendFractalZ, 2, {1, 1, 1, huge}, {1, huge, 1, 1}, 0};
  StatusOr<HostRows> wide_rows = AscendHostRows(wide);
  ASSERT_TRUE(wide_rows.ok()) << wide_rows.status().message();
  EXPECT_EQ(wide_rows->count, 1);
  EXPECT_EQ(wide_rows->elements, huge);
  DeviceTensorDesc nc1hwc0{kAscendNC1HWC0, 2, {1, 1, 1, 1, huge}, {1, huge, 1, 1}, 0};
  EXPECT_TRUE(AscendHostRows(nc1hwc0).ok());
  const int64_t half = int64_t{1} << 61;
  DeviceTensorDesc off{kAscendNC1HWC0, 2, {1, 1, 1, 2, half}, {1, half, 1, 1}, 0};
  EXPECT_NE(AscendHostRows(off).status().message().find("does not match"), std::string::npos);
}

}  // namespace
}  // namespace graphdump
