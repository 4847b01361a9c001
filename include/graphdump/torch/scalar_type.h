// The LibTorch scalar type that holds a graphdump DType's elements (the inverse of the executor's
// mapping of tensors to DTypes), for code that builds tensors from dumped or .npy bytes.
#pragma once

#include <c10/core/ScalarType.h>

#include <optional>

#include "graphdump/dtype.h"

namespace graphdump {

// at::kBFloat16 for DType::kBFloat16 and so on; nullopt for a DType LibTorch has no type for
// (unsigned integers wider than 8 bits, strings).
inline std::optional<at::ScalarType> ToScalarType(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return at::kBool;
    case DType::kInt8:
      return at::kChar;
    case DType::kInt16:
      return at::kShort;
    case DType::kInt32:
      return at::kInt;
    case DType::kInt64:
      return at::kLong;
    case DType::kUInt8:
      return at::kByte;
    case DType::kFloat16:
      return at::kHalf;
    case DType::kBFloat16:
      return at::kBFloat16;
    case DType::kFloat32:
      return at::kFloat;
    case DType::kFloat64:
      return at::kDouble;
    case DType::kComplex64:
      return at::kComplexFloat;
    case DType::kComplex128:
      return at::kComplexDouble;
    default:
      return std::nullopt;
  }
}

}  // namespace graphdump
