#include "graphdump/internal/stats_cache.h"

#include <gtest/gtest.h>

#include <memory>
#include <unordered_set>

#include "testing/testing.h"

namespace graphdump {
namespace {

TensorView ViewWithOrigin(std::shared_ptr<const void> storage, uint64_t version, int64_t offset,
                          std::vector<int64_t> shape, std::vector<int64_t> strides = {}) {
  static const float kData[64] = {};
  TensorView view = testing::MakeView(DType::kFloat32, std::move(shape), std::move(strides), kData);
  view.origin.storage = std::move(storage);
  view.origin.version = version;
  view.origin.offset = offset;
  return view;
}

NanPropagatingStats StatsWithMax(double max) {
  NanPropagatingStats stats;
  stats.max = max;
  stats.count = 6;
  return stats;
}

TEST(StatsCacheTest, FindsTheSameBytesOnly) {
  auto storage = std::make_shared<int>(0);
  const StatsRequest values{.counts = false, .md5 = false};
  StatsCache cache;
  const TensorView view = ViewWithOrigin(storage, 3, 16, {2, 3});
  EXPECT_EQ(cache.Find(view, values), nullptr);
  cache.Insert(view, values, StatsWithMax(7.0));
  ASSERT_NE(cache.Find(view, values), nullptr);
  EXPECT_EQ(cache.Find(view, values)->max, 7.0);
  // The same layout spelled with explicit strides, and a size-1 dimension with any stride.
  EXPECT_NE(cache.Find(ViewWithOrigin(storage, 3, 16, {2, 3}, {3, 1}), values), nullptr);
  const TensorView column = ViewWithOrigin(storage, 3, 16, {6, 1}, {1, 1});
  cache.Insert(column, values, StatsWithMax(8.0));
  EXPECT_EQ(cache.Find(ViewWithOrigin(storage, 3, 16, {6, 1}, {1, 99}), values)->max, 8.0);

  // Anything else that could mean other bytes misses.
  EXPECT_EQ(cache.Find(ViewWithOrigin(storage, 4, 16, {2, 3}), values), nullptr);  // written
  EXPECT_EQ(cache.Find(ViewWithOrigin(storage, 3, 0, {2, 3}), values), nullptr);   // offset
  EXPECT_EQ(cache.Find(ViewWithOrigin(storage, 3, 16, {3, 2}), values), nullptr);  // shape
  EXPECT_EQ(cache.Find(ViewWithOrigin(storage, 3, 16, {2, 3}, {1, 2}), values), nullptr);
  EXPECT_EQ(cache.Find(ViewWithOrigin(std::make_shared<int>(0), 3, 16, {2, 3}), values), nullptr);
  EXPECT_EQ(cache.Find(view, StatsRequest{.counts = true, .md5 = false}), nullptr);
  TensorView other_dtype = view;
  other_dtype.dtype = DType::kInt32;
  EXPECT_EQ(cache.Find(other_dtype, values), nullptr);

  cache.Clear();
  EXPECT_EQ(cache.Find(view, values), nullptr);
}

TEST(StatsCacheTest, ProbeFindsAndRecordsWithOneKey) {
  auto storage = std::make_shared<int>(0);
  const StatsRequest values{.counts = false, .md5 = false};
  StatsCache cache;
  const TensorView view = ViewWithOrigin(storage, 3, 16, {2, 3});
  StatsCache::Probe probe(view, values);
  EXPECT_EQ(cache.Find(probe), nullptr);
  cache.Insert(std::move(probe), StatsWithMax(5.0));
  EXPECT_EQ(cache.size(), 1u);
  // Found again by a new probe and by the view itself, and the same bytes spelled otherwise.
  ASSERT_NE(cache.Find(StatsCache::Probe(view, values)), nullptr);
  EXPECT_EQ(cache.Find(StatsCache::Probe(view, values))->max, 5.0);
  EXPECT_EQ(cache.Find(ViewWithOrigin(storage, 3, 16, {2, 3}, {3, 1}), values)->max, 5.0);
  EXPECT_EQ(cache.Find(StatsCache::Probe(ViewWithOrigin(storage, 4, 16, {2, 3}), values)),
            nullptr);
  // An md5 request, or a view without an origin, is never recorded.
  const StatsRequest md5{.counts = false, .md5 = true};
  cache.Insert(StatsCache::Probe(view, md5), StatsWithMax(6.0));
  TensorView no_origin = view;
  no_origin.origin.storage = nullptr;
  cache.Insert(StatsCache::Probe(no_origin, values), StatsWithMax(6.0));
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.Find(StatsCache::Probe(view, md5)), nullptr);
}

// Entries dropped at a step's end leave their nodes and cells for later entries: a cell comes
// back empty and still to be filled, and one that a queued row (here: the test) still holds is
// never handed out again.
TEST(StatsCacheTest, DroppedEntriesCellsComeBackEmptyAndHeldCellsNever) {
  auto a = std::make_shared<int>(0), b = std::make_shared<int>(0), c = std::make_shared<int>(0);
  const StatsRequest values{.counts = false, .md5 = false};
  StatsCache cache;
  const TensorView va = ViewWithOrigin(a, 1, 0, {2, 3}), vb = ViewWithOrigin(b, 1, 0, {2, 3});
  bool added = false;
  std::shared_ptr<StatsCell> held = cache.FindOrAddCell(StatsCache::Probe(va, values), &added);
  held->stats = StatsWithMax(5.0);
  held->Finish(true);
  cache.Insert(vb, values, StatsWithMax(9.0));
  cache.EndStep(/*keep=*/true);  // both used in this step: kept
  EXPECT_EQ(cache.Find(vb, values)->max, 9.0);
  cache.EndStep(true);  // b used in the step that ended, a not
  cache.EndStep(true);  // neither
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.Find(va, values), nullptr);
  EXPECT_EQ(cache.Find(vb, values), nullptr);
  std::unordered_set<StatsCell*> seen;
  for (int i = 0; i < 3; ++i) {
    const TensorView vc = ViewWithOrigin(c, 10 + i, 0, {4});
    std::shared_ptr<StatsCell> cell = cache.FindOrAddCell(StatsCache::Probe(vc, values), &added);
    ASSERT_NE(cell, nullptr);
    EXPECT_TRUE(added);
    EXPECT_NE(cell, held);
    EXPECT_FALSE(cell->ready());
    EXPECT_EQ(cell->stats.count, 0u);
    seen.insert(cell.get());
  }
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_TRUE(held->ready());
  EXPECT_EQ(held->stats.max, 5.0);
  // The same key again finds its entry, whichever node it took.
  EXPECT_EQ(cache.FindCell(StatsCache::Probe(ViewWithOrigin(c, 11, 0, {4}), values)).get(),
            cache.FindCell(StatsCache::Probe(ViewWithOrigin(c, 11, 0, {4}), values)).get());
  EXPECT_EQ(cache.size(), 3u);
}

