// Converts LibTorch tensors into the TensorViews the dump session reads.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "graphdump/graph.h"
#include "graphdump/session.h"
#include "graphdump/tensor_view.h"
#include "torch_compat.h"

namespace graphdump::torch_internal {

// `tensor` without autograd history: itself when it has none to drop (a gradient of a plain
// backward pass, an optimizer's state), else a detached alias. Undefined stays undefined.
inline at::Tensor Detached(const at::Tensor& tensor) {
  return tensor.defined() && tensor.requires_grad() ? tensor.detach() : tensor;
}

// Handles (graphdump/handle.h) counted by LibTorch's own reference counts: a TensorImpl held
// strongly, a StorageImpl strongly (its bytes stay) or weakly (its address stays its own; its
// bytes may be freed). `Null` is the intrusive_ptr's null type.
template <typename T, typename Null = c10::detail::intrusive_target_default_null_type<T>>
struct LibTorchRefs {
  static void* Retain(void* impl) {
    c10::raw::intrusive_ptr::incref(static_cast<T*>(impl));
    return impl;
  }
  static void Release(void* impl) {
    c10::intrusive_ptr<T, Null>::reclaim(static_cast<T*>(impl));
  }
  static void* RetainWeakly(void* impl) {
    c10::raw::weak_intrusive_ptr::incref(static_cast<T*>(impl));
    return impl;
  }
  static void ReleaseWeakly(void* impl) {
    c10::weak_intrusive_ptr<T, Null>::reclaim(static_cast<T*>(impl));
  }
};
using TensorRefs = LibTorchRefs<c10::TensorImpl, c10::UndefinedTensorImpl>;
using StorageRefs = LibTorchRefs<c10::StorageImpl>;
inline constexpr Handle::Ops kTensorRefs{&TensorRefs::Retain, &TensorRefs::Release};
inline constexpr Handle::Ops kStorageRefs{&StorageRefs::Retain, &StorageRefs::Release};
inline constexpr Handle::Ops kStorageWeakRefs{&StorageRefs::RetainWeakly,
                                              &StorageRefs::ReleaseWeakly};

// A handle that keeps the bytes of `tensor`, defined, alive: its storage, or the tensor itself
// when it has none. Not the tensor: a reference to it would count as one more user, and
// autograd's AccumulateGrad copies a gradient someone else still holds into .grad instead of
// taking it over (a copy of every gradient, each step, while statistics wait to be read).
// Sharing the storage is safe: a write to it goes through an operator that reads the queued
// bytes first (DumpSession::BeforeWrite), and so does a resize of it from Python
// (DumpHost::BeforeStorageChange).
inline Handle KeepAlive(at::Tensor tensor) {
  if (tensor.has_storage()) {
    c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
    return Handle(storage, StorageRefs::Retain(storage), &kStorageRefs);
  }
  c10::TensorImpl* impl = tensor.unsafeReleaseTensorImpl();
  return Handle(impl, impl, &kTensorRefs);
}

// Where the bytes of `tensor` come from (TensorOrigin): its storage, pinned by a weak reference,
// its version counter, and its offset. Empty for tensors without a version counter (inference
// tensors, and anything under InferenceMode, where in-place writes may not be counted): their
// statistics are never reused. Writes that bypass the counter (through .data, or by a library
// handed the raw pointer, like a collective) must be followed by TensorImpl::bump_version().
inline TensorOrigin OriginOf(const at::Tensor& tensor) {
  TensorOrigin origin;
  if (c10::InferenceMode::is_enabled() || tensor.is_inference() || !tensor.has_storage()) {
    return origin;
  }
  const c10::Storage& storage = tensor.storage();
  if (storage.data() == nullptr) return origin;
  c10::StorageImpl* impl = storage.getWeakStorageImpl().release();
  origin.storage = Handle(impl, impl, &kStorageWeakRefs);
  origin.version = tensor.unsafeGetTensorImpl()->version_counter().current_version();
  origin.offset =
      static_cast<const char*>(tensor.data_ptr()) - static_cast<const char*>(storage.data());
  return origin;
}

// A view of `tensor` that keeps it alive. With `logical_layout` (trans_flag true) the view has
// the tensor's logical shape and strides, so the session writes it in logical (NCHW) order.
// Without it, the dimensions are reordered by decreasing stride: the file then holds the
// elements in the order they are stored (a channels-last NCHW tensor becomes NHWC). Tensors
// off the CPU are copied to it first. Returns false for undefined, sparse, quantized or
// unsupported-dtype tensors, and for those without storage (torch.vmap's batched tensors).
inline bool MakeView(const at::Tensor& tensor, bool logical_layout, TensorView* view) {
  if (!tensor.defined() || tensor.layout() != at::kStrided || tensor.is_quantized() ||
      !tensor.has_storage()) {
    return false;
  }
  auto dtype = torch_compat::ToDType(tensor.scalar_type());
  if (!dtype) return false;
  at::Tensor host = tensor.device().is_cpu() ? tensor : tensor.to(at::kCPU);
  if (host.is_conj()) host = host.resolve_conj();
  if (host.is_neg()) host = host.resolve_neg();
  const c10::IntArrayRef sizes = host.sizes(), strides = host.strides();
  view->dtype = *dtype;
  view->shape.assign(sizes.begin(), sizes.end());
  view->strides.assign(strides.begin(), strides.end());
  if (!logical_layout && sizes.size() > 1) {
    std::vector<size_t> order(sizes.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return strides[a] > strides[b]; });
    for (size_t d = 0; d < order.size(); ++d) {
      view->shape[d] = sizes[order[d]];
      view->strides[d] = strides[order[d]];
    }
  }
  view->data = host.data_ptr();
  // "cpu" without formatting the device (every tensor of every dumped kernel comes here).
  const c10::Device device = tensor.device();
  view->device = device.is_cpu() && !device.has_index() ? std::string("cpu") : device.str();
  // A copy made here to reach the CPU has no origin of its own worth remembering.
  if (host.is_same(tensor)) view->origin = OriginOf(tensor);
  view->keep_alive = KeepAlive(std::move(host));
  return true;
}

