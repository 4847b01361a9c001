// UnwrittenMemory: memory an operator allocated without writing it (`empty`, `empty_like`...:
// AllocatesUninitialized), until something writes it. A kernel that reads it, or returns a view
// of it, holds memory that is not data (docs/file-format.md, "Uninitialised memory"): the eager
// capture and the TorchScript executor list those slots in the graph files.
//
// Memory is known by its storage, so views of a buffer (`buf[0]`, `buf.view(-1)`) are known
// too, with the version of its version counter when it was allocated: views share the counter
// of their base, and every write through any of them advances it, so while the version is
// unchanged nothing wrote the memory. (A tensor without a version counter, an inference tensor,
// is never taken for unwritten memory.)
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace graphdump::torch_internal {

class UnwrittenMemory {
 public:
  bool empty() const { return entries_.empty(); }
  void Clear() { entries_.clear(); }

  // The tensors in `value` (a tensor, a list or tuple of them) are unwritten now.
  void Note(const c10::IValue& value) {
    ForEach(value, [&](const at::Tensor& t) {
      uint32_t version = 0;
      if (!t.defined() || !t.has_storage() || !VersionOf(t, &version)) return;
      const c10::Storage& storage = t.storage();
      entries_.insert_or_assign(storage.unsafeGetStorageImpl(),
                                Entry{storage.getWeakStorageImpl(), version});
    });
    // Entries of storage that was freed are dropped now and then.
    if (entries_.size() >= prune_at_) {
      std::erase_if(entries_, [](const auto& e) { return e.second.storage.expired(); });
      prune_at_ = std::max<size_t>(kMinPrune, 2 * entries_.size());
    }
  }

  // Does `t` hold memory noted and written by nothing since?
  bool Holds(const at::Tensor& t) const {
    if (entries_.empty() || !t.defined() || !t.has_storage()) return false;
    auto it = entries_.find(t.storage().unsafeGetStorageImpl());
    uint32_t version = 0;
    return it != entries_.end() && !it->second.storage.expired() && VersionOf(t, &version) &&
           it->second.version == version;
  }

  // The slots of `values` (a kernel's arguments or outputs, numbered as the dump numbers them:
  // each tensor, undefined or not, and each element of a tensor list or tuple is the next slot,
  // as AppendViews counts them) that hold unwritten memory.
  template <typename Values>
  std::vector<uint32_t> Slots(const Values& values) const {
    std::vector<uint32_t> slots;
    if (entries_.empty()) return slots;
    uint32_t slot = 0;
    for (const c10::IValue& v : values) {
      ForEach(v, [&](const at::Tensor& t) {
        if (Holds(t)) slots.push_back(slot);
        ++slot;
      });
    }
    return slots;
  }

 private:
  struct Entry {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    uint32_t version;
  };
  static constexpr size_t kMinPrune = 4096;

  // `t`'s version counter, which every write through `t` or a view of it advances; false for
  // an inference tensor, which has none.
  static bool VersionOf(const at::Tensor& t, uint32_t* version) {
    if (t.is_inference()) return false;
    *version = t.unsafeGetTensorImpl()->version_counter().current_version();
    return true;
  }

  template <typename Visit>
  static void ForEach(const c10::IValue& value, Visit&& visit) {
    if (value.isTensor()) {
      visit(value.toTensor());
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorVector()) visit(t);
    } else if (value.isTuple()) {
      for (const auto& e : value.toTupleRef().elements()) ForEach(e, visit);
    }
  }

  std::unordered_map<const c10::StorageImpl*, Entry> entries_;
  size_t prune_at_ = kMinPrune;
};

}  // namespace graphdump::torch_internal
