#include "graphdump/analysis/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace graphdump::analysis {

StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path, bool populate) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string message = path + ": cannot open: " + std::strerror(err);
    return err == ENOENT ? Status::NotFound(message) : Status::IOError(message);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::IOError(path + ": cannot stat: " + std::strerror(err));
  }
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* map =
        ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd, 0);
    if (map == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return Status::IOError(path + ": cannot map: " + std::strerror(err));
    }
    ::madvise(map, file->size_, MADV_SEQUENTIAL);
    file->data_ = static_cast<const uint8_t*>(map);
  }
  ::close(fd);
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace graphdump::analysis
