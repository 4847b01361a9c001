#include "graphdump/dtype.h"

#include <array>

namespace graphdump {
namespace {

// One row per dtype, in the order of the DType enum.
struct DTypeInfo {
  DType dtype;
  std::string_view name;           // graphdump / MindSpore lower-case name
  std::string_view mindspore_cpu;  // MindSpore's TypeIdToString spelling (CPU file names)
  size_t bits;
  std::string_view npy_descr;  // descr of the stored dtype
};

constexpr std::array<DTypeInfo, 16> kDTypeTable = {{
    {DType::kBool, "bool", "Bool", 8, "|b1"},
    {DType::kInt8, "int8", "Int8", 8, "|i1"},
    {DType::kInt16, "int16", "Int16", 16, "<i2"},
    {DType::kInt32, "int32", "Int32", 32, "<i4"},
    {DType::kInt64, "int64", "Int64", 64, "<i8"},
    {DType::kUInt8, "uint8", "UInt8", 8, "|u1"},
    {DType::kUInt16, "uint16", "UInt16", 16, "<u2"},
    {DType::kUInt32, "uint32", "UInt32", 32, "<u4"},
    {DType::kUInt64, "uint64", "UInt64", 64, "<u8"},
    {DType::kFloat16, "float16", "Float16", 16, "<f2"},
    {DType::kBFloat16, "bfloat16", "BFloat16", 16, "<f4"},  // stored as float32
    {DType::kFloat32, "float32", "Float32", 32, "<f4"},
    {DType::kFloat64, "float64", "Float64", 64, "<f8"},
    {DType::kComplex64, "complex64", "Complex64", 64, "<c8"},
    {DType::kComplex128, "complex128", "Complex128", 128, "<c16"},
    {DType::kInt4, "int4", "Int4", 4, "|i1"},  // stored as int8
}};

const DTypeInfo& Info(DType dtype) { return kDTypeTable[static_cast<size_t>(dtype)]; }

}  // namespace

std::string_view DTypeName(DType dtype) { return Info(dtype).name; }

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const DTypeInfo& info : kDTypeTable) {
    if (name == info.name || name == info.mindspore_cpu) return info.dtype;
  }
  return std::nullopt;
}

size_t DTypeBits(DType dtype) { return Info(dtype).bits; }

size_t DTypeStorageBytes(DType dtype, int64_t count) {
  if (count <= 0) return 0;
  return (static_cast<size_t>(count) * DTypeBits(dtype) + 7) / 8;
}

DType NpyStoredDType(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16:
      return DType::kFloat32;
    case DType::kInt4:
      return DType::kInt8;
    default:
      return dtype;
  }
}

std::string_view NpyDescr(DType dtype) { return Info(dtype).npy_descr; }

std::optional<DType> DTypeFromNpyDescr(std::string_view descr) {
  if (descr.size() < 3) return std::nullopt;
  // Single-byte types carry no byte order; NumPy writes '|' but accepts '<', '>' and '='.
  const char order = descr[0];
  const std::string_view kind = descr.substr(1);
  if (kind == "b1" || kind == "i1" || kind == "u1") {
    if (order != '|' && order != '<' && order != '>' && order != '=') return std::nullopt;
    if (kind == "b1") return DType::kBool;
    return kind == "i1" ? DType::kInt8 : DType::kUInt8;
  }
  if (order != '<') return std::nullopt;  // big-endian, native or not-applicable: unsupported
  // Some MindSpore versions write raw bfloat16 with the ml_dtypes descr "<E2" (NumPy itself
  // cannot load it); reading it back as bfloat16 lets the analysis tools use such dumps.
  if (kind == "E2") return DType::kBFloat16;
  for (const DTypeInfo& info : kDTypeTable) {
    if (info.dtype == DType::kBFloat16 || info.dtype == DType::kInt4) continue;
    if (info.npy_descr == descr) return info.dtype;
  }
  return std::nullopt;
}

bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat32 ||
         dtype == DType::kFloat64;
}

bool IsComplex(DType dtype) { return dtype == DType::kComplex64 || dtype == DType::kComplex128; }

}  // namespace graphdump
