// NumPy .npy files (docs/file-format.md).
//
// Layout written:
//   bytes 0-5   "\x93NUMPY"
//   bytes 6-7   version: 1, 0 (2, 0 only when the header dict exceeds 65535 bytes)
//   bytes 8-9   header length, uint16 little-endian (uint32 for version 2.0/3.0)
//   header      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" padded with spaces
//               and ending in '\n' so that the data starts at a multiple of 64 bytes
//   data        the elements in C order, little-endian
// bfloat16 tensors are stored as float32 values and packed int4 as int8 (one value per byte,
// sign-extended, low nibble first); the dump file name keeps the original dtype.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "graphdump/dims.h"
#include "graphdump/dtype.h"
#include "graphdump/status.h"

namespace graphdump {

// The complete header (magic, version, length, padded dict) for a tensor of `dtype` (the
// original dtype; the descr is that of NpyStoredDType) and `shape`.
std::string NpyHeader(DType dtype, const Dims& shape);

// Converts elements from memory layout to .npy storage layout: bfloat16 -> float32 and
// int4 -> int8; other dtypes are copied unchanged. `count` is the number of elements in `in`.
// Appends to `out`.
void EncodeNpyPayload(DType dtype, const uint8_t* in, int64_t count, std::vector<uint8_t>* out);

// True when EncodeNpyPayload is the identity for `dtype` (the bytes can be written as they are).
bool NpyPayloadIsIdentity(DType dtype);

// What a .npy header says.
struct NpyInfo {
  int major_version = 1;
  int minor_version = 0;
  std::string descr;  // as written, e.g. "<f4"
  // The elements as the file stores them (DTypeBits(dtype) / 8 bytes each): "<f4" is float32
  // even in a file named bfloat16; "<E2" (raw bfloat16, ml_dtypes) is kBFloat16, 2 bytes.
  DType dtype = DType::kFloat32;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  int64_t elements = 0;    // the product of `shape` (checked: it fits int64_t)
  size_t data_offset = 0;  // bytes before the first element
  size_t data_bytes = 0;   // elements * item size (checked: it fits int64_t)
};

// Parses and validates the header at the start of `data` (versions 1.0, 2.0, 3.0; every descr of
// docs/file-format.md). Does not check that `size` covers the data: the caller compares
// data_offset + data_bytes with the file size. Errors are kCorrupt and name `path`, what was found
// and what was expected.
StatusOr<NpyInfo> ParseNpyHeader(const uint8_t* data, size_t size, const std::string& path);

// kCorrupt naming `path` ("truncated .npy: header promises N data bytes, file has M") when a
// file of `file_size` bytes is too short for the data `info` describes.
Status CheckNpyDataSize(const NpyInfo& info, uint64_t file_size, const std::string& path);

}  // namespace graphdump
