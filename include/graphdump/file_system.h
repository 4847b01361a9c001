// The file layer the dump writes through. Injectable, so tests can simulate a full disk or a
// read-only directory; the default implementation uses POSIX calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "graphdump/status.h"

namespace graphdump {

// A file being written under a temporary name. Commit() makes it appear under its final name
// (rename) with mode 0400; destroying an uncommitted file removes the temporary. Only a regular
// file (or nothing) with the final name is replaced: a FIFO, device, socket, directory or
// symbolic link there makes Commit fail with kInvalidArgument naming the path and what it is.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status Append(const void* data, size_t size) = 0;
  // Appends `first` (`first_size` bytes) and then `second`: a header and the data after it,
  // handed to the file system in one call where it can (POSIX: writev), so that neither is
  // copied to be joined. The same as two Appends otherwise.
  virtual Status AppendTwo(const void* first, size_t first_size, const void* second,
                           size_t second_size) {
    GRAPHDUMP_RETURN_IF_ERROR(Append(first, first_size));
    return Append(second, second_size);
  }
  virtual Status Commit() = 0;
};

// An exclusive lock on a file (FileSystem::TryLock), held until destroyed.
class FileLock {
 public:
  virtual ~FileLock() = default;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // Creates `dir` and its missing parents with mode 0700. Existing directories are fine.
  virtual Status CreateDirectories(const std::string& dir) = 0;

  // Starts writing `path` through a temporary name in the same directory. Errors name `path`.
  virtual StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;

  // Appends `data` to `path`, creating it if needed (mode 0600 while open, 0400 after). All or
  // nothing: when the write fails part way (a full disk), the file is cut back to what it held
  // before (a file this call created is removed), so no partial row is left under `path`.
  virtual Status AppendToFile(const std::string& path, const std::string& data) = 0;

  // Makes `path` (a new name) a file holding the bytes of the committed file `existing`: a second
  // name for the same file (a hard link, no bytes written) where the file system allows one,
  // otherwise a copy (temporary, then rename, like NewWritableFile). Errors name `path`.
  virtual Status LinkOrCopy(const std::string& existing, const std::string& path) = 0;

  // Removes the file `path`; a missing file is fine.
  virtual Status Remove(const std::string& path) = 0;

  // Writes `data` as the whole content of `path` (temporary then rename, mode 0400), replacing
  // an existing regular file (Commit's rule).
  Status WriteWholeFile(const std::string& path, const std::string& data);

  // True when something (a file, a directory, a symbolic link) has the name `path`.
  virtual bool Exists(const std::string& path) = 0;

  // Creates the directory `dir` (its missing parents too) only if nothing has that name yet:
  // true when this call made it, false when something was there. Atomic (mkdir), so of two
  // processes claiming one directory exactly one gets true.
  virtual StatusOr<bool> CreateDirectoryIfAbsent(const std::string& dir) = 0;

  // Removes `dir` and everything below it; symbolic links below it are removed, never followed.
  // A missing `dir` is fine.
  virtual Status RemoveTree(const std::string& dir) = 0;

  // Renames the file or directory `from` to `to` in one step; fails when `to` exists.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;

  // Takes the exclusive lock (flock) on the file `path` without waiting, creating it (mode
  // 0600, never through a symbolic link) when missing, and writes "process {pid}" into it.
  // Returns nullptr when another process holds it, with what the file says in `*holder`. The
  // lock is released when the process ends, or when the FileLock is destroyed: then, in the
  // process that took it (not in a forked child), the file is removed first. A signal that
  // RemoveTemporariesOnSignals handles removes it too.
  virtual StatusOr<std::unique_ptr<FileLock>> TryLock(const std::string& path,
                                                      std::string* holder) = 0;
};

// The real file system (POSIX). `fsync` makes every committed file durable before the rename.
// With a `root` (the dump directory), every path must lie below it (others are refused with
// kInvalidArgument), the root must be a directory and not a symbolic link (its parents may be
// links: the user named them), and nothing below it is reached through a symbolic link:
// directories are opened one at a time relative to their parent (openat) and files created and
// opened with O_NOFOLLOW, so a link planted in the dump directory is refused with an IOError
// naming it, and nothing is written outside the root. Without a root, paths are used as named
// and only the files themselves are opened with O_NOFOLLOW.
std::shared_ptr<FileSystem> NewPosixFileSystem(bool fsync = false, std::string root = "");

// For files a user names on the command line (reports, CSV tables, saved outputs), not dump
// files: why `path` cannot be written (its directory is missing or not writable, or `path` is a
// directory, a FIFO, a device, a socket or a symbolic link: only regular files and new paths are
// written), or "" when it can. Lets a command refuse a bad path before long work.
std::string OutputPathProblem(const std::string& path);

// Writes `pieces` one after another as the whole of `path`, through a temporary file in the
// same directory renamed into place: a failure leaves no partial file under `path` and an
// existing file as it was. Mode 0666 less the umask, like any file a user saves. Only a regular
// file is replaced (WritableFile::Commit's rule): anything else at `path` is kInvalidArgument.
Status WriteUserFile(const std::string& path, std::initializer_list<std::string_view> pieces);
// The same written piece by piece: nothing is under `path` until Commit; a file dropped
// uncommitted leaves no trace.
StatusOr<std::unique_ptr<WritableFile>> NewUserFile(const std::string& path);

// A regular file open for reading (OpenRegularFile); closes its descriptor when destroyed.
class ReadableFile {
 public:
  ReadableFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ReadableFile(ReadableFile&& other) noexcept;
  ReadableFile& operator=(ReadableFile&& other) noexcept;
  ReadableFile(const ReadableFile&) = delete;
  ReadableFile& operator=(const ReadableFile&) = delete;
  ~ReadableFile();

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }  // when it was opened
  const std::string& path() const { return path_; }

  // Replaces `*out` with the `n` bytes at `offset`. kIOError naming the file when they cannot
  // all be read (the file shrank since it was opened).
  Status Read(uint64_t offset, uint64_t n, std::string* out) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Opens `path` for reading if it is a regular file (symbolic links to one are followed). A
// FIFO, socket, device or directory is refused with kInvalidArgument naming `path` and what it
// is, without blocking on it or reading from it; kNotFound when `path` does not exist, kIOError
// for other failures. The files of a dump (tensors, statistic.csv, mapping.csv, graph files,
// Ascend dump files) and configuration files are opened through here.
StatusOr<ReadableFile> OpenRegularFile(const std::string& path);

// The whole content of the regular file `path` (OpenRegularFile's checks), as long as it was
// when opened.
StatusOr<std::string> ReadRegularFile(const std::string& path);

// Makes SIGINT, SIGTERM and SIGHUP (those still at their default action) remove the temporaries
// of files being written, and cut appends in progress back to their old size, before the
// process dies of the signal, so that a Ctrl-C leaves only whole files and whole rows behind.
// Once such a signal arrived, a thread that starts a new file waits for the process to end.
// For programs (the CLI); a library host keeps its own handlers.
void RemoveTemporariesOnSignals();

}  // namespace graphdump