// A view of `copy`, a clone of `original` taken before something writes `original` in place,
// that claims `original_origin` (OriginOf(original) when the copy was taken) when the two have
// the same layout: the statistics the session computed for the original's bytes then stand for
// the copy's, and are not computed again.
inline bool MakeViewOfCopy(const at::Tensor& copy, const at::Tensor& original,
                           TensorOrigin original_origin, bool logical_layout, TensorView* view) {
  if (!MakeView(copy, logical_layout, view)) return false;
  const bool same_layout = copy.sizes() == original.sizes() &&
                           copy.strides() == original.strides() &&
                           copy.scalar_type() == original.scalar_type();
  view->origin = same_layout ? std::move(original_origin) : TensorOrigin{};
  return true;
}

// `view`, MakeView's of `original` with the origin OnKernelDone will get it with, is kept as it
// is when `kernel`, about to write `original` in place, will not read the bytes
// (DumpSession::ReadsInput; a statistic dump whose statistics of these bytes are known), when
// the session has read them now (ReadInputNow: a statistic dump's statistics, a tensor dump's
// file) or when it is a copy already (a device tensor); else it becomes a view of a copy taken
// now that claims that origin. `view->slot` is the input's slot.
inline void KeepBeforeWrite(DumpSession& session, const KernelInfo& kernel,
                            const at::Tensor& original, bool logical_layout, TensorView* view) {
  if (!original.device().is_cpu() || !session.ReadsInput(kernel, *view) ||
      session.ReadInputNow(kernel, *view)) {
    return;
  }
  const int32_t slot = view->slot;
  TensorOrigin origin = view->origin;
  MakeViewOfCopy(original.clone(), original, std::move(origin), logical_layout, view);
  view->slot = slot;
}

// A view of `original`, the kernel's input in `slot`, as it is now, for `kernel`, which is
// about to write it in place (KeepBeforeWrite).
inline bool MakeViewBeforeWrite(DumpSession& session, const KernelInfo& kernel,
                                const at::Tensor& original, int32_t slot, bool logical_layout,
                                TensorView* view) {
  if (!MakeView(original, logical_layout, view)) return false;
  view->slot = slot;
  KeepBeforeWrite(session, kernel, original, logical_layout, view);
  return true;
}

// Is `tensor` one of torch.vmap's batched tensors? It has no storage: its values are the batch
// its operator computes on, nested inside it.
inline bool BatchedByVmap(const at::Tensor& tensor) {
  return !tensor.has_storage() && tensor.key_set().has(c10::DispatchKey::FuncTorchBatched);
}

// Why `tensor`, defined, has no view (MakeView refuses it), or "" when it has one.
inline std::string NotViewable(const at::Tensor& tensor) {
  if (tensor.layout() != at::kStrided) {
    std::ostringstream layout;
    layout << tensor.layout();
    return (tensor.is_sparse() || tensor.is_sparse_csr() ? "a sparse tensor (layout "
                                                         : "a tensor of another layout (") +
           layout.str() + ")";
  }
  if (tensor.is_quantized()) return "a quantized tensor";
  if (!tensor.has_storage()) {
    // Its values live in another tensor (torch.vmap's batched tensors) or nowhere (fake and
    // functionalized tensors); the operators it reaches run nested, on those.
    return BatchedByVmap(tensor) ? "a tensor batched by torch.vmap, with no storage of its own"
                                 : "a tensor without storage";
  }
  if (!torch_compat::ToDType(tensor.scalar_type())) {
    return std::string("of dtype ") + c10::toString(tensor.scalar_type()) +
           ", which has no .npy type";
  }
  return "";
}

// A kernel's inputs (or outputs) are numbered by their position among its tensors, each
// element of a tensor list counting as one: the slot. A tensor that cannot be dumped (sparse,
// quantized, a dtype without a .npy type) keeps its slot empty, so the others keep their
// numbers, and is listed with why (docs/file-format.md).
struct Slots {
  struct Skipped {
    uint32_t slot;
    std::string why;      // NotViewable's
    bool batched_by_vmap;  // BatchedByVmap's
  };
  int32_t next = 0;
  std::vector<Skipped> skipped;

