// Indexing Ascend-style dumps for `graphdump ls` and `compare`: GE-layout directories of raw
// dump files (docs/ascend.md) and directories written by `graphdump convert`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "graphdump/analysis/ascend_dump.h"
#include "graphdump/status.h"

namespace graphdump {

// One tensor of the dump, addressed as (kernel, io, slot) -> file.
struct AscendIndexEntry {
  std::string path;           // the raw dump file, or the .npy file
  bool in_dump_file = false;  // true: tensor `slot` inside the raw dump file at `path`
                              // (read it with LoadAscendTensor); false: a .npy file
  AscendTensor tensor;        // in_dump_file: the tensor as the file's header describes it,
                              // where its bytes are included, so that reading it needs no
                              // second parse of the header
  std::string op_type;
  std::string op_name;  // sanitised full name, as in the file name
  uint32_t task_id = 0;
  uint32_t stream_id = 0;
  uint64_t timestamp = 0;
  bool is_input = false;
  uint32_t slot = 0;
  std::vector<int64_t> shape;  // host shape for converted .npy names and dump-file headers
                               // (original_shape when present); empty when unknown
  // Set when the file lies in a GE layout: .../{YYYYMMDDhhmmss}/{device_id}/{model_name}/
  // {model_id}/{data_index}/ (a converted GE dump keeps these directories).
  bool ge_layout = false;
  std::string session;  // YYYYMMDDhhmmss
  uint32_t device_id = 0;
  std::string model_name;
  uint32_t model_id = 0;
  uint64_t data_index = 0;  // the iteration
};

struct AscendIndex {
  std::vector<AscendIndexEntry> entries;  // sorted by path, then input before output, then slot
  std::vector<std::string> problems;      // files that looked like dump files but did not parse
};

// The parts of a dump file basename "{op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}".
// False when `basename` does not have that form.
bool ParseAscendBasename(std::string_view basename, AscendIndexEntry* entry);

// The parts of a converted file name: "{basename}.{input|output}.{i}.{d0xd1...}.npy" or
// "{basename}.{input|output}.{i}.npy". False for other names.
bool ParseConvertedNpyName(std::string_view file_name, AscendIndexEntry* entry);

// Walks `dir` recursively. Raw dump files (LooksLikeAscendDumpName) give one entry per tensor,
// read from their header; converted .npy files give one entry each, long names resolved
// through each directory's mapping.csv. Other files are ignored. kNotFound when `dir` does not
// exist; kIOError (with the system's reason) when a directory below it cannot be read.
StatusOr<AscendIndex> IndexAscendDump(const std::string& dir);

}  // namespace graphdump
