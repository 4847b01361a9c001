// Maps and sets keyed by addresses that keep their memory when cleared. Work done once per
// operator or per autograd node (which kernel produced a tensor; the nodes a backward pass has
// reached) allocated a hash node per entry in std::unordered_map/set, which cost as much as the
// rest of that work. The addresses are only compared, never followed.
//
//   PointerMap<Producer> producers;
//   auto [producer, added] = producers.Emplace(tensor_impl);  // value-initialized when added
//   if (const Producer* p = producers.Find(tensor_impl)) ...
//   producers.EraseIf([](const void*, const Producer& p) { return p.dead(); });
//   producers.Clear();                                         // capacity kept
//
//   PointerSet seen;
//   seen.Clear(/*expected=*/last_size);
//   if (seen.Insert(node)) walk.push_back(node);                // the first time only
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace graphdump {

template <typename Value>
class PointerMap {
 public:
  // Empties the map (every value back to Value{}), sized for about `expected` entries.
  void Clear(size_t expected = 0) {
    size_t capacity = kMinSlots;
    while (capacity < 2 * expected) capacity *= 2;
    if (slots_.size() < capacity) slots_.resize(capacity);
    if (size_ > 0) {
      for (Slot& slot : slots_) {
        if (slot.key != nullptr) slot = Slot{};
      }
    }
    size_ = 0;
  }

  // The value of `key` (not null), value-initialized and `true` when it was not there. The
  // pointer is valid until the next Emplace, EraseIf or Clear.
  std::pair<Value*, bool> Emplace(const void* key) {
    if (2 * (size_ + 1) > slots_.size()) Grow();
    const size_t mask = slots_.size() - 1;
    for (size_t i = SlotOf(key, mask);; i = (i + 1) & mask) {
      Slot& slot = slots_[i];
      if (slot.key == key) return {&slot.value, false};
      if (slot.key == nullptr) {
        slot.key = key;
        ++size_;
        return {&slot.value, true};
      }
    }
  }

  // The value of `key`, or null.
  Value* Find(const void* key) {
    if (size_ == 0) return nullptr;
    const size_t mask = slots_.size() - 1;
    for (size_t i = SlotOf(key, mask);; i = (i + 1) & mask) {
      Slot& slot = slots_[i];
      if (slot.key == key) return &slot.value;
      if (slot.key == nullptr) return nullptr;
    }
  }

  // Removes the entries for which drop(key, value) is true.
  template <typename Drop>
  void EraseIf(Drop drop) {
    Rehash(slots_.size(), drop);
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    const void* key = nullptr;  // null: free
    [[no_unique_address]] Value value{};
  };
  static constexpr size_t kMinSlots = 64;  // a power of two, as every size is

  // Heap objects' addresses share their low bits: a multiplicative hash spreads the rest.
  static size_t SlotOf(const void* p, size_t mask) {
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(p) >> 4) * 0x9E3779B97F4A7C15ull >>
                               20) &
           mask;
  }

  // At most half the slots are used: past that, the entries move into twice as many.
  void Grow() {
    Rehash(std::max(kMinSlots, 2 * slots_.size()), [](const void*, const Value&) { return false; });
  }

  // The entries drop() keeps, moved into `capacity` empty slots (linear probing has no holes
  // to leave: every removal rebuilds). The old slots are kept, emptied, for the next rebuild:
  // pruning a large map often allocates nothing.
  template <typename Drop>
  void Rehash(size_t capacity, Drop drop) {
    spare_.resize(capacity);
    spare_.swap(slots_);
    size_ = 0;
    for (Slot& slot : spare_) {
      if (slot.key == nullptr) continue;
      if (!drop(slot.key, slot.value)) *Emplace(slot.key).first = std::move(slot.value);
      slot = Slot{};
    }
  }

  std::vector<Slot> slots_;  // open addressing, linear probing
  std::vector<Slot> spare_;  // every slot empty
  size_t size_ = 0;
};

class PointerSet {
 public:
  // Empties the set, sized for about `expected` addresses.
  void Clear(size_t expected) { map_.Clear(expected); }
  // Adds `p` (not null); false when it was there already.
  bool Insert(const void* p) { return map_.Emplace(p).second; }
  size_t size() const { return map_.size(); }

 private:
  struct Nothing {};
  PointerMap<Nothing> map_;
};

}  // namespace graphdump
