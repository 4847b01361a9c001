// The per-tensor work of the dump writer: one visit over a tensor's bytes that feeds the md5,
// the statistics, the .npy encoding and the file, so a tensor is read from memory once.
// Internal to the core library (used by the dump session and its writer threads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "graphdump/file_system.h"
#include "graphdump/stats.h"
#include "graphdump/status.h"
#include "graphdump/tensor_view.h"

namespace graphdump {

struct TensorWriteOptions {
  // Write the .npy file at `path`. False for saved_data "statistic": statistics only, no file.
  bool write_npy = true;
  // The statistics of NanPropagatingStats to compute (the md5 is of the tensor's bytes as stored in
  // memory, in C order); none when empty.
  std::optional<StatsRequest> stats;
  // 0 writes every element. N > 0 is sample mode: a tensor with more than N elements is written
  // as its first N elements in C order with shape (N,). Statistics still cover the whole tensor.
  int64_t max_elements = 0;
  // Bytes read (and written) per piece; bounds the extra memory of strided and encoded tensors.
  // A contiguous tensor written without statistics, whose .npy bytes are its memory, goes to
  // the file whole, in one call with its header.
  size_t chunk_bytes = size_t{1} << 20;
};

struct TensorWriteResult {
  NanPropagatingStats stats;  // default values unless `stats` was requested
  uint64_t file_bytes = 0;  // size of the .npy file written (0 when write_npy is false)
};

// Visits `view` once in C order (non-contiguous views are gathered), computing what `options`
// asks for and writing the .npy file at `path` through `fs`: under a temporary name, renamed into
// place only when complete. Empty tensors give a valid .npy whose shape contains the 0.
// Errors: InvalidArgument for a malformed view (strides not matching the shape, null data,
// strided int4), Unsupported for data not in host memory, IOError naming `path` when writing
// fails; then nothing exists under `path` (unless it existed before).
StatusOr<TensorWriteResult> WriteTensor(FileSystem& fs, const std::string& path,
                                        const TensorView& view, const TensorWriteOptions& options);

}  // namespace graphdump