  // Lists `tensor`, defined, which MakeView refused, as the one in `slot`.
  void Skip(int32_t slot, const at::Tensor& tensor) {
    skipped.push_back({static_cast<uint32_t>(slot), NotViewable(tensor), BatchedByVmap(tensor)});
  }
};

// Appends a view of `tensor` as the next slot; an undefined tensor leaves its slot empty, one
// that cannot be viewed too, listed in `slots->skipped`.
inline void AppendSlot(const at::Tensor& tensor, bool logical_layout,
                       std::vector<TensorView>* views, Slots* slots) {
  const int32_t slot = slots->next++;
  if (!tensor.defined()) return;
  TensorView view;
  if (!MakeView(tensor, logical_layout, &view)) return slots->Skip(slot, tensor);
  view.slot = slot;
  views->push_back(std::move(view));
}

// Tells the session of the tensors of `kernel` (its inputs, or outputs) that were not dumped.
// With `batched_said`, the tensors batched by torch.vmap are told once a run, the first with a
// note that the others are not (a library may build every step's attention masks under vmap).
inline void ReportSkipped(DumpSession& session, const KernelInfo& kernel, bool input,
                          const Slots& slots, bool* batched_said = nullptr) {
  for (const Slots::Skipped& s : slots.skipped) {
    if (s.why.empty()) continue;
    if (batched_said != nullptr && s.batched_by_vmap) {
      if (!std::exchange(*batched_said, true)) {
        session.OnTensorNotDumped(
            kernel, input, s.slot,
            s.why + " (nor are the others inside torch.vmap, not said again)");
      }
      continue;
    }
    session.OnTensorNotDumped(kernel, input, s.slot, s.why);
  }
}

// Calls `visit(const at::Tensor&)` for the tensor in `value`, or each tensor of a tensor list.
template <typename Visit>
void ForEachTensor(const c10::IValue& value, Visit&& visit) {
  if (value.isTensor()) {
    visit(value.toTensor());
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorVector()) visit(t);
  }
}

// DumpSession::BeforeWrite for the allocations of the tensors in `value`, about to be written.
inline void BeforeWrite(DumpSession& session, const c10::IValue& value) {
  ForEachTensor(value, [&](const at::Tensor& t) {
    if (t.defined() && t.has_storage()) session.BeforeWrite(t.storage().unsafeGetStorageImpl());
  });
}

// DumpSession::ForgetStatistics for the allocations of the tensors in `value`, written behind
// their version counters.
inline void ForgetStatistics(DumpSession& session, const c10::IValue& value) {
  ForEachTensor(value, [&](const at::Tensor& t) {
    if (t.defined() && t.has_storage())
      session.ForgetStatistics(t.storage().unsafeGetStorageImpl());
  });
}

// Appends views of every tensor in `value` (a tensor, or a list/tuple of tensors), each the
// next slot of `slots`.
inline void AppendViews(const c10::IValue& value, bool logical_layout,
                        std::vector<TensorView>* views, Slots* slots) {
  if (value.isTensor()) {
    AppendSlot(value.toTensor(), logical_layout, views, slots);
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorVector()) AppendSlot(t, logical_layout, views, slots);
  } else if (value.isTuple()) {
    for (const auto& e : value.toTupleRef().elements()) {
      AppendViews(e, logical_layout, views, slots);
    }
  }
}

// Appends views of a kernel's arguments `args` (its operator's stack: tensors, tensor lists and
// other values, which are skipped). An argument whose index is in `written` is one the kernel
// writes in place: it is viewed as it is now, before the write (MakeViewBeforeWrite), a tensor
// or each tensor of a tensor list (`Tensor(a!)[] self` of the _foreach_ operators, such as the
// _foreach_mul_ of clip_grad_norm_).
template <typename Args, typename Indices>
void AppendInputViews(DumpSession& session, const KernelInfo& kernel, const Args& args,
                      const Indices& written, bool logical_layout, std::vector<TensorView>* views,
                      Slots* slots) {
  views->reserve(views->size() + args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const bool writes = std::find(written.begin(), written.end(), i) != written.end();
    if (writes && (args[i].isTensor() || args[i].isTensorList())) {
      ForEachTensor(args[i], [&](const at::Tensor& t) {
        const int32_t slot = slots->next++;
        if (!t.defined()) return;
        TensorView view;
        if (MakeViewBeforeWrite(session, kernel, t, slot, logical_layout, &view)) {
          views->push_back(std::move(view));
        } else {
          slots->Skip(slot, t);
        }
      });
    } else {
      AppendViews(args[i], logical_layout, views, slots);
    }
  }
}

// Appends the dtype and shape of every tensor in `value`.
inline void AppendMetas(const c10::IValue& value, std::vector<TensorMeta>* metas) {
  auto add = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    auto dtype = torch_compat::ToDType(t.scalar_type());
    if (!dtype) return;
    metas->push_back({*dtype, std::vector<int64_t>(t.sizes().begin(), t.sizes().end())});
  };
  if (value.isTensor()) {
    add(value.toTensor());
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorVector()) add(t);
  }
}

}  // namespace graphdump::torch_internal
