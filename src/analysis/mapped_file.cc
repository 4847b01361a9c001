#include "graphdump/analysis/mapped_file.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "graphdump/file_system.h"

namespace graphdump::analysis {

StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path, bool populate) {
  GRAPHDUMP_ASSIGN_OR_RETURN(ReadableFile opened, OpenRegularFile(path));
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->size_ = static_cast<size_t>(opened.size());
  if (file->size_ > 0 && file->size_ <= kReadLimit) {
    GRAPHDUMP_RETURN_IF_ERROR(opened.Read(0, file->size_, &file->read_));
    file->data_ = reinterpret_cast<const uint8_t*>(file->read_.data());
  } else if (file->size_ > 0) {
    void* map = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE | (populate ? MAP_POPULATE : 0),
                       opened.fd(), 0);
    if (map == MAP_FAILED) {
      const int err = errno;
      return Status::IOError(path + ": cannot map: " + std::strerror(err));
    }
    ::madvise(map, file->size_, MADV_SEQUENTIAL);
    file->data_ = static_cast<const uint8_t*>(map);
    file->mapped_ = true;
  }
  return file;
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace graphdump::analysis
