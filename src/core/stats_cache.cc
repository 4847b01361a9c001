#include "graphdump/internal/stats_cache.h"

namespace graphdump {
namespace {

// Bounds the memory of a step with very many kernels; a full cache starts over.
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

const TensorStats* StatsCache::Find(const TensorView& view, const StatsRequest& request) const {
  if (!Cacheable(view, request)) return nullptr;
  auto it = entries_.find(KeyOf(view, request));
  return it == entries_.end() ? nullptr : &it->second.stats;
}

void StatsCache::Insert(const TensorView& view, const StatsRequest& request,
                        const TensorStats& stats) {
  if (!Cacheable(view, request)) return;
  if (entries_.size() >= kMaxEntries) entries_.clear();
  entries_.insert_or_assign(KeyOf(view, request), Entry{stats, view.origin.storage});
}

}  // namespace graphdump
