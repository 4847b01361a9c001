#include "graphdump/analysis/ascend_format.h"

#include <gtest/gtest.h>

#include <array>
#include <numeric>
#include <random>
#include <vector>

#include "graphdump/analysis/ascend_dump.h"

namespace graphdump {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Device buffers are filled with distinct values, host results are compared against a naive
// per-element evaluation of the SPEC §9 index formulas.
std::vector<uint16_t> Iota(int64_t n) {
  std::vector<uint16_t> v(n);
  std::mt19937 rng(7);
  for (auto& x : v) x = static_cast<uint16_t>(rng());
  return v;
}

std::vector<uint16_t> Convert(const DeviceTensorDesc& desc, const std::vector<uint16_t>& src) {
  int64_t count = 1;
  for (int64_t d : desc.original_shape) count *= d;
  std::vector<uint16_t> dst(count, 0);
  Status status = ConvertToHostLayout(desc, reinterpret_cast<const uint8_t*>(src.data()),
                                      reinterpret_cast<uint8_t*>(dst.data()));
  EXPECT_TRUE(status.ok()) << status.message();
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

}  // namespace
}  // namespace graphdump
