// The POSIX file layer: directories 0700, files written under a temporary name in the same
// directory and renamed into place (so a crash or a full disk never leaves a truncated file
// under a real name), finished files 0400 (SPEC §5).
#include "graphdump/file_system.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

namespace graphdump {
namespace {

constexpr size_t kNameMax = 255;

// strerror is not thread-safe; the async writers report errors from several threads.
std::string ErrnoText(int error) {
  char buffer[256];
  return strerror_r(error, buffer, sizeof(buffer));  // GNU version: returns the message
}

Status ErrnoError(const std::string& what, const std::string& path, int error) {
  return Status::IOError("cannot " + what + " " + path + ": " + ErrnoText(error));
}

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Writes all of `data`, retrying short writes and EINTR. Returns 0 or the errno.
int WriteFully(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return 0;
}

// ".{basename}.tmp.{pid}.{n}" in the same directory (so rename stays on one file system),
// with the basename shortened so the temporary name fits NAME_MAX.
std::string TempPathFor(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  const std::string suffix = ".tmp." + std::to_string(::getpid()) + "." +
                             std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
  std::string base = BaseName(path);
  const size_t room = kNameMax - 1 - suffix.size();
  if (base.size() > room) base.resize(room);
  const std::string dir = DirName(path);
  return (dir == "/" ? "" : dir) + "/." + base + suffix;
}

// The temporaries being written, for the handler RemoveTemporariesOnSignals installs: a fixed
// table of slots, since a signal handler may neither lock nor allocate. A temporary that finds
// every slot taken is not tracked (and is left behind if the process is killed).
class LiveTemporaries {
 public:
  // Returns the slot to pass to Forget, or -1 when not tracked.
  int Track(const std::string& path) {
    if (path.size() >= PATH_MAX) return -1;
    for (int i = 0; i < kSlots; ++i) {
      int expected = kFree;
      if (!states_[i].compare_exchange_strong(expected, kClaimed)) continue;
      std::memcpy(paths_[i], path.c_str(), path.size() + 1);
      states_[i].store(kLive, std::memory_order_release);
      return i;
    }
    return -1;
  }

  void Forget(int slot) {
    if (slot >= 0) states_[slot].store(kFree, std::memory_order_release);
  }

  // Async-signal-safe.
  void UnlinkAll() {
    for (int i = 0; i < kSlots; ++i) {
      if (states_[i].load(std::memory_order_acquire) == kLive) ::unlink(paths_[i]);
    }
  }

 private:
  static constexpr int kSlots = 256;  // writer threads times files open at once, with room
  enum { kFree, kClaimed, kLive };
  static_assert(std::atomic<int>::is_always_lock_free);
  std::atomic<int> states_[kSlots] = {};
  char paths_[kSlots][PATH_MAX] = {};  // zero pages until a slot is used
};

// Constant-initialised (no constructor runs, nothing to destroy), so the handler may use it at
// any time.
constinit LiveTemporaries live_temporaries;

void UnlinkTemporariesAndDie(int signal) {
  live_temporaries.UnlinkAll();
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

// Creates the temporary `path` is written through, with `mode`; returns its descriptor, or -1
// with errno set. A temporary left by a crashed process with the same pid can collide: the next
// name is taken.
int CreateTemporary(const std::string& path, mode_t mode, std::string* temp_path) {
  for (int attempt = 0;; ++attempt) {
    *temp_path = TempPathFor(path);
    const int fd = ::open(temp_path->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd >= 0 || errno != EEXIST || attempt == 100) return fd;
  }
}

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(int fd, std::string temp_path, std::string path, bool fsync)
      : fd_(fd),
        temp_path_(std::move(temp_path)),
        path_(std::move(path)),
        fsync_(fsync),
        slot_(live_temporaries.Track(temp_path_)) {}

  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_path_.c_str());
    live_temporaries.Forget(slot_);
  }

  Status Append(const void* data, size_t size) override {
    if (fd_ < 0) return Status::Internal("append to " + path_ + " after commit");
    const int error = WriteFully(fd_, data, size);
    if (error != 0) return ErrnoError("write", path_, error);
    return Status::Ok();
  }

