#include "graphdump/shape.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace graphdump {
namespace {

using Shape = std::vector<int64_t>;

TEST(ShapeTest, ElementsOfOrdinaryShapes) {
  EXPECT_EQ(ShapeElements(Shape{}), 1);
  EXPECT_EQ(ShapeElements(Shape{2, 3, 4}), 24);
  EXPECT_EQ(ShapeElements(Shape{0, 1 << 30, 1 << 30}), 0);
  EXPECT_EQ(ShapeElements(Shape{INT64_MAX}), INT64_MAX);
}

// The shapes the audit used: each wrapped a plain int64 product (to 0, 1 or a small number).
TEST(ShapeTest, OverflowAndNegativeDimensionsAreRefused) {
  EXPECT_EQ(ShapeElements(Shape{int64_t{1} << 32, int64_t{1} << 32}), std::nullopt);  // 2^64
  EXPECT_EQ(ShapeElements(Shape{-1, -1}), std::nullopt);                              // 1
  EXPECT_EQ(ShapeElements(Shape{3, 3074457345618258603}), std::nullopt);              // > 2^63
  EXPECT_EQ(ShapeElements(Shape{INT64_MAX, 2}), std::nullopt);
  EXPECT_EQ(ShapeElements(Shape{-1, 0}), std::nullopt);  // negative even next to a zero
  EXPECT_EQ(CheckedMul(INT64_MAX, 1), INT64_MAX);
  EXPECT_EQ(CheckedMul(int64_t{1} << 62, 2), std::nullopt);
  EXPECT_EQ(CheckedMul(-2, 3), std::nullopt);
}

TEST(ShapeTest, Bytes) {
  EXPECT_EQ(ElementBytes(3, 4), 2);  // packed int4 rounds up
  EXPECT_EQ(ElementBytes(10, 32), 40);
  EXPECT_EQ(ElementBytes(int64_t{1} << 62, 4), int64_t{1} << 61);  // count * bits overflows
  EXPECT_EQ(ElementBytes(int64_t{1} << 62, 32), std::nullopt);
  EXPECT_EQ(ElementBytes(-1, 8), std::nullopt);
  EXPECT_EQ(ShapeBytes(Shape{2, 3}, 16), 12);
  EXPECT_EQ(ShapeBytes(Shape{int64_t{1} << 61, 2}, 64), std::nullopt);
}

}  // namespace
}  // namespace graphdump
