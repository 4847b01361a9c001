// Writing Ascend asynchronous dump files (docs/ascend.md) for `file_format: "bin"`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graphdump/file_system.h"
#include "graphdump/status.h"
#include "graphdump/tensor_view.h"

namespace graphdump {

// Writes one dump file at `path` through `fs` (temporary name, then rename; nothing appears
// under `path` on failure): the 8-byte little-endian header length, a toolkit.dumpdata.DumpData
// header (version "2.0", `dump_time` in microseconds, `op_name`, one OpInput per input and one
// OpOutput per output), then the tensors' bytes in C order, inputs first. Tensors are in host
// layout: format NCHW for 4-D tensors and ND otherwise, original_shape equal to shape.
// Non-contiguous views are gathered; int4 is stored packed as INT4, bfloat16 as BF16. Indexes a
// list skips (views' `slot`) get UNDEFINED placeholders without bytes (AscendTensor::absent).
// Returns the bytes written, or the file system's error naming `path`.
// REQUIRES: every tensor's data is host memory.
StatusOr<uint64_t> WriteAscendDumpFile(FileSystem& fs, const std::string& path,
                                       const std::string& op_name, uint64_t dump_time,
                                       const std::vector<TensorView>& inputs,
                                       const std::vector<TensorView>& outputs);

}  // namespace graphdump
