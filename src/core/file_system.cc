// The POSIX file layer: directories 0700, files written under a temporary name in the same
// directory and renamed into place (so a crash or a full disk never leaves a truncated file
// under a real name), finished files 0400 (docs/layout.md).
//
// Below a file system's root, every directory is opened on its own, relative to its parent's
// descriptor (openat), with O_NOFOLLOW, and files are created and opened with O_NOFOLLOW: a
// symbolic link planted in the dump directory (a statistic.csv pointing at a file elsewhere, a
// rank_0 pointing at another directory) is refused with an error naming it, never followed.
#include "graphdump/file_system.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>  // renameat2, fopen
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "graphdump/internal/posix_files.h"

namespace graphdump {

namespace {

using internal::BaseName;
using internal::CreateTemporary;
using internal::DirFd;
using internal::DirName;
using internal::DirNameView;
using internal::ErrnoError;
using internal::ErrnoText;
using internal::Fd;
using internal::FileKind;
using internal::NotReplaceable;
using internal::PosixWritableFile;
using internal::signal_cleanup;
using internal::WriteFully;

// `path` without trailing slashes ("/" stays "/").
std::string WithoutTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// The components of `relative` ("a//b/" -> {"a", "b"}).
std::vector<std::string> Components(const std::string& relative) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start < relative.size()) {
    size_t slash = relative.find('/', start);
    if (slash == std::string::npos) slash = relative.size();
    if (slash > start) parts.push_back(relative.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

// A lock file held with flock (FileSystem::TryLock).
class PosixFileLock : public FileLock {
 public:
  PosixFileLock(DirFd dir, int fd, std::string base, int slot)
      : dir_(std::move(dir)), fd_(fd), base_(std::move(base)), slot_(slot), pid_(::getpid()) {}
  ~PosixFileLock() override {
    if (::getpid() == pid_) {
      // Removed while still held: whoever opens the name next makes a new file, and one that
      // opened this file meanwhile sees it gone once it gets the lock (TryLock checks).
      ::unlinkat(dir_->get(), base_.c_str(), 0);
      signal_cleanup.Forget(slot_);
    }
    ::close(fd_);  // releases the lock (a forked child's copy only closes its descriptor)
  }

 private:
  DirFd dir_;
  int fd_;
  std::string base_;
  int slot_;
  pid_t pid_;
};

// The error for an openat() of `name` in the directory `where` that failed with `error`: a
// symbolic link is named as such.
Status OpenError(const std::string& what, const std::string& path, int error) {
  if (error == ELOOP) {
    return Status::IOError("cannot " + what + " " + path +
                           ": it is a symbolic link, and graphdump does not write through links "
                           "(remove it)");
  }
  return ErrnoError(what, path, error);
}

// Whether the process's umask, read without changing it (/proc/self/status; false when that
// cannot be read), leaves a new file's owner-read bit.
bool UmaskKeepsOwnerRead() {
  FILE* status = std::fopen("/proc/self/status", "re");
  if (status == nullptr) return false;
  bool keeps = false;
  char line[256];
  while (std::fgets(line, sizeof(line), status) != nullptr) {
    unsigned mask = 0;
    if (std::sscanf(line, "Umask: %o", &mask) == 1) {
      keeps = (mask & S_IRUSR) == 0;
      break;
    }
  }
  std::fclose(status);
  return keeps;
}

// Creates `dir` and its missing parents with mode 0700, following any symbolic links on the
// way (the caller named the path).
Status MakeParents(const std::string& dir) {
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

class PosixFileSystem : public FileSystem {
 public:
  PosixFileSystem(bool fsync, std::string root)
      : fsync_(fsync),
        root_(root.empty() ? "" : WithoutTrailingSlashes(std::move(root))),
        create_read_only_(UmaskKeepsOwnerRead()) {}
  PosixFileSystem(const PosixFileSystem&) = delete;
  PosixFileSystem& operator=(const PosixFileSystem&) = delete;

  Status CreateDirectories(const std::string& dir) override {
    if (dir.empty()) return Status::InvalidArgument("cannot create a directory with an empty name");
    if (root_.empty()) return MakeParents(dir);
    GRAPHDUMP_RETURN_IF_ERROR(MakeParents(root_));
    return OpenDirectory(dir, /*create=*/true).status();
  }

  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    // Created with its final mode, 0400, where the umask keeps it (the new descriptor writes
    // all the same): no fchmod per file. Otherwise created 0600 and made 0400 when committed.
    const mode_t mode = create_read_only_ ? S_IRUSR : S_IRUSR | S_IWUSR;
    for (const bool checked : {false, true}) {
      GRAPHDUMP_ASSIGN_OR_RETURN(DirFd dir,
                                 OpenDirectory(DirNameView(path), false, "create", path, checked));
      std::string temp_name;
      int slot = -1;
      const int fd = CreateTemporary(dir->get(), BaseName(path), mode, &temp_name, &slot);
      if (fd < 0 && errno == ENOENT && !checked) continue;  // a removed directory (OpenDirectory)
      if (fd < 0) return ErrnoError("create", path, errno);
      return std::unique_ptr<WritableFile>(std::make_unique<PosixWritableFile>(
          std::move(dir), fd, slot, temp_name, path, fsync_, create_read_only_ ? -1 : S_IRUSR));
    }
    return ErrnoError("create", path, ENOENT);  // not reached
  }

  Status AppendToFile(const std::string& path, const std::string& data) override {
    GRAPHDUMP_ASSIGN_OR_RETURN(DirFd dir, OpenDirectory(DirName(path), false, "open", path));
    const std::string base = BaseName(path);
    bool created = false;
    GRAPHDUMP_ASSIGN_OR_RETURN(Fd fd, OpenForAppend(dir->get(), base, path, &created));
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return ErrnoError("open", path, errno);
    // Appended as one piece or not at all: a failure (a full disk) or a signal part way cuts the
    // file back to its old size, so no torn row is left under the final name.
    const int slot = signal_cleanup.BeginAppend(fd.get(), st.st_size);
    signal_cleanup.EndCreate();
    int error = WriteFully(fd.get(), data.data(), data.size());
    if (error == 0 && fsync_ && ::fsync(fd.get()) != 0) error = errno;
    if (error != 0) {
      if (created) {
        ::unlinkat(dir->get(), base.c_str(), 0);
      } else {
        (void)::ftruncate(fd.get(), st.st_size);
      }
    }
    signal_cleanup.Forget(slot);
    // Read-only again, whether the rows went in or not.
    if (::fchmod(fd.get(), S_IRUSR) != 0 && error == 0) error = errno;
    if (::close(fd.Release()) != 0 && error == 0) error = errno;
    if (error != 0) return ErrnoError("write", path, error);
    return Status::Ok();
  }

  Status LinkOrCopy(const std::string& existing, const std::string& path) override {
    const std::string from_base = BaseName(existing);
    for (const bool checked : {false, true}) {
      GRAPHDUMP_ASSIGN_OR_RETURN(
          DirFd from, OpenDirectory(DirNameView(existing), false, "open", existing, checked));
      DirFd to = from;  // usually: a tensor's names lie in one iteration directory
      if (DirNameView(path) != DirNameView(existing)) {
        GRAPHDUMP_ASSIGN_OR_RETURN(
            to, OpenDirectory(DirNameView(path), false, "create", path, checked));
      }
      if (!hard_links_.load(std::memory_order_relaxed)) {
        return CopyFile(from->get(), from_base, existing, path);
      }
      // Flags 0: a symbolic link planted under `existing` is linked itself, never followed.
      if (::linkat(from->get(), from_base.c_str(), to->get(), BaseName(path).c_str(), 0) == 0) {
        if (fsync_) (void)::fsync(to->get());  // best effort, as after a rename
        return Status::Ok();
      }
      const int error = errno;
      if (error == ENOENT && !checked) continue;  // perhaps a removed directory (OpenDirectory)
      if (error == EEXIST || error == ENOENT || error == ENOSPC || error == EROFS) {
        return ErrnoError("create", path, error);
      }
      // No hard links here (EPERM, EXDEV, ENOTSUP...): copies from now on. EMLINK is this
      // file's own limit of names.
      if (error != EMLINK) hard_links_.store(false, std::memory_order_relaxed);
      return CopyFile(from->get(), from_base, existing, path);
    }
    return ErrnoError("create", path, ENOENT);  // not reached
  }

  Status Remove(const std::string& path) override {
    GRAPHDUMP_ASSIGN_OR_RETURN(DirFd dir, OpenDirectory(DirName(path), false, "remove", path));
    if (::unlinkat(dir->get(), BaseName(path).c_str(), 0) != 0 && errno != ENOENT) {
      return ErrnoError("remove", path, errno);
    }
    return Status::Ok();
  }

  bool Exists(const std::string& path) override {
    StatusOr<DirFd> dir = OpenDirectory(DirName(path), false, "open", path);
    struct stat st;
    return dir.ok() &&
           ::fstatat((*dir)->get(), BaseName(path).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  }

  StatusOr<bool> CreateDirectoryIfAbsent(const std::string& dir) override {
    const std::string parent = DirName(dir);
    if (root_.empty() || WithoutTrailingSlashes(dir) != root_) {
      GRAPHDUMP_RETURN_IF_ERROR(CreateDirectories(parent));
      GRAPHDUMP_ASSIGN_OR_RETURN(DirFd at, OpenDirectory(parent, false, "create", dir));
      if (::mkdirat(at->get(), BaseName(dir).c_str(), S_IRWXU) == 0) return true;
      if (errno == EEXIST) return false;
      return ErrnoError("create directory", dir, errno);
    }
    GRAPHDUMP_RETURN_IF_ERROR(MakeParents(DirName(root_)));
    if (::mkdir(root_.c_str(), S_IRWXU) == 0) return true;
    if (errno == EEXIST) return false;
    return ErrnoError("create directory", dir, errno);
  }

  Status Rename(const std::string& from, const std::string& to) override {
    GRAPHDUMP_ASSIGN_OR_RETURN(DirFd source, OpenDirectory(DirName(from), false, "rename", from));
    GRAPHDUMP_ASSIGN_OR_RETURN(DirFd target, OpenDirectory(DirName(to), false, "rename", from));
    int result = ::renameat2(source->get(), BaseName(from).c_str(), target->get(),
                             BaseName(to).c_str(), RENAME_NOREPLACE);
    if (result != 0 && errno == EINVAL) {  // a file system without RENAME_NOREPLACE
      struct stat st;
      if (::fstatat(target->get(), BaseName(to).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        errno = EEXIST;
      } else {
        result = ::renameat(source->get(), BaseName(from).c_str(), target->get(),
                            BaseName(to).c_str());
      }
    }
    if (result != 0) return ErrnoError("rename " + from + " to", to, errno);
    // Remembered directories below `from` now lie below `to`.
    std::lock_guard<std::mutex> lock(mu_);
    open_dirs_.clear();
    return Status::Ok();
  }

  StatusOr<std::unique_ptr<FileLock>> TryLock(const std::string& path,
                                              std::string* holder) override {
    GRAPHDUMP_ASSIGN_OR_RETURN(DirFd dir, OpenDirectory(DirName(path), false, "lock", path));
    const std::string base = BaseName(path);
    for (int attempt = 0; attempt < 100; ++attempt) {
      Fd fd(::openat(dir->get(), base.c_str(),
                     O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, S_IRUSR | S_IWUSR));
      if (fd.get() < 0) {
        // Something planted under the lock's name (a link, a directory) is no lock: refused,
        // and nothing of the directory is touched.
        const int error = errno;
        if (error == ELOOP || error == EISDIR) {
          return Status::InvalidArgument(
              "cannot lock " + path + ": it is " +
              (error == ELOOP ? "a symbolic link" : "a directory") +
              ", not a regular file; graphdump leaves it and the dump beside it alone (remove "
              "it)");
        }
        return OpenError("create", path, error);
      }
      struct stat opened;
      if (::fstat(fd.get(), &opened) != 0) return ErrnoError("open", path, errno);
      if (!S_ISREG(opened.st_mode)) {
        return Status::InvalidArgument("cannot lock " + path + ": it is " +
                                       FileKind(opened.st_mode) +
                                       ", not a regular file; graphdump leaves it and the dump "
                                       "beside it alone (remove it)");
      }
      if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) return ErrnoError("lock", path, errno);
        char text[64];
        const ssize_t n = ::pread(fd.get(), text, sizeof(text), 0);
        holder->assign(text, n > 0 ? static_cast<size_t>(n) : 0);
        while (!holder->empty() && (holder->back() == '\n' || holder->back() == '\0')) {
          holder->pop_back();
        }
        return std::unique_ptr<FileLock>();
      }
      // Its holder may have removed the file between our open and our lock: the lock that
      // counts is on the file now under `path`.
      struct stat now;
      if (::fstatat(dir->get(), base.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0 ||
          now.st_ino != opened.st_ino || now.st_dev != opened.st_dev) {
        continue;
      }
      const std::string text = "process " + std::to_string(::getpid()) + "\n";
      // Best effort: the lock is what counts, the text only names its holder.
      if (::ftruncate(fd.get(), 0) == 0) (void)WriteFully(fd.get(), text.data(), text.size());
      const int slot = signal_cleanup.BeginTemporary(dir->get(), base);
      signal_cleanup.EndCreate();
      return std::unique_ptr<FileLock>(
          std::make_unique<PosixFileLock>(std::move(dir), fd.Release(), base, slot));
    }
    return Status::IOError("cannot lock " + path + ": it keeps being replaced");
  }

  Status RemoveTree(const std::string& dir) override {
    if (!root_.empty()) {
      // Checked like every other path: below the root, reached without links.
      StatusOr<DirFd> parent = OpenDirectory(DirName(dir), false, "remove", dir);
      if (!parent.ok()) return parent.status();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_dirs_.clear();
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);  // removes links, does not follow them
    if (ec) return Status::IOError("cannot remove " + dir + ": " + ec.message());
    return Status::Ok();
  }

 private:
  // Writes a copy of the regular file `base` in `dir_fd` (the path `existing`) as `path`.
  Status CopyFile(int dir_fd, const std::string& base, const std::string& existing,
                  const std::string& path) {
    Fd source(::openat(dir_fd, base.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st;
    if (source.get() < 0 || ::fstat(source.get(), &st) != 0) {
      return ErrnoError("open", existing, errno);
    }
    if (!S_ISREG(st.st_mode)) return Status::IOError(existing + " is not a regular file");
    GRAPHDUMP_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, NewWritableFile(path));
    std::vector<char> buffer(size_t{1} << 20);
    for (;;) {
      const ssize_t got = ::read(source.get(), buffer.data(), buffer.size());
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return ErrnoError("read", existing, errno);
      if (got == 0) break;
      GRAPHDUMP_RETURN_IF_ERROR(file->Append(buffer.data(), static_cast<size_t>(got)));
    }
    return file->Commit();
  }

  // WalkDirectory, remembering the directories opened: a dump writes many files into each (a
  // walk costs an openat per level). A remembered directory that was removed since (by another
  // program: the directory now under its name, if any, is another) is opened again. `checked`
  // false skips asking (an fstat) for the callers that find out themselves: creating a file or
  // a link in a removed directory fails with ENOENT, and they then call again with it true.
  StatusOr<DirFd> OpenDirectory(std::string_view dir, bool create, const std::string& what = "",
                                const std::string& path = "", bool checked = true) {
    std::string_view key = dir;
    while (key.size() > 1 && key.back() == '/') key.remove_suffix(1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = open_dirs_.find(key);
      struct stat st;
      if (it != open_dirs_.end()) {
        if (!checked || (::fstat(it->second->get(), &st) == 0 && st.st_nlink > 0)) {
          return it->second;
        }
        open_dirs_.erase(it);
      }
    }
    GRAPHDUMP_ASSIGN_OR_RETURN(Fd fd, WalkDirectory(std::string(dir), create, what, path));
    auto opened = std::make_shared<const Fd>(std::move(fd));
    std::lock_guard<std::mutex> lock(mu_);
    if (open_dirs_.size() >= kOpenDirs) open_dirs_.clear();
    open_dirs_.insert_or_assign(std::string(key), opened);
    return opened;
  }

  // Opens the directory `dir` (creating it and its parents below the root when `create`).
  // Below the root, each component is opened relative to its parent with O_NOFOLLOW, and the
  // root itself must not be a symbolic link; outside a root, `dir` is opened as named. Errors
  // say "cannot {what} {path}" (the file the caller is after; `dir` when empty).
  StatusOr<Fd> WalkDirectory(const std::string& dir, bool create, const std::string& what,
                             const std::string& path) {
    const std::string& target = path.empty() ? dir : path;
    const std::string verb = what.empty() ? "create directory" : what;
    if (root_.empty()) {
      const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) return ErrnoError(verb, target, errno);
      return Fd(fd);
    }
    const std::string normal = WithoutTrailingSlashes(dir);
    const bool below = normal == root_ || (normal.compare(0, root_.size(), root_) == 0 &&
                                           (root_ == "/" || normal[root_.size()] == '/'));
    if (!below) {
      return Status::InvalidArgument("cannot " + verb + " " + target + ": it is outside " + root_ +
                                     ", the directory being written");
    }
    Fd current(::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (current.get() < 0) {
      const int error = errno;
      struct stat st;
      if (::lstat(root_.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
        return Status::IOError("cannot " + verb + " " + target + ": " + root_ +
                               " is a symbolic link; graphdump writes only into a real directory "
                               "(name the directory the link points to)");
      }
      if (error == ENOTDIR) {
        return Status::IOError("cannot " + verb + " " + target + ": " + root_ +
                               " exists and is not a directory");
      }
      return ErrnoError(verb, target, error);
    }
    std::string walked = root_ == "/" ? "" : root_;
    for (const std::string& part : Components(normal.substr(root_.size()))) {
      walked += "/" + part;
      if (part == "." || part == "..") {
        return Status::InvalidArgument("cannot " + verb + " " + target + ": '" + part +
                                       "' in a path below " + root_);
      }
      if (create && ::mkdirat(current.get(), part.c_str(), S_IRWXU) != 0 && errno != EEXIST) {
        return ErrnoError("create directory", walked, errno);
      }
      Fd next(
          ::openat(current.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (next.get() < 0) {
        const int error = errno;
        struct stat st;
        if (::fstatat(current.get(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
          if (S_ISLNK(st.st_mode)) {
            return Status::IOError("cannot " + verb + " " + target + ": " + walked +
                                   " is a symbolic link, and graphdump does not follow links "
                                   "below " +
                                   root_ + " (remove it)");
          }
          if (!S_ISDIR(st.st_mode)) {
            return Status::IOError("cannot " + verb + " " + target + ": " + walked +
                                   " exists and is not a directory");
          }
        }
        return ErrnoError(verb, target, error);
      }
      current = std::move(next);
    }
    return current;
  }

  // Opens `base` in `dir_fd` for appending, creating it (0600) when missing. An existing file
  // is made writable (0600) through a read-only descriptor first, so that neither open follows
  // a symbolic link or blocks on a FIFO.
  StatusOr<Fd> OpenForAppend(int dir_fd, const std::string& base, const std::string& path,
                             bool* created) {
    constexpr int kWrite = O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC;
    Fd fd(::openat(dir_fd, base.c_str(), kWrite | O_CREAT | O_EXCL, S_IRUSR | S_IWUSR));
    if (fd.get() >= 0) {
      *created = true;
      return fd;
    }
    if (errno != EEXIST) return OpenError("open", path, errno);
    Fd existing(::openat(dir_fd, base.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (existing.get() < 0) return OpenError("open", path, errno);
    struct stat before, after;
    if (::fstat(existing.get(), &before) != 0) return ErrnoError("open", path, errno);
    if (!S_ISREG(before.st_mode)) {
      return Status::IOError("cannot open " + path + ": it is not a regular file");
    }
    // The file is read-only between appends (0400).
    if (::fchmod(existing.get(), S_IRUSR | S_IWUSR) != 0) {
      return ErrnoError("set permissions of", path, errno);
    }
    fd = Fd(::openat(dir_fd, base.c_str(), kWrite));
    if (fd.get() < 0) return OpenError("open", path, errno);
    if (::fstat(fd.get(), &after) != 0 || after.st_ino != before.st_ino ||
        after.st_dev != before.st_dev) {
      return Status::IOError("cannot open " + path + ": it was replaced while being opened");
    }
    return fd;
  }

  static constexpr size_t kOpenDirs = 64;
  bool fsync_;
  std::string root_;  // "" when not confined
  const bool create_read_only_;  // files are created 0400 (the umask keeps S_IRUSR)
  std::atomic<bool> hard_links_{true};  // false once the file system refused one
  std::mutex mu_;
  std::map<std::string, DirFd, std::less<>> open_dirs_;  // by path without trailing '/'
};

}  // namespace

Status FileSystem::WriteWholeFile(const std::string& path, const std::string& data) {
  GRAPHDUMP_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, NewWritableFile(path));
  GRAPHDUMP_RETURN_IF_ERROR(file->Append(data.data(), data.size()));
  return file->Commit();
}

std::shared_ptr<FileSystem> NewPosixFileSystem(bool fsync, std::string root) {
  return std::make_shared<PosixFileSystem>(fsync, std::move(root));
}
}  // namespace graphdump
