#include "graphdump/internal/stats_cache.h"

namespace graphdump {
namespace {

// Bounds the memory of a step with very many kernels.
constexpr size_t kMaxEntries = size_t{1} << 16;

}  // namespace

bool StatsCache::Cacheable(const TensorView& view, const StatsRequest& request) {
  return view.origin.storage != nullptr && !request.md5;
}

StatsCache::Key StatsCache::KeyOf(const TensorView& view, const StatsRequest& request) {
  Key key{view.origin.storage.get(),
          view.origin.version,
          view.origin.offset,
          view.dtype,
          request.counts,
          view.shape,
          view.strides};
  if (key.strides.empty()) {  // C order, written out so that both spellings compare equal
    key.strides.resize(key.shape.size());
    int64_t stride = 1;
    for (size_t d = key.shape.size(); d-- > 0;) {
      key.strides[d] = stride;
      stride *= key.shape[d];
    }
  }
  for (size_t d = 0; d < key.shape.size(); ++d) {
    if (key.shape[d] == 1) key.strides[d] = 0;  // never stepped over: any stride reads the same
  }
  return key;
}

const TensorStats* StatsCache::Find(const TensorView& view, const StatsRequest& request) {
  if (!Cacheable(view, request)) return nullptr;
  auto it = entries_.find(KeyOf(view, request));
  if (it == entries_.end()) return nullptr;
  it->second.used = true;
  return &it->second.stats;
}

void StatsCache::Insert(const TensorView& view, const StatsRequest& request,
                        const TensorStats& stats) {
  if (!Cacheable(view, request)) return;
  // A full cache records nothing more this step: what it holds stays found (ReadsInput's
  // promise) until EndStep drops what the step did not use.
  if (entries_.size() >= kMaxEntries) return;
  entries_.insert_or_assign(KeyOf(view, request), Entry{stats, view.origin.storage});
}

void StatsCache::EndStep(bool keep) {
  if (!keep) return Clear();
  std::erase_if(entries_, [](const auto& entry) { return !entry.second.used; });
  for (auto& [key, entry] : entries_) entry.used = false;
}

void StatsCache::Forget(const void* storage) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = it->first.storage == storage ? entries_.erase(it) : std::next(it);
  }
}

}  // namespace graphdump
