// A .npy file mapped read-only into memory, its header validated (SPEC §7).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graphdump/analysis/mapped_file.h"
#include "graphdump/npy.h"
#include "graphdump/status.h"

namespace graphdump::analysis {

class MappedNpy {
 public:
  // Maps `path` and validates its header and size. Errors: kNotFound / kIOError naming the
  // file, kCorrupt naming the file for a bad header or a file shorter than its header says
  // ("truncated: header promises N data bytes, file has M").
  static StatusOr<std::unique_ptr<MappedNpy>> Open(const std::string& path);
  // Input or output `slot` of an Ascend dump file (SPEC §9) in host layout, held in memory in
  // .npy storage form (bfloat16 as float32, int4 as int8) so it reads like a mapped .npy.
  // Errors name the file.
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
  std::string path_;
  NpyInfo info_;
  const uint8_t* base_ = nullptr;
  std::unique_ptr<MappedFile> file_;  // Open: the mapped file
  std::vector<uint8_t> owned_;        // FromAscendDumpFile: the tensor's bytes
};

}  // namespace graphdump::analysis
