#include "graphdump/internal/stats_cache.h"

#include <functional>
#include <iterator>
#include <utility>

namespace graphdump {
namespace {

// Bounds the memory of a step with very many kernels.
constexpr size_t kMaxEntries = size_t{1} << 16;
// Bounds the nodes and cells kept for later entries.
constexpr size_t kMaxSpare = size_t{1} << 12;

}  // namespace

size_t StatsCache::KeyHash::operator()(const Key& key) const {
  size_t seed = HashBytesKey(key.bytes);
  MixHash(&seed, uint64_t{key.request.counts} << 1 | uint64_t{key.request.md5});
  return seed;
}

std::optional<StatsCache::Key> StatsCache::KeyOf(const TensorView& view,
                                                 const StatsRequest& request) {
  if (request.md5) return std::nullopt;  // the md5 depends on the order bytes are visited in
  std::optional<BytesKey> bytes = BytesKeyOf(view);
  if (!bytes) return std::nullopt;
  return Key{std::move(*bytes), request};
}

StatsCache::Probe::Probe(const TensorView& view, const StatsRequest& request)
    : view_(view), key_(KeyOf(view, request)) {}

StatsCache::Entry* StatsCache::FindEntry(const Probe& probe) {
  if (!probe.key_) return nullptr;
  auto it = entries_.find(*probe.key_);
  if (it == entries_.end()) return nullptr;
  it->second.used = true;
  return &it->second;
}

std::shared_ptr<StatsCell> StatsCache::FindCell(const Probe& probe) {
  Entry* entry = FindEntry(probe);
  return entry ? entry->cell : nullptr;
}

bool StatsCache::InsertCell(Probe&& probe, std::shared_ptr<StatsCell> cell) {
  if (!probe.key_) return false;
  // A full cache records nothing more this step: what it holds stays found (ReadsInput's
  // promise) until EndStep drops what the step did not use.
  if (entries_.size() >= kMaxEntries) return false;
  Entry& entry = Emplace(std::move(*probe.key_)).first->second;
  entry = Entry{std::move(cell), probe.view_.origin.storage};
  probe.key_.reset();
  return true;
}

std::pair<StatsCache::Entries::iterator, bool> StatsCache::Emplace(Key&& key) {
  if (spare_nodes_.empty()) return entries_.try_emplace(std::move(key));
  Entries::node_type node = std::move(spare_nodes_.back());
  spare_nodes_.pop_back();
  node.key() = std::move(key);
  auto inserted = entries_.insert(std::move(node));
  if (!inserted.inserted) spare_nodes_.push_back(std::move(inserted.node));
  return {inserted.position, inserted.inserted};
}

StatsCache::Entries::iterator StatsCache::Drop(Entries::iterator it) {
  auto next = std::next(it);
  Entries::node_type node = entries_.extract(it);
  Entry& entry = node.mapped();
  // Held by the cache alone (no queued row or other thread has it): filled again later.
  if (entry.cell.use_count() == 1 && spare_cells_.size() < kMaxSpare) {
    spare_cells_.push_back(std::move(entry.cell));
  }
  entry = Entry{};
  if (spare_nodes_.size() < kMaxSpare) spare_nodes_.push_back(std::move(node));
  return next;
}

std::shared_ptr<StatsCell> StatsCache::NewCell() {
  if (spare_cells_.empty()) return std::make_shared<StatsCell>();
  std::shared_ptr<StatsCell> cell = std::move(spare_cells_.back());
  spare_cells_.pop_back();
  cell->stats = NanPropagatingStats{};
  cell->state.store(StatsCell::kQueued, std::memory_order_relaxed);
  return cell;
}

std::shared_ptr<StatsCell> StatsCache::FindOrAddCell(Probe&& probe, bool* added) {
  *added = false;
  if (!probe.key_) return nullptr;
  if (entries_.size() >= kMaxEntries) return FindCell(probe);
  auto [it, inserted] = Emplace(std::move(*probe.key_));
  probe.key_.reset();
  Entry& entry = it->second;
  if (inserted) {
    entry.cell = NewCell();
    entry.storage = probe.view_.origin.storage;
    *added = true;
  }
  entry.used = true;
  return entry.cell;
}

const NanPropagatingStats* StatsCache::Find(const Probe& probe) {
  Entry* entry = FindEntry(probe);
  return entry ? &entry->cell->stats : nullptr;
}

bool StatsCache::Insert(Probe&& probe, const NanPropagatingStats& stats) {
  std::shared_ptr<StatsCell> cell = NewCell();
  cell->stats = stats;
  cell->state.store(StatsCell::kReady, std::memory_order_relaxed);  // not shared yet
  return InsertCell(std::move(probe), std::move(cell));
}

const NanPropagatingStats* StatsCache::Find(const TensorView& view, const StatsRequest& request) {
  return Find(Probe(view, request));
}

void StatsCache::Insert(const TensorView& view, const StatsRequest& request,
                        const NanPropagatingStats& stats) {
  (void)Insert(Probe(view, request), stats);
}

template <typename Pred>
void StatsCache::DropIf(Pred drop) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = drop(it->first, it->second) ? Drop(it) : std::next(it);
  }
}

void StatsCache::EndStep(bool keep) {
  if (!keep) return Clear();
  // What was used stays, marked unused for the next step.
  DropIf([](const Key&, Entry& entry) { return !std::exchange(entry.used, false); });
}

void StatsCache::Clear() {
  DropIf([](const Key&, const Entry&) { return true; });
}

void StatsCache::Forget(const void* storage) {
  DropIf([&](const Key& key, const Entry&) { return key.bytes.storage == storage; });
}

void StatsCache::Forget(const std::unordered_set<const void*>& storages) {
  DropIf([&](const Key& key, const Entry&) { return storages.contains(key.bytes.storage); });
}

}  // namespace graphdump
