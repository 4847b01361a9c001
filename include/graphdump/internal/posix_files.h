// Internal: what the POSIX file layer (file_system.cc) and the user files (user_files.cc)
// share: errno messages, path pieces, descriptors, temporaries and the file written under a
// temporary name. Not part of the public API.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <memory>
#include <string>
#include <string_view>

#include "graphdump/file_system.h"
#include "graphdump/internal/signal_cleanup.h"

namespace graphdump::internal {

// strerror is not thread-safe; the async writers report errors from several threads.
std::string ErrnoText(int error);

Status ErrnoError(const std::string& what, const std::string& path, int error);

// The directory of `path` ("." for a bare name, "/" for a name in the root), as a view of
// `path` or of a literal.
std::string_view DirNameView(std::string_view path);

std::string DirName(const std::string& path);

std::string BaseName(const std::string& path);

// Writes all of `data`, retrying short writes and EINTR. Returns 0 or the errno.
int WriteFully(int fd, const void* data, size_t size);

// Writes all of `first` and then all of `second` with writev (one call for both when the
// kernel takes them whole), retrying short writes and EINTR. Returns 0 or the errno.
int WriteTwoFully(int fd, const void* first, size_t first_size, const void* second,
                  size_t second_size);

// A descriptor closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.Release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = other.Release();
    }
    return *this;
  }
  ~Fd() { Reset(); }
  int get() const { return fd_; }
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// An open directory, shared by the files being written in it.
using DirFd = std::shared_ptr<const Fd>;

// The kind of a file that is not a regular one, for messages.
const char* FileKind(mode_t mode);

// Why `base` in the directory `dir_fd` must not be replaced by a file graphdump writes ("it is a
// FIFO, ..."), or "" when it may: it is missing or a regular file. A FIFO, device, socket,
// directory or symbolic link is never replaced (nor written through).
std::string NotReplaceable(int dir_fd, const std::string& base);

// renameat2(RENAME_NOREPLACE) of `from` to `to`, both in `dir_fd`: 0, or -1 with errno (EEXIST
// when `to` exists; EINVAL or ENOSYS where the file system or kernel has no RENAME_NOREPLACE).
int RenameNoReplace(int dir_fd, const char* from, const char* to);
// renameat2(RENAME_EXCHANGE) of `a` and `b`, both in `dir_fd`: 0, or -1 with errno (EINVAL where
// the file system cannot exchange).
int RenameExchange(int dir_fd, const char* a, const char* b);

// Creates the temporary for `base` in `dir_fd` with `mode`, registered with signal_cleanup.
// Returns its descriptor (or -1 with errno set), its name and its cleanup slot. A temporary
// left by a crashed process with the same pid can collide: the next name is taken.
int CreateTemporary(int dir_fd, const std::string& base, mode_t mode, std::string* temp_name,
                    int* slot);

// A file being written under a temporary name in the directory `dir_fd` (owned).
class PosixWritableFile : public WritableFile {
 public:
  // `final_mode` < 0 keeps the creation mode (user files).
  PosixWritableFile(DirFd dir, int fd, int slot, std::string temp_name, std::string path,
                    bool fsync, int final_mode)
      : dir_(std::move(dir)),
        fd_(fd),
        slot_(slot),
        temp_name_(std::move(temp_name)),
        path_(std::move(path)),
        fsync_(fsync),
        final_mode_(final_mode) {}

  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlinkat(dir_->get(), temp_name_.c_str(), 0);
    signal_cleanup.Forget(slot_);
  }

  Status Append(const void* data, size_t size) override {
    if (fd_ < 0) return Status::Internal("append to " + path_ + " after commit");
    const int error = WriteFully(fd_, data, size);
    if (error != 0) return ErrnoError("write", path_, error);
    return Status::Ok();
  }

  Status AppendTwo(const void* first, size_t first_size, const void* second,
                   size_t second_size) override {
    if (fd_ < 0) return Status::Internal("append to " + path_ + " after commit");
    const int error = WriteTwoFully(fd_, first, first_size, second, second_size);
    if (error != 0) return ErrnoError("write", path_, error);
    return Status::Ok();
  }

  Status Commit() override {
    if (fd_ < 0) return Status::Internal("commit of " + path_ + " twice");
    if (fsync_ && ::fsync(fd_) != 0) return ErrnoError("sync", path_, errno);
    if (final_mode_ >= 0 && ::fchmod(fd_, static_cast<mode_t>(final_mode_)) != 0) {
      return ErrnoError("set permissions of", path_, errno);
    }
    const int fd = fd_;
    fd_ = -1;
    // close() can report a delayed write error (NFS, quotas).
    if (::close(fd) != 0) return ErrnoError("write", path_, errno);
    // Only a regular file is replaced: a FIFO, a device or a symbolic link with the final name
    // is refused (the temporary is removed), never replaced or written through. A new name
    // (the usual case: every tensor file of a dump) is taken in one step that replaces nothing
    // (RENAME_NOREPLACE), without looking the name up first; only when something has it, or
    // the file system cannot rename without replacing, is it checked and then replaced.
    const std::string base = BaseName(path_);
    if (RenameNoReplace(dir_->get(), temp_name_.c_str(), base.c_str()) != 0) {
      if (errno != EEXIST && errno != EINVAL && errno != ENOSYS) {
        return ErrnoError("rename to", path_, errno);
      }
      if (const std::string why = NotReplaceable(dir_->get(), base); !why.empty()) {
        return Status::InvalidArgument("cannot write " + path_ + ": " + why);
      }
      // The old file is replaced by exchanging the two names, then removed under the temporary
      // one: ext4 writes a file renamed over another out at once, in the rename (auto_da_alloc),
      // which would hold the training thread up at each graph file written again; an exchange
      // it leaves to its background writeback. Where names cannot be exchanged, a rename.
      if (RenameExchange(dir_->get(), temp_name_.c_str(), base.c_str()) == 0) {
        (void)::unlinkat(dir_->get(), temp_name_.c_str(), 0);
      } else if (::renameat(dir_->get(), temp_name_.c_str(), dir_->get(), base.c_str()) != 0) {
        return ErrnoError("rename to", path_, errno);
      }
    }
    committed_ = true;
    if (fsync_) (void)::fsync(dir_->get());  // best effort: some file systems refuse
    return Status::Ok();
  }

 private:
  DirFd dir_;
  int fd_;
  int slot_;
  std::string temp_name_;
  std::string path_;
  bool fsync_;
  int final_mode_;
  bool committed_ = false;
};

}  // namespace graphdump::internal
