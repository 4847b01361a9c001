#include "graphdump/internal/stats_cache.h"

namespace graphdump {
namespace {

// Bounds the memory of a step with very many kernels.
constexpr size_t kMaxEntries = size_t{1} << 16;

}  // namespace

std::optional<StatsCache::Key> StatsCache::KeyOf(const TensorView& view,
                                                 const StatsRequest& request) {
  if (request.md5) return std::nullopt;  // the md5 depends on the order bytes are visited in
  std::optional<BytesKey> bytes = BytesKeyOf(view);
  if (!bytes) return std::nullopt;
  return Key{std::move(*bytes), request};
}

const NanPropagatingStats* StatsCache::Find(const TensorView& view, const StatsRequest& request) {
  std::optional<Key> key = KeyOf(view, request);
  if (!key) return nullptr;
  auto it = entries_.find(*key);
  if (it == entries_.end()) return nullptr;
  it->second.used = true;
  return &it->second.stats;
}

void StatsCache::Insert(const TensorView& view, const StatsRequest& request,
                        const NanPropagatingStats& stats) {
  std::optional<Key> key = KeyOf(view, request);
  if (!key) return;
  // A full cache records nothing more this step: what it holds stays found (ReadsInput's
  // promise) until EndStep drops what the step did not use.
  if (entries_.size() >= kMaxEntries) return;
  entries_.insert_or_assign(std::move(*key), Entry{stats, view.origin.storage});
}

void StatsCache::EndStep(bool keep) {
  if (!keep) return Clear();
  std::erase_if(entries_, [](const auto& entry) { return !entry.second.used; });
  for (auto& [key, entry] : entries_) entry.used = false;
}

void StatsCache::Forget(const void* storage) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = it->first.bytes.storage == storage ? entries_.erase(it) : std::next(it);
  }
}

}  // namespace graphdump
