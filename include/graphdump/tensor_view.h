// A non-owning view of a tensor that a host hands to the dump session.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "graphdump/dims.h"
#include "graphdump/dtype.h"
#include "graphdump/handle.h"

namespace graphdump {

// Where a view's bytes come from, for hosts that know when their tensors change (LibTorch does,
// with each storage's version counter). The session uses it to reuse the statistics of bytes it
// has already read in the step: a kernel's output read again as the next kernel's input, a
// weight read by several kernels, the copy of an input taken before an in-place kernel.
struct TensorOrigin {
  // Identifies the allocation holding the bytes by its address (`storage.get()`); holding the
  // pointer keeps that address from being given to another allocation (LibTorch: a weak
  // reference to the StorageImpl). Null: unknown, and nothing is reused.
  Handle storage;
  // Must change whenever the allocation's bytes may have changed.
  uint64_t version = 0;
  // Byte offset of the view's first element in the allocation. A copy of a view may claim its
  // original's origin when it has the same dtype, shape and strides (the same bytes).
  int64_t offset = 0;
  // False where `version` says nothing of the bytes (written behind the version counter): the
  // origin still names the allocation whose writes wait for a queued read
  // (DumpSession::BeforeWrite), but its bytes are never found again.
  bool versioned = true;
};

struct TensorView {
  DType dtype = DType::kFloat32;
  Dims shape;    // empty for a scalar
  Dims strides;  // in elements, one per dimension; empty means C-contiguous
  const void* data = nullptr;    // host memory; may be null when NumElements() == 0
  std::string device = "cpu";    // where the data lives; the core only reads "cpu" data
  // Keeps the storage behind `data` alive until the session no longer needs it (the host puts
  // its tensor handle here). May be null when the host guarantees the lifetime itself.
  Handle keep_alive;
  TensorOrigin origin;  // optional
  // The kernel's input or output index, when it is not the view's position in the list given to
  // the session: a host that has no tensor for some slots (autograd's undefined gradients)
  // leaves them out and numbers the rest. -1: the position.
  int32_t slot = -1;

  int64_t NumElements() const;
  // True when the elements lie in C order without gaps (always true for int4, which must be
  // contiguous).
  bool IsContiguous() const;
  // Bytes the elements occupy when stored contiguously in memory layout (int4 packed).
  size_t ContiguousBytes() const;
};

// Copies `view` into C order at `out`, which has room for view.ContiguousBytes() (the
// asynchronous writer's copies). Non-contiguous views are gathered element by element.
// REQUIRES: view.data is host memory; int4 views are contiguous.
void CopyContiguousTo(const TensorView& view, uint8_t* out);

// Calls `visit(const uint8_t* bytes, size_t n)` with the tensor's bytes in C order, in pieces of
// at most `chunk_bytes` (a contiguous tensor is passed through without copying). Pieces always
// end on element boundaries.
// REQUIRES: view.data is host memory; int4 views are contiguous.
template <typename Visit>
void ForEachContiguousChunk(const TensorView& view, size_t chunk_bytes, Visit&& visit);

std::string ShapeToString(std::span<const int64_t> shape);  // "(2,3)", "()" for a scalar
// Appends ShapeToString's text to `out`.
void AppendShape(std::span<const int64_t> shape, std::string* out);

}  // namespace graphdump

#include "graphdump/internal/tensor_view_impl.h"
