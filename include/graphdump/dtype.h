// The element types graphdump can dump, and how each is named and stored.
//
// Names are MindSpore's lower-case dtype names as they appear in dump file names and in
// statistic.csv (`float32`, `bfloat16`, `int64`, `bool`). Two types are not stored in .npy as they
// are in memory (docs/file-format.md): bfloat16 is written as float32 values and packed int4 (two
// values per byte, low nibble first) as int8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace graphdump {

enum class DType : uint8_t {
  kBool,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kComplex64,
  kComplex128,
  kInt4,  // packed: two signed 4-bit values per byte, low nibble first
};

inline constexpr DType kAllDTypes[] = {
    DType::kBool,    DType::kInt8,     DType::kInt16,    DType::kInt32,     DType::kInt64,
    DType::kUInt8,   DType::kUInt16,   DType::kUInt32,   DType::kUInt64,    DType::kFloat16,
    DType::kBFloat16, DType::kFloat32, DType::kFloat64,  DType::kComplex64, DType::kComplex128,
    DType::kInt4};

// Lower-case name used in file names and statistic.csv: "float32", "bfloat16", "int4".
std::string_view DTypeName(DType dtype);

// Parses a dtype name. Accepts graphdump's lower-case names and MindSpore's CPU spellings
// (`Float32`, `Int64`, `Bool`, `BFloat16`, `UInt8`...). Returns nullopt for anything else.
std::optional<DType> DTypeFromName(std::string_view name);

// Bits one element occupies in memory: 4 for int4, 8 * bytes otherwise.
size_t DTypeBits(DType dtype);

// Bytes `count` elements occupy in memory (int4 rounds up to whole bytes).
size_t DTypeStorageBytes(DType dtype, int64_t count);

// The dtype the .npy file holds: float32 for bfloat16, int8 for int4, the dtype itself otherwise.
DType NpyStoredDType(DType dtype);

// The .npy `descr` of NpyStoredDType(dtype): "<f4", "|b1", "<c16"...
std::string_view NpyDescr(DType dtype);

// Parses a .npy descr (`<f4`, `|u1`, `<c16`...). Big-endian or unknown descrs give nullopt.
std::optional<DType> DTypeFromNpyDescr(std::string_view descr);

bool IsFloatingPoint(DType dtype);  // float16, bfloat16, float32, float64
bool IsComplex(DType dtype);

}  // namespace graphdump
