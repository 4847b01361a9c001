#include "graphdump/dims.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace graphdump {
namespace {

TEST(DimsTest, HoldsValuesInlineAndOnTheHeapAlike) {
  for (size_t n : {size_t{0}, size_t{1}, Dims::kInline, Dims::kInline + 1, size_t{20}}) {
    std::vector<int64_t> values;
    for (size_t i = 0; i < n; ++i) values.push_back(static_cast<int64_t>(i * 7 + 1));
    Dims pushed;
    for (int64_t v : values) pushed.push_back(v);
    const Dims built(values.begin(), values.end());
    const Dims converted = values;
    for (const Dims* d : {static_cast<const Dims*>(&pushed), &built, &converted}) {
      ASSERT_EQ(d->size(), n);
      EXPECT_EQ(d->empty(), n == 0);
      EXPECT_EQ(d->ToVector(), values);
      EXPECT_TRUE(*d == values);
    }
    EXPECT_EQ(pushed, built);
  }
}

TEST(DimsTest, CopiesAndMovesKeepTheValuesAndLeaveTheSourceEmptyOnMove) {
  for (size_t n : {size_t{3}, size_t{9}}) {
    Dims a;
    for (size_t i = 0; i < n; ++i) a.push_back(static_cast<int64_t>(100 + i));
    const std::vector<int64_t> want = a.ToVector();
    Dims copy = a;
    copy[0] = -1;  // its own storage
    EXPECT_EQ(a.ToVector(), want);
    Dims moved = std::move(a);
    EXPECT_EQ(moved.ToVector(), want);
    EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): defined as emptied
    a.push_back(5);          // usable again
    EXPECT_EQ(a.ToVector(), std::vector<int64_t>{5});
    Dims assigned{1, 2};
    assigned = moved;
    EXPECT_EQ(assigned.ToVector(), want);
    assigned = Dims{4};
    EXPECT_EQ(assigned.ToVector(), std::vector<int64_t>{4});
  }
}

TEST(DimsTest, AssignReplacesTheValuesWhateverTheyHeldBefore) {
  const std::vector<int64_t> few{7, 8}, many{1, 2, 3, 4, 5, 6, 7, 8, 9};
  Dims d{9, 9, 9};
  d.assign(many.begin(), many.end());  // inline to heap
  EXPECT_EQ(d.ToVector(), many);
  d.assign(few.begin(), few.end());  // fewer than it holds
  EXPECT_EQ(d.ToVector(), few);
  d.assign(many.begin(), many.end());  // back within its capacity
  EXPECT_EQ(d.ToVector(), many);
  d.assign(few.end(), few.end());
  EXPECT_TRUE(d.empty());
}

TEST(DimsTest, ResizeFillsNewDimensionsAndOrdersLikeVectors) {
  Dims d{3};
  d.resize(8, 1);
  EXPECT_EQ(d.ToVector(), (std::vector<int64_t>{3, 1, 1, 1, 1, 1, 1, 1}));
  d.resize(2);
  EXPECT_EQ(d.ToVector(), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(d.back(), 1);
  EXPECT_LT((Dims{1, 2}), (Dims{1, 3}));
  EXPECT_LT((Dims{1, 2}), (Dims{1, 2, 0}));
  EXPECT_NE((Dims{1, 2}), (Dims{2, 1}));
  d.clear();
  EXPECT_TRUE(d.empty());
}

}  // namespace
}  // namespace graphdump
