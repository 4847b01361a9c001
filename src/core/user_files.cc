// The user's own files: reading a file a user names (a regular file only, never a FIFO that
// would block), checking and writing an output path a user gives (--out, -o), replaced whole
// through a temporary and never written through a FIFO, device or symbolic link
// (docs/reliability.md, "Output files").
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>

#include "graphdump/file_system.h"
#include "graphdump/internal/posix_files.h"

namespace graphdump {

using internal::BaseName;
using internal::CreateTemporary;
using internal::DirName;
using internal::ErrnoError;
using internal::ErrnoText;
using internal::Fd;
using internal::FileKind;
using internal::NotReplaceable;
using internal::PosixWritableFile;

ReadableFile::ReadableFile(ReadableFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), size_(other.size_) {
  other.fd_ = -1;
}

ReadableFile& ReadableFile::operator=(ReadableFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    size_ = other.size_;
    other.fd_ = -1;
  }
  return *this;
}

ReadableFile::~ReadableFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status ReadableFile::Read(uint64_t offset, uint64_t n, std::string* out) const {
  if (offset > size_ || n > size_ - offset) {
    return Status::IOError(path_ + ": cannot read " + std::to_string(n) + " bytes at offset " +
                           std::to_string(offset) + ": the file has " + std::to_string(size_));
  }
  out->resize(n);
  uint64_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd_, out->data() + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const int error = errno;
      return Status::IOError(
          path_ + ": read failed: " + (r < 0 ? ErrnoText(error) : std::string("the file shrank")));
    }
    done += static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

StatusOr<ReadableFile> OpenRegularFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    const std::string message = path + ": cannot open: " + ErrnoText(error);
    return error == ENOENT ? Status::NotFound(message) : Status::IOError(message);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    return Status::IOError(path + ": cannot stat: " + ErrnoText(error));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + ": cannot read it: it is " + FileKind(st.st_mode) +
                                   ", not a regular file");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return ReadableFile(path, fd, static_cast<uint64_t>(st.st_size));
}

StatusOr<std::string> ReadRegularFile(const std::string& path) {
  GRAPHDUMP_ASSIGN_OR_RETURN(ReadableFile file, OpenRegularFile(path));
  std::string text;
  GRAPHDUMP_RETURN_IF_ERROR(file.Read(0, file.size(), &text));
  return text;
}

std::string OutputPathProblem(const std::string& path) {
  if (path.empty()) return "the path is empty";
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return path + " is a directory";
  if (const std::string why = NotReplaceable(AT_FDCWD, path); !why.empty()) return why;
  const std::string dir = DirName(path);
  if (::stat(dir.c_str(), &st) != 0) {
    const int error = errno;
    return "directory " + dir + ": " + ErrnoText(error);
  }
  if (!S_ISDIR(st.st_mode)) return dir + " is not a directory";
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    const int error = errno;
    return "cannot write in directory " + dir + ": " + ErrnoText(error);
  }
  return "";
}

StatusOr<std::unique_ptr<WritableFile>> NewUserFile(const std::string& path) {
  auto dir =
      std::make_shared<const Fd>(::open(DirName(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir->get() < 0) return ErrnoError("create", path, errno);
  // Refused before a temporary is made next to it (Commit checks again).
  if (const std::string why = NotReplaceable(dir->get(), BaseName(path)); !why.empty()) {
    return Status::InvalidArgument("cannot write " + path + ": " + why);
  }
  std::string temp_name;
  int slot = -1;
  const int fd = CreateTemporary(dir->get(), BaseName(path), 0666, &temp_name, &slot);
  if (fd < 0) return ErrnoError("create", path, errno);
  return std::unique_ptr<WritableFile>(std::make_unique<PosixWritableFile>(
      std::move(dir), fd, slot, temp_name, path, /*fsync=*/false, /*final_mode=*/-1));
}

Status WriteUserFile(const std::string& path, std::initializer_list<std::string_view> pieces) {
  GRAPHDUMP_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, NewUserFile(path));
  for (std::string_view piece : pieces) {
    GRAPHDUMP_RETURN_IF_ERROR(file->Append(piece.data(), piece.size()));
  }
  return file->Commit();
}

}  // namespace graphdump