TEST(StatsCacheTest, FindOrAddCellAddsOnceAndRecordsNothingWithoutAKey) {
  auto storage = std::make_shared<int>(0);
  const StatsRequest values{.counts = false, .md5 = false};
  StatsCache cache;
  const TensorView view = ViewWithOrigin(storage, 3, 16, {2, 3});
  bool added = false;
  std::shared_ptr<StatsCell> first = cache.FindOrAddCell(StatsCache::Probe(view, values), &added);
  ASSERT_NE(first, nullptr);
  EXPECT_TRUE(added);
  EXPECT_FALSE(first->ready());
  // The same bytes again: the cell added, still to be filled, and nothing new.
  std::shared_ptr<StatsCell> again = cache.FindOrAddCell(StatsCache::Probe(view, values), &added);
  EXPECT_EQ(again, first);
  EXPECT_FALSE(added);
  EXPECT_EQ(cache.FindCell(StatsCache::Probe(view, values)), first);
  EXPECT_EQ(cache.size(), 1u);
  // Other bytes get a cell of their own; bytes without a key get none.
  EXPECT_NE(cache.FindOrAddCell(StatsCache::Probe(ViewWithOrigin(storage, 4, 16, {2, 3}), values),
                                &added),
            first);
  EXPECT_TRUE(added);
  TensorView no_origin = view;
  no_origin.origin.storage = nullptr;
  EXPECT_EQ(cache.FindOrAddCell(StatsCache::Probe(no_origin, values), &added), nullptr);
  EXPECT_FALSE(added);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(StatsCacheTest, NeverMatchesWithoutOriginUnversionedOrForMd5) {
  StatsCache cache;
  const StatsRequest md5{.counts = false, .md5 = true};
  const TensorView view = ViewWithOrigin(std::make_shared<int>(0), 1, 0, {4});
  cache.Insert(view, md5, StatsWithMax(1.0));
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.Find(view, md5), nullptr);
  TensorView anonymous = view;
  anonymous.origin.storage = nullptr;
  cache.Insert(anonymous, StatsRequest{}, StatsWithMax(1.0));
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.Find(anonymous, StatsRequest{}), nullptr);
  // Bytes written behind the version counter: the allocation is known, the bytes are not.
  TensorView unversioned = view;
  unversioned.origin.versioned = false;
  cache.Insert(unversioned, StatsRequest{}, StatsWithMax(1.0));
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.Find(unversioned, StatsRequest{}), nullptr);
}

