#include "graphdump/internal/tensor_writer.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "graphdump/npy.h"

namespace graphdump {
namespace {

Status ValidateView(const std::string& path, const TensorView& view) {
  // The message prefix, made only for a view that is refused.
  auto what = [&] { return "tensor for " + path + ": "; };
  if (view.device != "cpu") {
    return Status::Unsupported(what() + "data is on device '" + view.device +
                               "'; only host (cpu) memory can be written");
  }
  for (int64_t dim : view.shape) {
    if (dim < 0)
      return Status::InvalidArgument(what() + "negative dimension in shape " +
                                     ShapeToString(view.shape));
  }
  if (!view.strides.empty() && view.strides.size() != view.shape.size()) {
    return Status::InvalidArgument(what() + std::to_string(view.strides.size()) +
                                   " strides for shape " + ShapeToString(view.shape));
  }
  if (view.dtype == DType::kInt4 && !view.strides.empty()) {
    // A packed int4 element is half a byte, so only the contiguous layout is meaningful
    // (TensorView::IsContiguous assumes it; check the strides as if elements were bytes).
    TensorView as_bytes = view;
    as_bytes.dtype = DType::kInt8;
    if (!as_bytes.IsContiguous()) {
      return Status::InvalidArgument(what() + "int4 tensors must be contiguous");
    }
  }
  if (view.data == nullptr && view.NumElements() > 0) {
    return Status::InvalidArgument(what() + "no data for " + std::to_string(view.NumElements()) +
                                   " elements");
  }
  return Status::Ok();
}

// Pieces of at least this size go to the file from their own memory, behind what is pending, in
// one call: a gathered piece (ForEachContiguousChunk's buffer: whole chunks, then the rest) is
// not copied again; only small pieces are joined first.
constexpr size_t kDirectBytes = size_t{4} << 10;

// Collects the .npy bytes and hands them to the file in pieces of about `chunk_bytes`.
class NpySink {
 public:
  NpySink(WritableFile* file, DType dtype, size_t chunk_bytes)
      : file_(file), dtype_(dtype), chunk_bytes_(chunk_bytes) {}

  void AddHeader(const std::string& header) { pending_.assign(header.begin(), header.end()); }

  // Adds `count` elements (memory layout) from `bytes`.
  void AddElements(const uint8_t* bytes, int64_t count) {
    if (!status_.ok() || count <= 0) return;
    if (NpyPayloadIsIdentity(dtype_)) {
      const size_t size = DTypeStorageBytes(dtype_, count);
      if (size >= std::min(kDirectBytes, chunk_bytes_) || pending_.size() + size >= chunk_bytes_) {
        // Large pieces go straight from their memory to the file, without a copy.
        WriteTwo(pending_.data(), pending_.size(), bytes, size);
        pending_.clear();
        return;
      }
      pending_.insert(pending_.end(), bytes, bytes + size);
    } else {
      EncodeNpyPayload(dtype_, bytes, count, &pending_);
    }
    if (pending_.size() >= chunk_bytes_) Flush();
  }

  void Flush() {
    if (pending_.empty()) return;
    Write(pending_.data(), pending_.size());
    pending_.clear();
  }

  const Status& status() const { return status_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  void Write(const void* data, size_t size) {
    if (!status_.ok()) return;
    status_ = file_->Append(data, size);
    bytes_written_ += size;
  }
  void WriteTwo(const void* first, size_t first_size, const void* second, size_t second_size) {
    if (!status_.ok()) return;
    status_ = file_->AppendTwo(first, first_size, second, second_size);
    bytes_written_ += first_size + second_size;
  }

  WritableFile* file_;
  DType dtype_;
  size_t chunk_bytes_;
  std::vector<uint8_t> pending_;
  Status status_;
  uint64_t bytes_written_ = 0;
};

}  // namespace

StatusOr<TensorWriteResult> WriteTensor(FileSystem& fs, const std::string& path,
                                        const TensorView& view, const TensorWriteOptions& options) {
  GRAPHDUMP_RETURN_IF_ERROR(ValidateView(path, view));
  const int64_t count = view.NumElements();
  const bool sampled = options.max_elements > 0 && count > options.max_elements;
  const int64_t file_count = sampled ? options.max_elements : count;
  const size_t chunk_bytes = std::max<size_t>(options.chunk_bytes, 64);

  std::unique_ptr<WritableFile> file;
  std::optional<NpySink> sink;
  std::string header;
  if (options.write_npy) {
    GRAPHDUMP_ASSIGN_OR_RETURN(file, fs.NewWritableFile(path));
    sink.emplace(file.get(), view.dtype, chunk_bytes);
    header = NpyHeader(view.dtype, sampled ? Dims{file_count} : view.shape);
    sink->AddHeader(header);
  }
  std::optional<StatsAccumulator> stats;
  if (options.stats) stats.emplace(view.dtype, *options.stats);

  const bool packed = view.dtype == DType::kInt4;
  const size_t item = packed ? 1 : DTypeBits(view.dtype) / 8;
  // In sample mode without statistics only the sampled prefix needs reading.
  TensorView prefix;
  const bool prefix_only = sampled && !stats && view.IsContiguous();
  if (prefix_only) {
    prefix = view;
    prefix.shape = {file_count};
    prefix.strides.clear();
  }
  const TensorView& visited = prefix_only ? prefix : view;
  const int64_t visited_count = visited.NumElements();
  int64_t seen = 0;  // elements visited so far
  if (sink && !stats && NpyPayloadIsIdentity(view.dtype) && visited.IsContiguous()) {
    // The file's bytes are the header and the memory as it lies: both go to the file in one
    // call, without gathering them into pieces first (a tensor dump's usual tensor).
    const size_t data_bytes = DTypeStorageBytes(view.dtype, file_count);
    GRAPHDUMP_RETURN_IF_ERROR(file->AppendTwo(header.data(), header.size(), visited.data,
                                              file_count > 0 ? data_bytes : 0));
    GRAPHDUMP_RETURN_IF_ERROR(file->Commit());
    TensorWriteResult result;
    result.file_bytes = header.size() + (file_count > 0 ? data_bytes : 0);
    return result;
  }
  if (!sink && view.IsContiguous()) {
    // Statistics only, from plain memory: one call, which may spread the reading over cores.
    if (stats) stats->Update(static_cast<const uint8_t*>(view.data), view.ContiguousBytes(), count);
  } else {
    ForEachContiguousChunk(visited, chunk_bytes, [&](const uint8_t* bytes, size_t size) {
      const int64_t elements =
          packed ? std::min<int64_t>(2 * static_cast<int64_t>(size), visited_count - seen)
                 : static_cast<int64_t>(size / item);
      if (stats) stats->Update(bytes, size, elements);
      // Pieces start on byte boundaries, so an int4 piece always starts at an even element.
      if (sink && seen < file_count)
        sink->AddElements(bytes, std::min(elements, file_count - seen));
      seen += elements;
    });
  }

  TensorWriteResult result;
  if (sink) {
    sink->Flush();
    GRAPHDUMP_RETURN_IF_ERROR(sink->status());
    GRAPHDUMP_RETURN_IF_ERROR(file->Commit());
    result.file_bytes = sink->bytes_written();
  }
  if (stats) result.stats = stats->Finish();
  return result;
}

}  // namespace graphdump
