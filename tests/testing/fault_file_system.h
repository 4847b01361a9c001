// A FileSystem for tests that fails on purpose: it wraps a real one and reports ENOSPC-style
// IOErrors after a byte budget, on the Kth new file, or for paths containing a substring, so
// tests can simulate a disk filling up in the middle of a dump.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "graphdump/file_system.h"

namespace graphdump::testing {

class FaultFileSystem : public FileSystem {
 public:
  explicit FaultFileSystem(std::shared_ptr<FileSystem> base);

  // Appends (file writes and AppendToFile) fail with "No space left on device" once more than
  // `bytes` bytes in total have been written through this file system. A file write that
  // crosses the limit stores the bytes that still fit, like a real full disk; an AppendToFile
  // that crosses it stores nothing, as FileSystem::AppendToFile promises.
  void FailAfterBytes(uint64_t bytes);
  // The `k`th call of NewWritableFile or LinkOrCopy (1-based) fails.
  void FailOnFile(int k);
  // NewWritableFile, LinkOrCopy and AppendToFile fail for every path containing `substring`.
  void FailPathsContaining(std::string substring);

  int files_created() const;  // NewWritableFile and LinkOrCopy calls so far, failed ones included
  uint64_t bytes_written() const;

  Status CreateDirectories(const std::string& dir) override;
  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  Status AppendToFile(const std::string& path, const std::string& data) override;
  Status LinkOrCopy(const std::string& existing, const std::string& path) override;
  Status Remove(const std::string& path) override;
  bool Exists(const std::string& path) override;
  StatusOr<bool> CreateDirectoryIfAbsent(const std::string& dir) override;
  Status RemoveTree(const std::string& dir) override;
  Status Rename(const std::string& from, const std::string& to) override;
  StatusOr<std::unique_ptr<FileLock>> TryLock(const std::string& path,
                                              std::string* holder) override;

  // Takes up to `size` bytes of the budget; returns how many may be written.
  size_t Reserve(size_t size);

 private:
  bool PathFails(const std::string& path) const;

  std::shared_ptr<FileSystem> base_;
  mutable std::mutex mutex_;
  uint64_t byte_limit_ = UINT64_MAX;
  uint64_t bytes_written_ = 0;
  int fail_on_file_ = 0;
  int files_created_ = 0;
  std::string failing_substring_;
};

// The message a full disk gives for `path`, as the POSIX file system words it.
std::string NoSpaceMessage(const std::string& path);

}  // namespace graphdump::testing
