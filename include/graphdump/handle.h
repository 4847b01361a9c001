// A counted reference to an object of the host that the core holds without knowing its type:
// a tensor kept alive while the session reads it, an allocation whose address must stay its
// own. Objects that count their own references (LibTorch's TensorImpl and StorageImpl) are held
// without an allocation: a statistic dump makes two of these for every tensor of every kernel.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <utility>

namespace graphdump {

class Handle {
 public:
  // How to take and drop one reference through `ref`. `retain` returns the reference the copy
  // holds (`ref` itself for objects that count their own references).
  struct Ops {
    void* (*retain)(void* ref);
    void (*release)(void* ref);
  };

  Handle() = default;
  Handle(std::nullptr_t) {}  // NOLINT(google-explicit-constructor)
  // Adopts a reference already taken to `object` through `ref`; `ops` outlives every handle
  // (a static). `object` is what get() returns: the identity the session compares.
  Handle(const void* object, void* ref, const Ops* ops) : object_(object), ref_(ref), ops_(ops) {}
  // Holds a copy of `p` (one allocation): for hosts and tests whose objects are shared_ptrs.
  // A null `p` makes an empty handle.
  template <typename T>
  Handle(std::shared_ptr<T> p) : ops_(&kSharedOps) {  // NOLINT(google-explicit-constructor)
    if (p.get() == nullptr) return;
    object_ = p.get();
    ref_ = new Shared{{1}, std::move(p)};
  }
  Handle(const Handle& other)
      : object_(other.object_), ref_(other.ref_ ? other.ops_->retain(other.ref_) : nullptr),
        ops_(other.ops_) {}
  Handle(Handle&& other) noexcept
      : object_(std::exchange(other.object_, nullptr)), ref_(std::exchange(other.ref_, nullptr)),
        ops_(other.ops_) {}
  Handle& operator=(Handle other) noexcept {
    std::swap(object_, other.object_);
    std::swap(ref_, other.ref_);
    std::swap(ops_, other.ops_);
    return *this;
  }
  ~Handle() {
    if (ref_) ops_->release(ref_);
  }

  const void* get() const { return object_; }
  explicit operator bool() const { return object_ != nullptr; }
  friend bool operator==(const Handle& h, std::nullptr_t) { return h.object_ == nullptr; }
  friend bool operator==(const Handle& a, const Handle& b) { return a.object_ == b.object_; }

 private:
  struct Shared {
    std::atomic<size_t> count;
    std::shared_ptr<const void> p;
  };
  static void* RetainShared(void* ref) {
    static_cast<Shared*>(ref)->count.fetch_add(1, std::memory_order_relaxed);
    return ref;
  }
  static void ReleaseShared(void* ref) {
    auto* shared = static_cast<Shared*>(ref);
    if (shared->count.fetch_sub(1, std::memory_order_acq_rel) == 1) delete shared;
  }
  static constexpr Ops kSharedOps{&RetainShared, &ReleaseShared};

  const void* object_ = nullptr;
  void* ref_ = nullptr;  // null exactly when object_ is
  const Ops* ops_ = nullptr;
};

}  // namespace graphdump
