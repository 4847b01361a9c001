// The file layer the dump writes through. Injectable, so tests can simulate a full disk or a
// read-only directory; the default implementation uses POSIX calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "graphdump/status.h"

namespace graphdump {

// A file being written under a temporary name. Commit() makes it appear under its final name
// (rename) with mode 0400; destroying an uncommitted file removes the temporary.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status Append(const void* data, size_t size) = 0;
  virtual Status Commit() = 0;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // Creates `dir` and its missing parents with mode 0700. Existing directories are fine.
  virtual Status CreateDirectories(const std::string& dir) = 0;

  // Starts writing `path` through a temporary name in the same directory. Errors name `path`.
  virtual StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;

  // Appends `data` to `path`, creating it if needed (mode 0600 while open, 0400 after).
  virtual Status AppendToFile(const std::string& path, const std::string& data) = 0;

  // Writes `data` as the whole content of `path` (temporary then rename, mode 0400), replacing
  // an existing file.
  Status WriteWholeFile(const std::string& path, const std::string& data);

  virtual bool Exists(const std::string& path) = 0;
};

// The real file system (POSIX). `fsync` makes every committed file durable before the rename.
std::shared_ptr<FileSystem> NewPosixFileSystem(bool fsync = false);

}  // namespace graphdump
