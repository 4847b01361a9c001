// The file layer the dump writes through. Injectable, so tests can simulate a full disk or a
// read-only directory; the default implementation uses POSIX calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

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

// For files a user names on the command line (reports, CSV tables, saved outputs), not dump
// files: why `path` cannot be written (its directory is missing or not writable, or `path` is a
// directory), or "" when it can. Lets a command refuse a bad path before long work.
std::string OutputPathProblem(const std::string& path);

// Writes `pieces` one after another as the whole of `path`, through a temporary file in the
// same directory renamed into place: a failure leaves no partial file under `path` and an
// existing file as it was. Mode 0666 less the umask, like any file a user saves.
Status WriteUserFile(const std::string& path, std::initializer_list<std::string_view> pieces);

// Makes SIGINT, SIGTERM and SIGHUP (those still at their default action) remove the temporaries
// of files being written before the process dies of the signal, so that a Ctrl-C leaves only
// whole files behind. For programs (the CLI); a library host keeps its own handlers.
void RemoveTemporariesOnSignals();

}  // namespace graphdump
