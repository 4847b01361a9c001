#include "graphdump/analysis/npy_file.h"

#include <cstring>

#include "graphdump/analysis/ascend_convert.h"
#include "graphdump/shape.h"

namespace graphdump::analysis {

StatusOr<std::unique_ptr<MappedNpy>> MappedNpy::Open(const std::string& path) {
  std::unique_ptr<MappedNpy> npy(new MappedNpy());
  npy->path_ = path;
  GRAPHDUMP_ASSIGN_OR_RETURN(npy->file_, MappedFile::Open(path));
  npy->base_ = npy->file_->data();
  const size_t size = npy->file_->size();
  GRAPHDUMP_ASSIGN_OR_RETURN(npy->info_, ParseNpyHeader(npy->base_, size, path));
  GRAPHDUMP_RETURN_IF_ERROR(CheckNpyDataSize(npy->info_, size, path));
  return npy;
}

StatusOr<std::unique_ptr<MappedNpy>> MappedNpy::FromAscendDumpFile(const std::string& path,
                                                                   bool is_input, uint32_t slot) {
  GRAPHDUMP_ASSIGN_OR_RETURN(AscendHostTensor tensor,
                             LoadAscendTensor(path, is_input, static_cast<int>(slot)));
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
