// Converts LibTorch tensors into the TensorViews the dump session reads.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <vector>

#include "graphdump/graph.h"
#include "graphdump/tensor_view.h"
#include "torch_compat.h"

namespace graphdump::torch_internal {

// A view of `tensor` that keeps it alive. With `logical_layout` (trans_flag true) the view has
// the tensor's logical shape and strides, so the session writes it in logical (NCHW) order.
// Without it, the dimensions are reordered by decreasing stride: the file then holds the
// elements in the order they are stored (a channels-last NCHW tensor becomes NHWC). Tensors
// off the CPU are copied to it first. Returns false for undefined, sparse, quantized or
// unsupported-dtype tensors.
inline bool MakeView(const at::Tensor& tensor, bool logical_layout, TensorView* view) {
  if (!tensor.defined() || tensor.layout() != at::kStrided || tensor.is_quantized()) return false;
  auto dtype = torch_compat::ToDType(tensor.scalar_type());
  if (!dtype) return false;
  at::Tensor host = tensor.device().is_cpu() ? tensor : tensor.to(at::kCPU);
  if (host.is_conj()) host = host.resolve_conj();
  if (host.is_neg()) host = host.resolve_neg();
  std::vector<int64_t> shape(host.sizes().begin(), host.sizes().end());
  std::vector<int64_t> strides(host.strides().begin(), host.strides().end());
  if (!logical_layout && shape.size() > 1) {
    std::vector<size_t> order(shape.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return strides[a] > strides[b]; });
    std::vector<int64_t> s2, st2;
    for (size_t d : order) {
      s2.push_back(shape[d]);
      st2.push_back(strides[d]);
    }
    shape = std::move(s2);
    strides = std::move(st2);
  }
  view->dtype = *dtype;
  view->shape = std::move(shape);
  view->strides = std::move(strides);
  view->data = host.data_ptr();
  view->device = tensor.device().str();
  view->keep_alive = std::make_shared<at::Tensor>(std::move(host));
  return true;
}

// Appends views of every tensor in `value` (a tensor, or a list/tuple of tensors).
inline void AppendViews(const c10::IValue& value, bool logical_layout,
                        std::vector<TensorView>* views) {
  if (value.isTensor()) {
    TensorView view;
    if (MakeView(value.toTensor(), logical_layout, &view)) views->push_back(std::move(view));
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorVector()) {
      TensorView view;
      if (MakeView(t, logical_layout, &view)) views->push_back(std::move(view));
    }
  } else if (value.isTuple()) {
    for (const auto& e : value.toTupleRef().elements()) AppendViews(e, logical_layout, views);
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
