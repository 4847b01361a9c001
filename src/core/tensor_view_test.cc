#include "graphdump/tensor_view.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "testing/testing.h"

namespace graphdump {
namespace {

using testing::MakeView;

TEST(TensorViewTest, ElementsAndContiguity) {
  EXPECT_EQ(MakeView(DType::kFloat32, {}, {}, nullptr).NumElements(), 1);
  EXPECT_EQ(MakeView(DType::kFloat32, {2, 0, 3}, {}, nullptr).NumElements(), 0);
  EXPECT_EQ(MakeView(DType::kFloat32, {2, 3, 4}, {}, nullptr).NumElements(), 24);
  EXPECT_TRUE(MakeView(DType::kFloat32, {2, 3}, {3, 1}, nullptr).IsContiguous());
  EXPECT_FALSE(MakeView(DType::kFloat32, {2, 3}, {1, 2}, nullptr).IsContiguous());
  EXPECT_FALSE(MakeView(DType::kFloat32, {2, 3}, {6, 2}, nullptr).IsContiguous());
  EXPECT_TRUE(MakeView(DType::kFloat32, {2, 1, 3}, {3, 77, 1}, nullptr).IsContiguous());
  EXPECT_TRUE(MakeView(DType::kFloat32, {0, 3}, {1, 9}, nullptr).IsContiguous());
  EXPECT_EQ(MakeView(DType::kFloat64, {2, 3}, {}, nullptr).ContiguousBytes(), 48u);
  EXPECT_EQ(MakeView(DType::kInt4, {5}, {}, nullptr).ContiguousBytes(), 3u);
}

TEST(TensorViewTest, CopyContiguousGathersInCOrder) {
  std::vector<int16_t> storage(12);
  std::iota(storage.begin(), storage.end(), 0);  // a 3x4 matrix
  // Its transpose (4x3) and its columns 1 and 3 (3x2).
  const TensorView t = MakeView(DType::kInt16, {4, 3}, {1, 4}, storage.data());
  const TensorView c = MakeView(DType::kInt16, {3, 2}, {4, 2}, storage.data() + 1);
  ASSERT_EQ(t.ContiguousBytes(), 24u);
  ASSERT_EQ(c.ContiguousBytes(), 12u);
  // One element more than needed, which must stay untouched.
  std::vector<int16_t> tv(13, -1), cv(7, -1);
  CopyContiguousTo(t, reinterpret_cast<uint8_t*>(tv.data()));
  CopyContiguousTo(c, reinterpret_cast<uint8_t*>(cv.data()));
  EXPECT_EQ(tv, (std::vector<int16_t>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, -1}));
  EXPECT_EQ(cv, (std::vector<int16_t>{1, 3, 5, 7, 9, 11, -1}));
}

TEST(TensorViewTest, ChunksEndOnElementBoundaries) {
  std::vector<float> storage(100);
  std::iota(storage.begin(), storage.end(), 0.0f);
  for (bool strided : {false, true}) {
    const TensorView view = strided ? MakeView(DType::kFloat32, {10, 5}, {1, 20}, storage.data())
                                    : MakeView(DType::kFloat32, {25}, {}, storage.data());
    std::vector<float> seen;
    ForEachContiguousChunk(view, 7, [&](const uint8_t* bytes, size_t n) {
      EXPECT_EQ(n, 4u);  // 7 bytes hold one float32
      const size_t old = seen.size();
      seen.resize(old + n / 4);
      std::memcpy(seen.data() + old, bytes, n);
    });
    ASSERT_EQ(seen.size(), strided ? 50u : 25u);
    for (size_t i = 0; i < seen.size(); ++i) {
      const float want = strided ? static_cast<float>((i % 5) * 20 + i / 5) : static_cast<float>(i);
      EXPECT_EQ(seen[i], want) << i;
    }
  }
  size_t total = 0, calls = 0;
  ForEachContiguousChunk(MakeView(DType::kFloat32, {10, 5}, {1, 20}, storage.data()), 64,
                         [&](const uint8_t*, size_t n) {
                           EXPECT_EQ(n % 4, 0u);
                           EXPECT_LE(n, 64u);
                           total += n;
                           ++calls;
                         });
  EXPECT_EQ(total, 200u);
  EXPECT_EQ(calls, 4u);  // 3 full pieces of 16 elements, then 2 elements
  ForEachContiguousChunk(MakeView(DType::kFloat32, {0, 5}, {1, 20}, nullptr), 64,
                         [&](const uint8_t*, size_t) { ADD_FAILURE() << "no data expected"; });
}

// Rows each contiguous but apart from one another (a head split off a wider tensor, then
// transposed: shape (2, 3, 4, 5) over storage laid out (2, 4, 3, 16)), at piece sizes smaller
// than a row, a row's, between rows and larger than the whole: the same elements in C order.
TEST(TensorViewTest, ContiguousRowsApartAreGatheredAtEveryPieceSize) {
  std::vector<float> storage(2 * 4 * 3 * 16);
  std::iota(storage.begin(), storage.end(), 0.0f);
  const std::vector<int64_t> shape{2, 3, 4, 5}, strides{4 * 3 * 16, 16, 3 * 16, 1};
  const TensorView view = MakeView(DType::kFloat32, shape, strides, storage.data() + 2);
  std::vector<float> want;
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 4; ++c)
        for (int64_t d = 0; d < 5; ++d)
          want.push_back(storage[2 + a * strides[0] + b * strides[1] + c * strides[2] + d]);
  for (size_t piece : {4, 12, 20, 28, 64, 1 << 20}) {
    std::vector<float> seen;
    ForEachContiguousChunk(view, piece, [&](const uint8_t* bytes, size_t n) {
      EXPECT_EQ(n % 4, 0u);
      EXPECT_LE(n, piece);
      const size_t old = seen.size();
      seen.resize(old + n / 4);
      std::memcpy(seen.data() + old, bytes, n);
    });
    EXPECT_EQ(seen, want) << "pieces of " << piece << " bytes";
  }
}

TEST(TensorViewTest, ShapeToString) {
  EXPECT_EQ(ShapeToString(std::vector<int64_t>{2, 3}), "(2,3)");
  EXPECT_EQ(ShapeToString(std::vector<int64_t>{}), "()");
  EXPECT_EQ(ShapeToString(std::vector<int64_t>{5}), "(5)");
}

}  // namespace
}  // namespace graphdump
