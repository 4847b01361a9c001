// A set of addresses that keeps its memory when cleared. Hooking a backward pass walks every
// autograd node once a step; a node allocated per insert (std::unordered_set) cost as much as
// the rest of the walk. The addresses are only compared, never followed.
//
//   PointerSet seen;
//   seen.Clear(/*expected=*/last_size);
//   if (seen.Insert(node)) walk.push_back(node);   // the first time only
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace graphdump {

class PointerSet {
 public:
  // Empties the set, sized for about `expected` addresses.
  void Clear(size_t expected) {
    size_t capacity = kMinSlots;
    while (capacity < 2 * expected) capacity *= 2;
    if (slots_.size() < capacity) slots_.resize(capacity);
    if (size_ > 0) std::fill(slots_.begin(), slots_.end(), nullptr);
    size_ = 0;
  }

  // Adds `p` (not null); false when it was there already.
  bool Insert(const void* p) {
    if (2 * (size_ + 1) > slots_.size()) Grow();
    const size_t mask = slots_.size() - 1;
    for (size_t i = SlotOf(p, mask);; i = (i + 1) & mask) {
      if (slots_[i] == p) return false;
      if (slots_[i] == nullptr) {
        slots_[i] = p;
        ++size_;
        return true;
      }
    }
  }

  size_t size() const { return size_; }

 private:
  static constexpr size_t kMinSlots = 64;  // a power of two, as every size is

  // Heap objects' addresses share their low bits: a multiplicative hash spreads the rest.
  static size_t SlotOf(const void* p, size_t mask) {
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(p) >> 4) * 0x9E3779B97F4A7C15ull >>
                               20) &
           mask;
  }

  // At most half the slots are used: past that, the addresses move into twice as many.
  void Grow() {
    std::vector<const void*> old(std::max(kMinSlots, 2 * slots_.size()), nullptr);
    old.swap(slots_);
    size_ = 0;
    for (const void* p : old) {
      if (p != nullptr) Insert(p);
    }
  }

  std::vector<const void*> slots_;  // open addressing, linear probing; null: free
  size_t size_ = 0;
};

}  // namespace graphdump
