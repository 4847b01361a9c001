// The fused per-tensor visit used by the session: one pass over the data computes the md5 and the
// statistics, encodes .npy storage and appends to the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "graphdump/file_system.h"
#include "graphdump/stats.h"
#include "graphdump/status.h"
#include "graphdump/tensor_view.h"

namespace graphdump {

struct TensorWriteOptions {
  bool write_npy = true;       // false: statistics only (saved_data "statistic")
  bool compute_stats = false;
  bool with_md5 = false;
  // 0: the whole tensor. N > 0 (sample mode): a tensor with more than N elements is saved as its
  // first N elements in C order with shape (N,); statistics still cover the whole tensor.
  int64_t max_elements = 0;
  size_t chunk_bytes = size_t{1} << 20;
};

struct TensorWriteResult {
  TensorStats stats;
  uint64_t file_bytes = 0;  // bytes of the .npy file, 0 when none was written
};

// Visits `view` once: statistics, md5, npy encoding and file writes. The file appears at `path`
// only when complete (temporary name, then rename, mode 0400). Non-contiguous views are written
// in C order. Errors name `path`.
StatusOr<TensorWriteResult> WriteTensor(FileSystem& fs, const std::string& path,
                                        const TensorView& view, const TensorWriteOptions& options);

}  // namespace graphdump
