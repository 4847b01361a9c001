#include "graphdump/internal/pointer_set.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace graphdump {
namespace {

TEST(PointerSetTest, InsertsEachAddressOnceThroughGrowth) {
  // Real heap addresses (alike in their low bits), many more than the first table holds.
  std::vector<std::unique_ptr<int>> objects;
  for (int i = 0; i < 1000; ++i) objects.push_back(std::make_unique<int>(i));
  PointerSet set;
  set.Clear(0);
  for (const auto& o : objects) EXPECT_TRUE(set.Insert(o.get()));
  EXPECT_EQ(set.size(), objects.size());
  for (const auto& o : objects) EXPECT_FALSE(set.Insert(o.get()));
  EXPECT_EQ(set.size(), objects.size());
  int outside = 0;
  EXPECT_TRUE(set.Insert(&outside));
  EXPECT_FALSE(set.Insert(&outside));
}

TEST(PointerSetTest, ClearForgetsEveryAddress) {
  std::vector<int> values(300);
  PointerSet set;
  for (int round = 0; round < 3; ++round) {
    set.Clear(values.size());
    EXPECT_EQ(set.size(), 0u);
    for (const int& v : values) EXPECT_TRUE(set.Insert(&v)) << "round " << round;
    for (const int& v : values) EXPECT_FALSE(set.Insert(&v));
    EXPECT_EQ(set.size(), values.size());
  }
}

}  // namespace
}  // namespace graphdump