TEST(StatsCacheTest, HoldsTheStorageIdentity) {
  StatsCache cache;
  std::weak_ptr<int> watch;
  {
    auto storage = std::make_shared<int>(0);
    watch = storage;
    cache.Insert(ViewWithOrigin(storage, 1, 0, {4}), StatsRequest{}, StatsWithMax(1.0));
  }
  // The host dropped its reference: the cache's keeps the address from being reused.
  EXPECT_FALSE(watch.expired());
  cache.Clear();
  EXPECT_TRUE(watch.expired());
}

// Kept into the next step: what was found or recorded during a step stays for the next one;
// the rest goes, and releases its storage. Without `keep` everything goes.
TEST(StatsCacheTest, EndStepKeepsWhatTheStepUsed) {
  const StatsRequest values{.counts = false};
  StatsCache cache;
  std::weak_ptr<int> watch_activation;
  auto parameter = std::make_shared<int>(0);
  {
    auto activation = std::make_shared<int>(0);
    watch_activation = activation;
    cache.Insert(ViewWithOrigin(activation, 1, 0, {4}), values, StatsWithMax(1.0));
  }
  cache.Insert(ViewWithOrigin(parameter, 7, 0, {4}), values, StatsWithMax(2.0));
  cache.EndStep(/*keep=*/true);  // both recorded in step 0: both kept
  EXPECT_EQ(cache.size(), 2u);
  // Step 1 reads the parameter again, not the activation.
  ASSERT_NE(cache.Find(ViewWithOrigin(parameter, 7, 0, {4}), values), nullptr);
  cache.EndStep(/*keep=*/true);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_TRUE(watch_activation.expired());
  EXPECT_EQ(cache.Find(ViewWithOrigin(parameter, 7, 0, {4}), values)->max, 2.0);
  // A step that uses nothing empties it.
  cache.EndStep(/*keep=*/true);
  cache.EndStep(/*keep=*/true);
  EXPECT_EQ(cache.size(), 0u);
  cache.Insert(ViewWithOrigin(parameter, 8, 0, {4}), values, StatsWithMax(3.0));
  cache.EndStep(/*keep=*/false);
  EXPECT_EQ(cache.size(), 0u);
}

// Forget drops every entry of the allocations named (all views and versions of them), and
// nothing else.
TEST(StatsCacheTest, ForgetDropsTheNamedAllocationsOnly) {
  const StatsRequest values{.counts = false};
  StatsCache cache;
  auto a = std::make_shared<int>(0), b = std::make_shared<int>(0), c = std::make_shared<int>(0);
  cache.Insert(ViewWithOrigin(a, 1, 0, {4}), values, StatsWithMax(1.0));
  cache.Insert(ViewWithOrigin(a, 1, 16, {2}), values, StatsWithMax(1.5));
  cache.Insert(ViewWithOrigin(b, 1, 0, {4}), values, StatsWithMax(2.0));
  cache.Insert(ViewWithOrigin(c, 1, 0, {4}), values, StatsWithMax(3.0));
  cache.Forget(std::unordered_set<const void*>{a.get(), c.get()});
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.Find(ViewWithOrigin(a, 1, 16, {2}), values), nullptr);
  EXPECT_EQ(cache.Find(ViewWithOrigin(b, 1, 0, {4}), values)->max, 2.0);
  cache.Forget(b.get());
  EXPECT_EQ(cache.size(), 0u);
}

}  // namespace
}  // namespace graphdump
