// The statistics a session has already computed, found again by where the bytes come from
// (TensorView::origin). A statistic dump of every kernel reads most tensors two or three times
// otherwise: as a kernel's output, as the next kernel's input, as a parameter. Entries may be
// kept into the next step (SessionOptions::stats_across_steps): a parameter updated by the
// optimizer is then not read again as the next step's parameter and forward input.
// Used on the executor thread only; the statistics of an entry may be filled later, on the thread
// that reduces them (StatsCell).
#pragma once

#include <atomic>
#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "graphdump/internal/bytes_key.h"
#include "graphdump/stats.h"
#include "graphdump/tensor_view.h"

namespace graphdump {

// The statistics of one tensor's bytes, recorded in the cache when their reduction is queued and
// filled when it has run (SessionOptions::reads_in_background), or recorded filled. A queued
// reduction is run by the thread that takes it first: the worker in its turn, or the host's
// thread about to write the bytes (SessionImpl::BeforeWrite), which then need not wait for the
// reductions queued before it.
struct StatsCell {
  enum State : uint32_t { kQueued, kTaken, kReady, kFailed };

  // True for the one thread that is to reduce the bytes (kQueued -> kTaken).
  bool Take() {
    uint32_t queued = kQueued;
    return state.compare_exchange_strong(queued, kTaken, std::memory_order_acquire);
  }
  // Ends a taken reduction, `stats` filled (kReady) or not (kFailed: the dump has stopped).
  void Finish(bool filled) {
    state.store(filled ? kReady : kFailed, std::memory_order_release);
    state.notify_all();
  }
  // Returns once no other thread is reducing the bytes; then: are `stats` filled?
  bool WaitReady() const {
    state.wait(kTaken, std::memory_order_acquire);
    return ready();
  }
  bool ready() const { return state.load(std::memory_order_acquire) == kReady; }

  NanPropagatingStats stats;
  std::atomic<uint32_t> state{kQueued};
};

class StatsCache {
  struct Key {
    BytesKey bytes;
    StatsRequest request;  // whole: a request that computes more or less is another entry
    bool operator==(const Key&) const = default;
  };

 public:
  // One tensor's key, made once: a statistic row looks its tensor up and, when it was not
  // found, records it after reducing it. Holds `view` by reference: use it while `view` lives.
  class Probe {
   public:
    Probe(const TensorView& view, const StatsRequest& request);

   private:
    friend class StatsCache;
    const TensorView& view_;
    std::optional<Key> key_;  // none where Find never matches
  };

  // The statistics recorded for the same bytes (same origin, version, offset, dtype, shape and
  // strides) and the same request, or null. Views without an origin, and md5 requests (the
  // md5 depends on the order the bytes are visited in), never match.
  const NanPropagatingStats* Find(const TensorView& view, const StatsRequest& request);
  // Records `stats` for `view`; ignored where Find would never match.
  void Insert(const TensorView& view, const StatsRequest& request,
              const NanPropagatingStats& stats);
  // The same, for the key a Probe made (Insert takes it over); Insert says whether it recorded
  // (not where Find never matches, nor in a full cache).
  const NanPropagatingStats* Find(const Probe& probe);
  bool Insert(Probe&& probe, const NanPropagatingStats& stats);
  // The cell recorded for the probe's bytes, filled or still to be filled, or null.
  std::shared_ptr<StatsCell> FindCell(const Probe& probe);
  // Records `cell`, whose statistics may still be filled later; whether it recorded, as Insert.
  bool InsertCell(Probe&& probe, std::shared_ptr<StatsCell> cell);
  // FindCell, and where it finds none, InsertCell of a new cell, in one lookup. Sets `*added`
  // when the cell returned is new (its statistics are to be filled); returns null where
  // nothing may be recorded (no key, or a full cache).
  std::shared_ptr<StatsCell> FindOrAddCell(Probe&& probe, bool* added);
  // At a step's end: forgets everything, or with `keep`, the entries neither found nor
  // recorded during the step (what is still in use stays; a finished step's activations go).
  void EndStep(bool keep);
  void Clear();  // forgets everything
  // Forgets the entries of the allocation `storage` (TensorOrigin::storage.get()): its bytes
  // changed without its version changing.
  void Forget(const void* storage);
  // The same for each allocation in `storages`, in one pass.
  void Forget(const std::unordered_set<const void*>& storages);
  size_t size() const { return entries_.size(); }

 private:
  // Hashed, not ordered: a step's thousand entries are found without comparing shapes and
  // strides along a tree's path.
  struct KeyHash {
    size_t operator()(const Key& key) const;
  };
  struct Entry {
    std::shared_ptr<StatsCell> cell;
    Handle storage;  // pins the identity of Key::storage
    bool used = true;                     // found or recorded in the current step
  };
  using Entries = std::unordered_map<Key, Entry, KeyHash>;
  Entry* FindEntry(const Probe& probe);  // marks it used
  // The key of `view` and `request`, or nothing where Find never matches.
  static std::optional<Key> KeyOf(const TensorView& view, const StatsRequest& request);
  // The entry of `key`, added (empty) where there was none: try_emplace, in a node kept from
  // an entry dropped before when there is one.
  std::pair<Entries::iterator, bool> Emplace(Key&& key);
  // Removes the entry at `it`, keeping its node (and its cell, when nothing else holds it) for
  // a later entry; returns the entry after it.
  Entries::iterator Drop(Entries::iterator it);
  // Drops every entry for which `drop(key, entry)` holds.
  template <typename Pred>
  void DropIf(Pred drop);
  // A cell still to be filled: one kept from a dropped entry, or a new one.
  std::shared_ptr<StatsCell> NewCell();

  Entries entries_;
  // What dropped entries leave for the next ones: a step adds and drops about a thousand
  // entries, which then cost no allocation.
  std::vector<Entries::node_type> spare_nodes_;
  std::vector<std::shared_ptr<StatsCell>> spare_cells_;
};

}  // namespace graphdump
