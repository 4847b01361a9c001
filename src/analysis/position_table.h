// An open-addressing hash table of positions: the index's tables of names (an iteration's
// kernels, the execution order's names) keep their keys where they already are and look them up
// through one flat array, not a node per name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace graphdump::analysis {

class PositionTable {
 public:
  // Room for `n` positions without growing.
  void reserve(size_t n) {
    size_t capacity = 16;
    while (capacity < 2 * n) capacity *= 2;
    if (capacity > slots_.size()) Rehash(capacity);
  }

  // The position whose key has hash `hash` and for which `same(position)` holds; none when no
  // such position was inserted.
  template <typename Same>
  std::optional<uint32_t> Find(size_t hash, Same&& same) const {
    if (slots_.empty()) return std::nullopt;
    const size_t mask = slots_.size() - 1;
    const auto h = static_cast<uint32_t>(hash);
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.position == kEmpty) return std::nullopt;
      if (s.hash == h && same(s.position)) return s.position;
    }
  }

  // Adds `position` under `hash` (the caller checks with Find that its key is not there yet).
  void Insert(size_t hash, uint32_t position) {
    if (2 * (size_ + 1) > slots_.size()) Rehash(slots_.empty() ? 16 : 2 * slots_.size());
    Place(static_cast<uint32_t>(hash), position);
    ++size_;
  }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    uint32_t hash = 0;
    uint32_t position = kEmpty;
  };

  void Place(uint32_t hash, uint32_t position) {
    const size_t mask = slots_.size() - 1;
    size_t i = hash & mask;
    while (slots_[i].position != kEmpty) i = (i + 1) & mask;
    slots_[i] = {hash, position};
  }

  void Rehash(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    for (const Slot& s : old) {
      if (s.position != kEmpty) Place(s.hash, s.position);
    }
  }

  std::vector<Slot> slots_;  // a power of two in size, at most half full
  size_t size_ = 0;
};

}  // namespace graphdump::analysis
