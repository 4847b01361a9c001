#include "graphdump/internal/bytes_key.h"

namespace graphdump {

std::optional<BytesKey> BytesKeyOf(const TensorView& view) {
  if (view.origin.storage == nullptr || !view.origin.versioned) return std::nullopt;
  BytesKey key{view.origin.storage.get(), view.origin.version, view.origin.offset, view.dtype,
               view.shape, view.strides};
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

size_t HashBytesKey(const BytesKey& key) {
  size_t seed = std::hash<const void*>{}(key.storage);
  MixHash(&seed, key.version);
  MixHash(&seed, static_cast<uint64_t>(key.offset));
  MixHash(&seed, static_cast<uint64_t>(key.dtype));
  for (int64_t d : key.shape) MixHash(&seed, static_cast<uint64_t>(d));
  for (int64_t s : key.strides) MixHash(&seed, static_cast<uint64_t>(s));
  return seed;
}

}  // namespace graphdump
