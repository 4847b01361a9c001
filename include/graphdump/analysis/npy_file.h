// A .npy file mapped read-only into memory, its header validated (docs/file-format.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graphdump/analysis/ascend_dump.h"
#include "graphdump/analysis/mapped_file.h"
#include "graphdump/npy.h"
#include "graphdump/status.h"

namespace graphdump {
struct AscendHostTensor;  // ascend_convert.h
}  // namespace graphdump

namespace graphdump::analysis {

class MappedNpy {
 public:
  // Maps `path` and validates its header and size. Errors: kNotFound / kIOError naming the
  // file, kCorrupt naming the file for a bad header or a file shorter than its header says
  // ("truncated: header promises N data bytes, file has M").
  static StatusOr<std::unique_ptr<MappedNpy>> Open(const std::string& path);
  // The .npy file whose bytes are `bytes` (kept, at whatever alignment the header leaves the
  // data), validated as Open does; `path` names it in errors. For tests and fuzzing.
  static StatusOr<std::unique_ptr<MappedNpy>> FromBytes(std::vector<uint8_t> bytes,
                                                        const std::string& path);
  // The tensor `tensor` of the Ascend dump file at `path` (docs/ascend.md; as its parsed header
  // describes it) in host layout, held in memory in .npy storage form (bfloat16 as float32,
  // int4 as int8) so it reads like a mapped .npy. Reads only the tensor's bytes. Errors name
  // the file.
  static StatusOr<std::unique_ptr<MappedNpy>> FromAscendTensor(const std::string& path,
                                                               const AscendTensor& tensor);
  // The same for input or output `slot`, found in the file's header (read again).
  static StatusOr<std::unique_ptr<MappedNpy>> FromAscendDumpFile(const std::string& path,
                                                                 bool is_input, uint32_t slot);
  ~MappedNpy();
  MappedNpy(const MappedNpy&) = delete;
  MappedNpy& operator=(const MappedNpy&) = delete;

  const NpyInfo& info() const { return info_; }
  const uint8_t* data() const { return base_ + info_.data_offset; }  // first element
  int64_t NumElements() const;
  const std::string& path() const { return path_; }

 private:
  MappedNpy() = default;
  // Parses and checks the header at `base` (`size` bytes, the whole file).
  Status ReadHeader(const uint8_t* base, size_t size);
  static std::unique_ptr<MappedNpy> FromHostTensor(const std::string& path,
                                                   AscendHostTensor tensor);
  std::string path_;
  NpyInfo info_;
  const uint8_t* base_ = nullptr;
  std::unique_ptr<MappedFile> file_;  // Open: the mapped file
  std::vector<uint8_t> owned_;        // FromBytes, FromAscend*: the bytes
};

}  // namespace graphdump::analysis
