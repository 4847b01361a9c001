#include "graphdump/analysis/npy_file.h"

#include <cstring>

#include "graphdump/analysis/ascend_convert.h"
#include "graphdump/shape.h"

namespace graphdump::analysis {

StatusOr<std::unique_ptr<MappedNpy>> MappedNpy::Open(const std::string& path) {
  std::unique_ptr<MappedNpy> npy(new MappedNpy());
  npy->path_ = path;
  GRAPHDUMP_ASSIGN_OR_RETURN(npy->file_, MappedFile::Open(path));
  GRAPHDUMP_RETURN_IF_ERROR(npy->ReadHeader(npy->file_->data(), npy->file_->size()));
  return npy;
}

StatusOr<std::unique_ptr<MappedNpy>> MappedNpy::FromBytes(std::vector<uint8_t> bytes,
                                                          const std::string& path) {
  std::unique_ptr<MappedNpy> npy(new MappedNpy());
  npy->path_ = path;
  npy->owned_ = std::move(bytes);
  GRAPHDUMP_RETURN_IF_ERROR(npy->ReadHeader(npy->owned_.data(), npy->owned_.size()));
  return npy;
}

Status MappedNpy::ReadHeader(const uint8_t* base, size_t size) {
  base_ = base;
  GRAPHDUMP_ASSIGN_OR_RETURN(info_, ParseNpyHeader(base, size, path_));
  return CheckNpyDataSize(info_, size, path_);
}

StatusOr<std::unique_ptr<MappedNpy>> MappedNpy::FromAscendTensor(const std::string& path,
                                                                 const AscendTensor& tensor) {
  GRAPHDUMP_ASSIGN_OR_RETURN(AscendHostTensor host, LoadAscendTensor(path, tensor));
  return FromHostTensor(path, std::move(host));
}

StatusOr<std::unique_ptr<MappedNpy>> MappedNpy::FromAscendDumpFile(const std::string& path,
                                                                   bool is_input, uint32_t slot) {
  GRAPHDUMP_ASSIGN_OR_RETURN(AscendHostTensor host,
                             LoadAscendTensor(path, is_input, static_cast<int>(slot)));
  return FromHostTensor(path, std::move(host));
}

std::unique_ptr<MappedNpy> MappedNpy::FromHostTensor(const std::string& path,
                                                     AscendHostTensor tensor) {
  std::unique_ptr<MappedNpy> npy(new MappedNpy());
  npy->path_ = path;
  // LoadAscendTensor's shapes are checked (ParseAscendDump): the count fits int64_t.
  const int64_t count = ShapeElements(tensor.shape).value_or(0);
  EncodeNpyPayload(tensor.dtype, tensor.bytes.data(), count, &npy->owned_);
  npy->info_.dtype = NpyStoredDType(tensor.dtype);
  npy->info_.descr = std::string(NpyDescr(tensor.dtype));
  npy->info_.shape = tensor.shape;
  npy->info_.elements = count;
  npy->info_.data_offset = 0;
  npy->info_.data_bytes = npy->owned_.size();
  npy->base_ = npy->owned_.data();
  return npy;
}

MappedNpy::~MappedNpy() = default;

int64_t MappedNpy::NumElements() const { return info_.elements; }

}  // namespace graphdump::analysis
