// The pieces of the POSIX file layer that file_system.cc and user_files.cc share
// (graphdump/internal/posix_files.h): errno messages, path pieces, whole writes, temporaries.
#include "graphdump/internal/posix_files.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <string>

namespace graphdump::internal {
// strerror is not thread-safe; the async writers report errors from several threads.
std::string ErrnoText(int error) {
  char buffer[256];
  return strerror_r(error, buffer, sizeof(buffer));  // GNU version: returns the message
}

Status ErrnoError(const std::string& what, const std::string& path, int error) {
  return Status::IOError("cannot " + what + " " + path + ": " + ErrnoText(error));
}

namespace {

// The position of the last '/' in `path`, or npos: memrchr, not a loop over characters (every
// tensor file's path passes here, with a long kernel name at its end).
size_t LastSlash(std::string_view path) {
  const void* slash = path.empty() ? nullptr : ::memrchr(path.data(), '/', path.size());
  return slash == nullptr ? std::string_view::npos
                          : static_cast<size_t>(static_cast<const char*>(slash) - path.data());
}

}  // namespace

std::string_view DirNameView(std::string_view path) {
  const size_t slash = LastSlash(path);
  if (slash == std::string_view::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string DirName(const std::string& path) { return std::string(DirNameView(path)); }

std::string BaseName(const std::string& path) {
  const size_t slash = LastSlash(path);
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Writes all of `data`, retrying short writes and EINTR. Returns 0 or the errno.
int WriteFully(int fd, const void* data, size_t size) {
  return WriteTwoFully(fd, data, size, nullptr, 0);
}

int WriteTwoFully(int fd, const void* first, size_t first_size, const void* second,
                  size_t second_size) {
  struct iovec pieces[2] = {{const_cast<void*>(first), first_size},
                            {const_cast<void*>(second), second_size}};
  struct iovec* next = pieces;
  int left = 2;
  while (left > 0) {
    if (next->iov_len == 0) {
      ++next;
      --left;
      continue;
    }
    const ssize_t n = ::writev(fd, next, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    size_t done = static_cast<size_t>(n);
    while (left > 0 && done >= next->iov_len) {
      done -= next->iov_len;
      ++next;
      --left;
    }
    if (left > 0) {
      next->iov_base = static_cast<uint8_t*>(next->iov_base) + done;
      next->iov_len -= done;
    }
  }
  return 0;
}

int RenameNoReplace(int dir_fd, const char* from, const char* to) {
  return ::renameat2(dir_fd, from, dir_fd, to, RENAME_NOREPLACE);
}

int RenameExchange(int dir_fd, const char* a, const char* b) {
  return ::renameat2(dir_fd, a, dir_fd, b, RENAME_EXCHANGE);
}

// ".{basename}.tmp.{pid}.{n}" (so rename stays in one directory), with the basename shortened
// so the temporary name fits NAME_MAX.
std::string TempNameFor(const std::string& base) {
  static std::atomic<uint64_t> counter{0};
  const std::string suffix = ".tmp." + std::to_string(ProcessId()) + "." +
                             std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
  const size_t room = kNameMax - 1 - suffix.size();
  return "." + (base.size() > room ? base.substr(0, room) : base) + suffix;
}

// The kind of a file that is not a regular one, for messages.
const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

// Why `base` in the directory `dir_fd` must not be replaced by a file graphdump writes ("it is a
// FIFO, ..."), or "" when it may: it is missing or a regular file. A FIFO, device, socket,
// directory or symbolic link is never replaced (nor written through).
std::string NotReplaceable(int dir_fd, const std::string& base) {
  struct stat st;
  if (::fstatat(dir_fd, base.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISREG(st.st_mode)) {
    return "";
  }
  return std::string("it is ") + FileKind(st.st_mode) +
         ", not a regular file; graphdump writes only to regular files or new paths (remove it, "
         "or name another path)";
}

// Creates the temporary for `base` in `dir_fd` with `mode`, registered with signal_cleanup.
// Returns its descriptor (or -1 with errno set), its name and its cleanup slot. A temporary
// left by a crashed process with the same pid can collide: the next name is taken.
int CreateTemporary(int dir_fd, const std::string& base, mode_t mode, std::string* temp_name,
                    int* slot) {
  for (int attempt = 0;; ++attempt) {
    *temp_name = TempNameFor(base);
    *slot = signal_cleanup.BeginTemporary(dir_fd, *temp_name);
    const int fd = ::openat(dir_fd, temp_name->c_str(),
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    const int error = errno;
    signal_cleanup.EndCreate();
    if (fd >= 0) return fd;
    signal_cleanup.Forget(*slot);
    *slot = -1;
    errno = error;
    if (error != EEXIST || attempt == 100) return -1;
  }
}

}  // namespace graphdump::internal
