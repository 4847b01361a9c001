#include "graphdump/tensor_view.h"

#include <cstring>
#include <string>

namespace graphdump {

int64_t TensorView::NumElements() const {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  return count;
}

bool TensorView::IsContiguous() const {
  if (strides.empty() || dtype == DType::kInt4) return true;
  if (strides.size() != shape.size()) return false;
  if (NumElements() == 0) return true;
  int64_t expected = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    // A dimension of size 1 is never stepped over, so its stride does not matter.
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

size_t TensorView::ContiguousBytes() const { return DTypeStorageBytes(dtype, NumElements()); }

void CopyContiguousTo(const TensorView& view, uint8_t* out) {
  ForEachContiguousChunk(view, size_t{1} << 20, [&](const uint8_t* bytes, size_t n) {
    std::memcpy(out, bytes, n);
    out += n;
  });
}

std::string ShapeToString(const std::vector<int64_t>& shape) {
  // MindSpore joins the dimensions with ',' and no trailing comma: "(5)" for 1-D, not "(5,)".
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ',';
    text += std::to_string(shape[i]);
  }
  text += ')';
  return text;
}

}  // namespace graphdump
