// `graphdump convert`: Ascend dump files (docs/ascend.md) to .npy files.
//
// Each input and output tensor of a dump file becomes one .npy file in the output directory:
//   {basename}.{input|output}.{i}.{d0xd1x...}.npy   with a target format (host layout, cropped
//                                                   to original_shape)
//   {basename}.{input|output}.{i}.npy               without one (device layout, as stored)
// float16 stays float16; bfloat16 is written as float32 values and int4 as int8
// (docs/file-format.md). A name longer than 255 bytes becomes {number}.npy, listed as
// "{number}.npy,{name}" in mapping.csv of that directory. A tensor whose format has no conversion,
// or whose shapes do not agree, is written in device layout and a warning says why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graphdump/analysis/ascend_dump.h"
#include "graphdump/dtype.h"
#include "graphdump/file_system.h"
#include "graphdump/status.h"

namespace graphdump {

// One file to convert, and the sub-directory of the output directory its .npy files go to.
struct AscendConvertJob {
  std::string path;
  std::string relative_dir;  // "" for files named directly; "a/b" for DIR/a/b/file
  std::string name;          // the dump file name `path` stands for (mapping.csv); "": its own
};

// Expands the command-line operands: a file is taken as it is (whatever its name); a
// directory contributes every file below it whose name, or original name in mapping.csv
// (MappedNames), LooksLikeAscendDumpName, keeping its relative directory. Sorted by path.
// kNotFound names an operand that does not exist. Entries below a directory that are named like
// dump files but are not regular files (a FIFO, a device, a socket) are not read: each is
// added to `skipped` (when given) as "PATH: it is a FIFO, not a regular file".
StatusOr<std::vector<AscendConvertJob>> CollectAscendDumpFiles(
    const std::vector<std::string>& operands, std::vector<std::string>* skipped = nullptr);

struct AscendConvertOptions {
  std::string output_dir;
  // "" keeps the device layout; any other value (NCHW, ND, NCDHW) converts device formats to
  // their host layout: NCHW or NCDHW for 4-D and 5-D original shapes, ND otherwise.
  std::string target_format;
  int threads = 0;                          // 0: one per hardware thread
  std::shared_ptr<FileSystem> file_system;  // null: the POSIX file system
  // Called after each file (from worker threads, serialised) with files done and total.
  std::function<void(size_t done, size_t total)> progress;
  // Receives each warning (from worker threads, serialised).
  std::function<void(const std::string&)> warn;
};

struct AscendConvertSummary {
  size_t files = 0;            // dump files converted without error
  size_t tensors = 0;          // .npy files written
  uint64_t bytes_read = 0;     // tensor bytes read
  uint64_t bytes_written = 0;  // .npy bytes written
  size_t warnings = 0;
  std::vector<Status> errors;  // one per file that could not be converted
};

// Converts every job, `options.threads` files at a time. A file that fails (corrupt, unreadable,
// unwritable output) is reported in `errors` and the others are still converted.
AscendConvertSummary ConvertAscendDumps(const std::vector<AscendConvertJob>& jobs,
                                        const AscendConvertOptions& options);

// A tensor of a dump file in host memory.
struct AscendHostTensor {
  DType dtype = DType::kFloat32;  // memory layout: bfloat16 as 2 bytes, int4 packed
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // C order
  bool converted = false;      // false: device layout (no conversion exists or shapes disagree)
  std::string note;            // why it was not converted
};

// Reads input or output `index` of the dump file at `path` in host layout (device formats
// converted as convert -f NCHW does). kNotFound when the file has no such tensor;
// kUnsupported for data types without a NumPy equivalent.
StatusOr<AscendHostTensor> LoadAscendTensor(const std::string& path, bool is_input, int index);

// Reads `tensor`, one tensor of the dump file at `path` as its header (ParseAscendDump) described
// it, in host layout as above. Reads only the tensor's own bytes (kIOError naming the file when
// the file no longer holds them), not the header.
StatusOr<AscendHostTensor> LoadAscendTensor(const std::string& path, const AscendTensor& tensor);

}  // namespace graphdump