  Status Commit() override {
    if (fd_ < 0) return Status::Internal("commit of " + path_ + " twice");
    if (fsync_ && ::fsync(fd_) != 0) return ErrnoError("sync", path_, errno);
    if (::fchmod(fd_, S_IRUSR) != 0) return ErrnoError("set permissions of", path_, errno);
    const int fd = fd_;
    fd_ = -1;
    // close() can report a delayed write error (NFS, quotas).
    if (::close(fd) != 0) return ErrnoError("write", path_, errno);
    if (::rename(temp_path_.c_str(), path_.c_str()) != 0)
      return ErrnoError("rename to", path_, errno);
    committed_ = true;
    if (fsync_) SyncDirectory();
    return Status::Ok();
  }

 private:
  // Makes the rename durable; best effort (some file systems refuse to sync directories).
  void SyncDirectory() {
    const int dir = ::open(DirName(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return;
    (void)::fsync(dir);
    ::close(dir);
  }

  int fd_;
  std::string temp_path_;
  std::string path_;
  bool fsync_;
  int slot_;
  bool committed_ = false;
};

class PosixFileSystem : public FileSystem {
 public:
  explicit PosixFileSystem(bool fsync) : fsync_(fsync) {}

  Status CreateDirectories(const std::string& dir) override {
    if (dir.empty()) return Status::InvalidArgument("cannot create a directory with an empty name");
    size_t pos = 0;
    while (pos != std::string::npos) {
      pos = dir.find('/', pos + 1);
      const std::string prefix = dir.substr(0, pos);
      if (prefix.empty() || prefix == "/") continue;
      if (::mkdir(prefix.c_str(), S_IRWXU) == 0) continue;
      const int error = errno;
      struct stat st;
      if (error == EEXIST && ::stat(prefix.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode)) continue;
        return Status::IOError("cannot create directory " + dir + ": " + prefix +
                               " exists and is not a directory");
      }
      return ErrnoError("create directory", prefix, error);
    }
    return Status::Ok();
  }

  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    std::string temp_path;
    const int fd = CreateTemporary(path, S_IRUSR | S_IWUSR, &temp_path);
    if (fd < 0) return ErrnoError("create", path, errno);
    return std::unique_ptr<WritableFile>(
        std::make_unique<PosixWritableFile>(fd, temp_path, path, fsync_));
  }

  Status AppendToFile(const std::string& path, const std::string& data) override {
    // The file is read-only between appends (0400); open it for writing as 0600.
    if (::chmod(path.c_str(), S_IRUSR | S_IWUSR) != 0 && errno != ENOENT) {
      return ErrnoError("set permissions of", path, errno);
    }
    const int fd =
        ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, S_IRUSR | S_IWUSR);
    if (fd < 0) return ErrnoError("open", path, errno);
    int error = WriteFully(fd, data.data(), data.size());
    if (error == 0 && fsync_ && ::fsync(fd) != 0) error = errno;
    if (::close(fd) != 0 && error == 0) error = errno;
    if (error != 0) return ErrnoError("write", path, error);
    if (::chmod(path.c_str(), S_IRUSR) != 0) return ErrnoError("set permissions of", path, errno);
    return Status::Ok();
  }

  bool Exists(const std::string& path) override {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
  }

 private:
  bool fsync_;
};

}  // namespace

std::string OutputPathProblem(const std::string& path) {
  if (path.empty()) return "the path is empty";
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return path + " is a directory";
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

Status WriteUserFile(const std::string& path, std::initializer_list<std::string_view> pieces) {
  std::string temp_path;
  const int fd = CreateTemporary(path, 0666, &temp_path);
  if (fd < 0) return ErrnoError("create", path, errno);
  const int slot = live_temporaries.Track(temp_path);
  int error = 0;
  for (std::string_view piece : pieces) {
    if (error == 0) error = WriteFully(fd, piece.data(), piece.size());
  }
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error == 0 && ::rename(temp_path.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) ::unlink(temp_path.c_str());
  live_temporaries.Forget(slot);
  return error == 0 ? Status::Ok() : ErrnoError("write", path, error);
}

void RemoveTemporariesOnSignals() {
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old;
    if (::sigaction(signal, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;
    struct sigaction action = {};
    action.sa_handler = UnlinkTemporariesAndDie;
    sigemptyset(&action.sa_mask);
    ::sigaction(signal, &action, nullptr);
  }
}

Status FileSystem::WriteWholeFile(const std::string& path, const std::string& data) {
  GRAPHDUMP_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, NewWritableFile(path));
  GRAPHDUMP_RETURN_IF_ERROR(file->Append(data.data(), data.size()));
  return file->Commit();
}

std::shared_ptr<FileSystem> NewPosixFileSystem(bool fsync) {
  return std::make_shared<PosixFileSystem>(fsync);
}

}  // namespace graphdump
