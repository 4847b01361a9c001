// A whole file in memory, read-only: mapped, or read when small (the one place the analysis
// tools map files).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "graphdump/status.h"

namespace graphdump::analysis {

class MappedFile {
 public:
  // Maps `path`, a regular file (OpenRegularFile: a FIFO or device is refused with
  // kInvalidArgument, without blocking). kNotFound when it does not exist, kIOError (naming the
  // file and the system's reason) when it cannot be opened or mapped. `populate` reads the
  // pages in at once. A file that shrinks while mapped is the caller's risk (SIGBUS), as with
  // any mapping; dump files are read-only and never rewritten in place. A file of up to
  // kReadLimit bytes is read instead: making and undoing a mapping costs more than copying a few
  // pages (a dump of many iterations has a small statistic.csv in each).
  static constexpr size_t kReadLimit = 256 * 1024;
  static StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path, bool populate = false);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // The bytes; a valid pointer even for an empty file.
  const uint8_t* data() const { return data_ != nullptr ? data_ : &empty_; }
  size_t size() const { return size_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  std::string read_;  // the bytes of a file read, not mapped
  uint8_t empty_ = 0;
};

}  // namespace graphdump::analysis
