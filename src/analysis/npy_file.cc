#include "graphdump/analysis/npy_file.h"

#include <cstring>

#include "graphdump/analysis/ascend_convert.h"

namespace graphdump::analysis {

StatusOr<std::unique_ptr<MappedNpy>> MappedNpy::Open(const std::string& path) {
  std::unique_ptr<MappedNpy> npy(new MappedNpy());
  npy->path_ = path;
  GRAPHDUMP_ASSIGN_OR_RETURN(npy->file_, MappedFile::Open(path));
  npy->base_ = npy->file_->data();
  const size_t size = npy->file_->size();
  GRAPHDUMP_ASSIGN_OR_RETURN(npy->info_, ParseNpyHeader(npy->base_, size, path));
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

MappedNpy::~MappedNpy() = default;

int64_t MappedNpy::NumElements() const {
  int64_t n = 1;
  for (int64_t d : info_.shape) n *= d;
  return n;
}

}  // namespace graphdump::analysis
