#include "graphdump/analysis/npy_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "graphdump/analysis/ascend_convert.h"

namespace graphdump::analysis {

StatusOr<std::unique_ptr<MappedNpy>> MappedNpy::Open(const std::string& path) {
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
  const size_t size = static_cast<size_t>(st.st_size);
  std::unique_ptr<MappedNpy> npy(new MappedNpy());
  npy->path_ = path;
  if (size > 0) {
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return Status::IOError(path + ": cannot map: " + std::strerror(err));
    }
    ::madvise(map, size, MADV_SEQUENTIAL);
    npy->base_ = static_cast<const uint8_t*>(map);
    npy->mapped_size_ = size;
  }
  ::close(fd);
  static const uint8_t kEmpty[1] = {0};
  GRAPHDUMP_ASSIGN_OR_RETURN(npy->info_, ParseNpyHeader(size ? npy->base_ : kEmpty, size, path));
  const size_t available = size - npy->info_.data_offset;
  if (npy->info_.data_bytes > available) {
    return Status::Corrupt(path + ": truncated .npy: header promises " +
                           std::to_string(npy->info_.data_bytes) + " data bytes, file has " +
                           std::to_string(available));
  }
  return npy;
}

StatusOr<std::unique_ptr<MappedNpy>> MappedNpy::FromAscendDumpFile(const std::string& path,
                                                                   bool is_input, uint32_t slot) {
  GRAPHDUMP_ASSIGN_OR_RETURN(AscendHostTensor tensor,
                             LoadAscendTensor(path, is_input, static_cast<int>(slot)));
  std::unique_ptr<MappedNpy> npy(new MappedNpy());
  npy->path_ = path;
  int64_t count = 1;
  for (int64_t d : tensor.shape) count *= d;
  EncodeNpyPayload(tensor.dtype, tensor.bytes.data(), count, &npy->owned_);
  npy->info_.dtype = NpyStoredDType(tensor.dtype);
  npy->info_.descr = std::string(NpyDescr(tensor.dtype));
  npy->info_.shape = tensor.shape;
  npy->info_.data_offset = 0;
  npy->info_.data_bytes = npy->owned_.size();
  npy->base_ = npy->owned_.data();
  return npy;
}

MappedNpy::~MappedNpy() {
  if (base_ != nullptr && mapped_size_ > 0) ::munmap(const_cast<uint8_t*>(base_), mapped_size_);
}

int64_t MappedNpy::NumElements() const {
  int64_t n = 1;
  for (int64_t d : info_.shape) n *= d;
  return n;
}

}  // namespace graphdump::analysis
