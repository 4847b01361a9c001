#include "graphdump/analysis/tensor_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "graphdump/npy.h"
#include "testing/testing.h"

namespace graphdump::analysis {
namespace {

// Writes a .npy of `values` (one dimension) as `dtype`, whose elements `T` holds bit for bit.
template <typename T>
std::string WriteNpy(const testing::TempDir& dir, const std::string& name, DType dtype,
                     const std::vector<T>& values) {
  std::string bytes = NpyHeader(dtype, {static_cast<int64_t>(values.size())});
  bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  testing::WriteFile(dir.Sub(name), bytes);
  return dir.Sub(name);
}

std::unique_ptr<MappedNpy> Open(const std::string& path) {
  auto npy = MappedNpy::Open(path);
  EXPECT_TRUE(npy.ok()) << npy.status().message();
  return std::move(npy).value();
}

TEST(TensorMathTest, MetricsMatchTheDefinitions) {
  testing::TempDir dir;
  auto a = Open(WriteNpy<float>(dir, "a.npy", DType::kFloat32, {1, 2, 3, 4}));
  auto b = Open(WriteNpy<double>(dir, "b.npy", DType::kFloat64, {1, 2, 3.003, 0}));
  const PairMetrics m = ComparePair(*a, *b, 1e-8, 1e-5);
  EXPECT_EQ(m.elements, 4);
  const double dot = 1 + 4 + 3 * 3.003, na = std::sqrt(30.0), nb = std::sqrt(1 + 4 + 3.003 * 3.003);
  EXPECT_NEAR(m.cosine, dot / (na * nb), 1e-12);
  EXPECT_NEAR(m.max_abs_err, 4, 1e-12);
  EXPECT_NEAR(m.max_rel_err, 4 / 2.220446049250313e-16, 1e3);
  EXPECT_NEAR(m.rmse, std::sqrt((0.003 * 0.003 + 16) / 4), 1e-9);
  EXPECT_DOUBLE_EQ(m.rel_err_below_0_1pct, 0.75);  // 0.003/3.003 < 0.001
  EXPECT_DOUBLE_EQ(m.rel_err_below_0_5pct, 0.75);
  EXPECT_EQ(m.allclose_failures, 2);
  EXPECT_EQ(m.first_failure, 2);
}

TEST(TensorMathTest, NonFinitePositions) {
  testing::TempDir dir;
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  auto a = Open(WriteNpy<float>(dir, "a.npy", DType::kFloat32, {nan, 1, inf, 2, nan}));
  auto b = Open(WriteNpy<float>(dir, "b.npy", DType::kFloat32, {nan, 1, inf, -inf, 3}));
  const PairMetrics m = ComparePair(*a, *b, 0, 0);
  EXPECT_EQ(m.nan_a, 2);
  EXPECT_EQ(m.nan_b, 1);
  EXPECT_EQ(m.inf_a, 1);
  EXPECT_EQ(m.inf_b, 2);
  EXPECT_EQ(m.nonfinite_mismatches, 2);
  EXPECT_EQ(m.first_nonfinite_mismatch, 3);
  EXPECT_EQ(m.finite_pairs, 1);
  EXPECT_EQ(m.allclose_failures, 0);
}

TEST(TensorMathTest, HalfAndSummary) {
  testing::TempDir dir;
  // 1.0, -2.0, 0, 65504 (max half), +inf in float16 bits
  auto h = Open(
      WriteNpy<uint16_t>(dir, "h.npy", DType::kFloat16, {0x3c00, 0xc000, 0x0000, 0x7bff, 0x7c00}));
  const FiniteSummary s = SummarizeFinite(*h);
  EXPECT_EQ(s.elements, 5);
  EXPECT_EQ(s.max, 65504);
  EXPECT_EQ(s.min, -2);
  EXPECT_EQ(s.zero, 1);
  EXPECT_EQ(s.pos_inf, 1);
  EXPECT_EQ(s.fp16_overflow, 0);
  EXPECT_NEAR(s.l2norm, std::sqrt(1 + 4 + 65504.0 * 65504.0), 1e-6);
  auto f = Open(WriteNpy<float>(dir, "f.npy", DType::kFloat32, {1, -70000}));
  EXPECT_EQ(SummarizeFinite(*f).fp16_overflow, 1);
  EXPECT_EQ(SummarizeFinite(*f).max_abs, 70000);
}

TEST(TensorMathTest, DeltaBetweenWeights) {
  testing::TempDir dir;
  auto a = Open(WriteNpy<float>(dir, "a.npy", DType::kFloat32, {3, 4}));
  auto b = Open(WriteNpy<float>(dir, "b.npy", DType::kFloat32, {3, 4}));
  auto c = Open(WriteNpy<float>(dir, "c.npy", DType::kFloat32, {0, 0}));
  EXPECT_TRUE(DeltaBetween(*a, *b).identical);
  const DeltaNorms d = DeltaBetween(*c, *a);
  EXPECT_FALSE(d.identical);
  EXPECT_DOUBLE_EQ(d.diff_l2, 5);
  EXPECT_DOUBLE_EQ(d.ref_l2, 5);
}

TEST(MappedNpyTest, TruncatedFileIsCorruptAndNamed) {
  testing::TempDir dir;
  const std::string path = WriteNpy<float>(dir, "t.npy", DType::kFloat32, {1, 2, 3});
  std::string bytes = testing::ReadFile(path);
  testing::WriteFile(path, bytes.substr(0, bytes.size() - 5));
  auto npy = MappedNpy::Open(path);
  ASSERT_FALSE(npy.ok());
  EXPECT_EQ(npy.status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(npy.status().message(),
            path + ": truncated .npy: header promises 12 data bytes, file has 7");
  auto missing = MappedNpy::Open(dir.Sub("none.npy"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

// A .npy of `values` stored as `descr`, its data `misalign` bytes past an aligned offset (a
// header numpy would not write, but any file can hold).
template <typename T>
std::unique_ptr<MappedNpy> InMemory(const std::string& descr, const std::vector<T>& values,
                                    size_t misalign = 0) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" +
                     std::to_string(values.size()) + ",), }";
  while ((10 + dict.size() + 1) % 64 != misalign) dict += ' ';
  dict += '\n';
  std::vector<uint8_t> bytes = {0x93,
                                'N',
                                'U',
                                'M',
                                'P',
                                'Y',
                                1,
                                0,
                                static_cast<uint8_t>(dict.size() & 0xff),
                                static_cast<uint8_t>(dict.size() >> 8)};
  bytes.insert(bytes.end(), dict.begin(), dict.end());
  const auto* raw = reinterpret_cast<const uint8_t*>(values.data());
  bytes.insert(bytes.end(), raw, raw + values.size() * sizeof(T));
  auto npy = MappedNpy::FromBytes(std::move(bytes), "mem.npy");
  EXPECT_TRUE(npy.ok()) << npy.status().message();
  return std::move(npy).value();
}

// '<E2' (raw bfloat16) was read with 4 bytes per element: a cosine of 0.096 for values that
// agree within 0.5%, and reads past the end of the data.
TEST(TensorMathTest, RawBfloat16IsReadAsTwoByteElements) {
  std::vector<float> reference(1000);
  std::vector<uint16_t> bf16(reference.size());
  for (size_t i = 0; i < reference.size(); ++i) {
    reference[i] = std::sin(0.1f * static_cast<float>(i)) * 3.0f + 0.5f;
    uint32_t bits;
    std::memcpy(&bits, &reference[i], 4);
    bf16[i] = static_cast<uint16_t>((bits + 0x8000) >> 16);  // rounded to bfloat16
  }
  auto raw = InMemory<uint16_t>("<E2", bf16);
  ASSERT_EQ(raw->info().dtype, DType::kBFloat16);
  EXPECT_EQ(raw->info().data_bytes, 2000u);
  auto ref = InMemory<float>("<f4", reference);
  const PairMetrics m = ComparePair(*raw, *ref, 0, 0.01);
  EXPECT_GT(m.cosine, 0.99999);
  EXPECT_LT(m.max_rel_err, 0.005);
  EXPECT_EQ(m.allclose_failures, 0);
  const FiniteSummary s = SummarizeFinite(*raw);
  EXPECT_EQ(s.elements, 1000);
  EXPECT_NEAR(s.max, 3.5, 0.02);
}

// A float32 file whose data is not 4-byte aligned was read through float* (UBSan: misaligned
// load); the results are those of the aligned file.
TEST(TensorMathTest, MisalignedFloat32DataIsReadCorrectly) {
  const std::vector<float> a = {1, 2, 3, 4, 5}, b = {1, 2, 3, 4, 6};
  for (size_t misalign : {1, 2, 3}) {
    auto x = InMemory<float>("<f4", a, misalign), y = InMemory<float>("<f4", b, 3 - misalign % 3);
    EXPECT_NE(reinterpret_cast<uintptr_t>(x->data()) % 4, 0u);
    const PairMetrics m = ComparePair(*x, *y, 0, 0);
    EXPECT_EQ(m.elements, 5);
    EXPECT_DOUBLE_EQ(m.max_abs_err, 1.0);
    EXPECT_EQ(m.first_failure, 4);
    EXPECT_DOUBLE_EQ(SummarizeFinite(*x).max, 5.0);
  }
}

}  // namespace
}  // namespace graphdump::analysis
