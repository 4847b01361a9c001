#include "graphdump/internal/pointer_map.h"

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

TEST(PointerMapTest, KeepsEachValueThroughGrowthAndDropsWhatEraseIfSelects) {
  std::vector<std::unique_ptr<int>> objects;
  for (int i = 0; i < 1000; ++i) objects.push_back(std::make_unique<int>(i));
  PointerMap<int> map;
  EXPECT_EQ(map.Find(objects[0].get()), nullptr);  // nothing allocated yet
  for (const auto& o : objects) {
    auto [value, added] = map.Emplace(o.get());
    ASSERT_TRUE(added);
    EXPECT_EQ(*value, 0);  // value-initialized
    *value = *o;
  }
  EXPECT_EQ(map.size(), objects.size());
  for (const auto& o : objects) {
    auto [value, added] = map.Emplace(o.get());
    EXPECT_FALSE(added);
    EXPECT_EQ(*value, *o);
  }
  map.EraseIf([](const void*, const int& v) { return v % 3 == 0; });
  EXPECT_EQ(map.size(), 666u);
  for (const auto& o : objects) {
    const int* value = map.Find(o.get());
    if (*o % 3 == 0) {
      EXPECT_EQ(value, nullptr) << *o;
    } else {
      ASSERT_NE(value, nullptr) << *o;
      EXPECT_EQ(*value, *o);
    }
  }
}

TEST(PointerMapTest, ClearReleasesEveryValueAndKeepsWorking) {
  auto held = std::make_shared<int>(7);
  std::vector<int> keys(200);
  PointerMap<std::shared_ptr<int>> map;
  for (int round = 0; round < 3; ++round) {
    for (const int& k : keys) *map.Emplace(&k).first = held;
    EXPECT_EQ(held.use_count(), 1 + static_cast<long>(keys.size()));
    map.Clear();
    EXPECT_EQ(map.size(), 0u);
    EXPECT_EQ(held.use_count(), 1) << "round " << round;
    for (const int& k : keys) EXPECT_EQ(map.Find(&k), nullptr);
  }
}

}  // namespace
}  // namespace graphdump
