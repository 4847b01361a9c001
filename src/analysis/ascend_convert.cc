#include "graphdump/analysis/ascend_convert.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "fmt/format.h"
#include "graphdump/analysis/ascend_format.h"
#include "graphdump/analysis/mapped_file.h"
#include "graphdump/internal/buffer_pool.h"
#include "graphdump/npy.h"
#include "graphdump/shape.h"

namespace graphdump {
namespace {

using analysis::MappedFile;

namespace fs = std::filesystem;

constexpr size_t kMaxFileNameBytes = 255;

std::string ShapeName(const std::vector<int64_t>& shape) {
  return fmt::format("{}", fmt::join(shape, "x"));
}

// A short stand-in for a name that is too long for the file system: a decimal FNV-1a hash, so
// that converting the same file twice gives the same name, whatever the thread order.
std::string ShortName(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return fmt::format("{}.npy", h);
}

// mapping.csv lines collected while converting, written once per directory at the end.
class MappingRegistry {
 public:
  void Add(const std::string& dir, const std::string& short_name, const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    lines_[dir].insert(short_name + "," + name);
  }
  Status Write(FileSystem& file_system) {
    for (auto& [dir, lines] : lines_) {
      const std::string path = dir + "/mapping.csv";
      // The lines of an earlier conversion into the same directory are kept.
      StatusOr<std::string> existing = ReadRegularFile(path);
      if (existing.ok()) {
        for (const auto& [short_name, name] : ParseMappingCsv(*existing)) {
          lines.insert(short_name + "," + name);
        }
      }
      std::string text;
      for (const std::string& line : lines) text += line + "\n";
      GRAPHDUMP_RETURN_IF_ERROR(file_system.WriteWholeFile(path, text));
    }
    return Status::Ok();
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::set<std::string>> lines_;
};

// What one tensor becomes: the dtype and shape of the .npy and where its elements are.
struct PreparedTensor {
  DType dtype = DType::kUInt8;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // memory layout of dtype, C order, or device layout to convert
  int64_t count = 0;
  std::optional<DeviceTensorDesc> conversion;  // set: `data` is converted on the way out
  HostRows rows;                               // with `conversion`: the units it is done in
  std::string note;  // why it stays in device layout, when a conversion was asked for
};

std::string Describe(const AscendTensor& t) {
  return fmt::format("{}[{}] ({} {} ({}))", t.io(), t.index, AscendFormatName(t.format),
                     AscendDataTypeName(t.data_type), fmt::join(t.shape, ","));
}

// Shapes of a parsed dump file have counts that fit int64_t (ParseAscendDump checks them).
int64_t Count(const std::vector<int64_t>& shape) { return ShapeElements(shape).value_or(0); }

// Puts `t` (bytes at `src`) into host layout when `convert` is set and a conversion exists.
PreparedTensor Prepare(const AscendTensor& t, const uint8_t* src, bool convert) {
  PreparedTensor out;
  std::optional<DType> dtype = AscendDataTypeToDType(t.data_type);
  if (!dtype) {
    out.dtype = DType::kUInt8;
    out.shape = {static_cast<int64_t>(t.size)};
    out.data = src;
    out.count = static_cast<int64_t>(t.size);
    out.note = fmt::format("NumPy has no type for {}: saved as {} raw bytes (uint8)",
                           AscendDataTypeName(t.data_type), t.size);
    return out;
  }
  out.dtype = *dtype;
  out.shape = t.shape;
  out.data = src;
  out.count = Count(t.shape);
  if (!convert || IsHostAscendFormat(t.format)) return out;
  if (!IsConvertibleAscendFormat(t.format)) {
    out.note = fmt::format("no conversion from {} to a host layout: saved in device layout",
                           AscendFormatName(t.format));
    return out;
  }
  if (t.original_shape.empty()) {
    out.note = "original_shape is empty: saved in device layout";
    return out;
  }
  if (DTypeBits(*dtype) % 8 != 0) {
    out.note = fmt::format("packed {} elements cannot be rearranged: saved in device layout",
                           AscendDataTypeName(t.data_type));
    return out;
  }
  DeviceTensorDesc desc{t.format, DTypeBits(*dtype) / 8, t.shape, t.original_shape, t.sub_format};
  StatusOr<HostRows> rows = AscendHostRows(desc);
  if (!rows.ok()) {
    out.note = rows.status().message() + ": saved in device layout";
    return out;
  }
  out.shape = t.original_shape;
  out.count = Count(out.shape);
  out.rows = *rows;
  out.conversion = std::move(desc);
  return out;
}

class Converter {
 public:
  Converter(const AscendConvertOptions& options, FileSystem& file_system, MappingRegistry& mapping)
      : options_(options), fs_(file_system), mapping_(mapping) {}

  // Converts one file; returns the first error. Counts go to the atomics.
  Status Convert(const AscendConvertJob& job) {
    GRAPHDUMP_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file,
                               MappedFile::Open(job.path, /*populate=*/true));
    GRAPHDUMP_ASSIGN_OR_RETURN(AscendDumpFile dump,
                               ParseAscendDump(file->data(), file->size(), job.path));
    const std::string dir = job.relative_dir.empty() ? options_.output_dir
                                                     : options_.output_dir + "/" + job.relative_dir;
    GRAPHDUMP_RETURN_IF_ERROR(fs_.CreateDirectories(dir));
    const std::string basename =
        job.name.empty() ? fs::path(job.path).filename().string() : job.name;
    for (const auto* list : {&dump.inputs, &dump.outputs}) {
      for (const AscendTensor& t : *list) {
        if (t.absent()) continue;
        GRAPHDUMP_RETURN_IF_ERROR(WriteTensor(job.path, basename, dir, t, file->data() + t.offset));
      }
    }
    return Status::Ok();
  }

  std::atomic<size_t> tensors{0};
  std::atomic<uint64_t> bytes_read{0};
  std::atomic<uint64_t> bytes_written{0};
  std::atomic<size_t> warnings{0};

 private:
  // A converted tensor is written about kSliceBytes at a time (whole host rows, at least one),
  // each slice converted into a buffer that is still in cache when write() copies it.
  static constexpr size_t kSliceBytes = size_t{1} << 20;
  BufferPool slices_{size_t{64} << 20};
  Status WriteTensor(const std::string& path, const std::string& basename, const std::string& dir,
                     const AscendTensor& t, const uint8_t* src) {
    const bool convert = !options_.target_format.empty();
    PreparedTensor p = Prepare(t, src, convert);
    if (!p.note.empty()) Warn(fmt::format("{}: {}: {}", path, Describe(t), p.note));
    std::string name =
        convert ? fmt::format("{}.{}.{}.{}.npy", basename, t.io(), t.index, ShapeName(p.shape))
                : fmt::format("{}.{}.{}.npy", basename, t.io(), t.index);
    if (name.size() > kMaxFileNameBytes) {
      const std::string short_name = ShortName(name);
      mapping_.Add(dir, short_name, name);
      name = short_name;
    }
    const std::string header = NpyHeader(p.dtype, p.shape);
    GRAPHDUMP_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> out,
                               fs_.NewWritableFile(dir + "/" + name));
    GRAPHDUMP_RETURN_IF_ERROR(out->Append(header.data(), header.size()));
    uint64_t payload = 0;
    std::vector<uint8_t> encoded;
    // Elements [first, first + count) of the host tensor, at `data`, in its memory layout.
    auto append = [&](const uint8_t* data, int64_t count) -> Status {
      if (NpyPayloadIsIdentity(p.dtype)) {
        payload += DTypeStorageBytes(p.dtype, count);
        return out->Append(data, DTypeStorageBytes(p.dtype, count));
      }
      EncodeNpyPayload(p.dtype, data, count, &encoded);
      payload += encoded.size();
      return out->Append(encoded.data(), encoded.size());
    };
    if (!p.conversion) {
      GRAPHDUMP_RETURN_IF_ERROR(append(p.data, p.count));
    } else if (p.rows.count > 0) {
      const size_t row_bytes = static_cast<size_t>(p.rows.elements) * p.conversion->item_bytes;
      int64_t slice_rows = static_cast<int64_t>(kSliceBytes / std::max<size_t>(row_bytes, 1));
      if (slice_rows >= 16) slice_rows -= slice_rows % 16;  // whole FRACTAL_Z N0 tiles
      slice_rows = std::max<int64_t>(1, slice_rows);
      BufferPool::Buffer slice =
          slices_.Take(static_cast<size_t>(std::min(slice_rows, p.rows.count)) * row_bytes);
      for (int64_t first = 0; first < p.rows.count; first += slice_rows) {
        const int64_t last = std::min(p.rows.count, first + slice_rows);
        GRAPHDUMP_RETURN_IF_ERROR(
            ConvertHostRows(*p.conversion, p.data, first, last, slice.data()));
        GRAPHDUMP_RETURN_IF_ERROR(append(slice.data(), (last - first) * p.rows.elements));
      }
    }
    GRAPHDUMP_RETURN_IF_ERROR(out->Commit());
    tensors += 1;
    bytes_read += t.size;
    bytes_written += header.size() + payload;
    return Status::Ok();
  }

  void Warn(const std::string& message) {
    warnings += 1;
    if (!options_.warn) return;
    std::lock_guard<std::mutex> lock(warn_mu_);
    options_.warn(message);
  }

  const AscendConvertOptions& options_;
  FileSystem& fs_;
  MappingRegistry& mapping_;
  std::mutex warn_mu_;
};

// As OpenRegularFile names the kinds of files it refuses.
const char* FileTypeName(fs::file_type type) {
  switch (type) {
    case fs::file_type::fifo:
      return "a FIFO";
    case fs::file_type::socket:
      return "a socket";
    case fs::file_type::character:
      return "a character device";
    case fs::file_type::block:
      return "a block device";
    default:
      return "something else";
  }
}

}  // namespace

StatusOr<std::vector<AscendConvertJob>> CollectAscendDumpFiles(
    const std::vector<std::string>& operands, std::vector<std::string>* skipped) {
  std::vector<AscendConvertJob> jobs;
  MappedNames names;
  for (const std::string& operand : operands) {
    std::error_code ec;
    const fs::file_status st = fs::status(operand, ec);
    if (ec || !fs::exists(st)) {
      return Status::NotFound(fmt::format("{}: no such file or directory", operand));
    }
    if (!fs::is_directory(st)) {
      jobs.push_back({operand, "", names.NameOf(operand)});
      continue;
    }
    for (auto it = fs::recursive_directory_iterator(operand, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      std::error_code type_error;
      const fs::file_status st = it->status(type_error);  // what a link points to
      if (type_error || fs::is_directory(st)) continue;
      std::string name = names.NameOf(it->path());
      if (!LooksLikeAscendDumpName(name)) continue;
      if (!fs::is_regular_file(st)) {
        // Not opened (a FIFO would block), but not passed over in silence either.
        if (skipped != nullptr) {
          skipped->push_back(it->path().string() + ": it is " + FileTypeName(st.type()) +
                             ", not a regular file");
        }
        continue;
      }
      std::string rel = fs::relative(it->path().parent_path(), operand).generic_string();
      jobs.push_back({it->path().string(), rel == "." ? "" : rel, std::move(name)});
    }
    if (ec) return Status::IOError(fmt::format("{}: cannot list: {}", operand, ec.message()));
  }
  std::sort(jobs.begin(), jobs.end(),
            [](const AscendConvertJob& a, const AscendConvertJob& b) { return a.path < b.path; });
  return jobs;
}

AscendConvertSummary ConvertAscendDumps(const std::vector<AscendConvertJob>& jobs,
                                        const AscendConvertOptions& options) {
  std::shared_ptr<FileSystem> file_system =
      options.file_system ? options.file_system
                          : NewPosixFileSystem(/*fsync=*/false, options.output_dir);
  MappingRegistry mapping;
  Converter converter(options, *file_system, mapping);
  AscendConvertSummary summary;
  std::mutex mu;  // guards summary and progress
  std::atomic<size_t> next{0};
  size_t done = 0;
  auto worker = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      Status status = converter.Convert(jobs[i]);
      std::lock_guard<std::mutex> lock(mu);
      if (status.ok()) {
        ++summary.files;
      } else {
        summary.errors.push_back(status);
      }
      ++done;
      if (options.progress) options.progress(done, jobs.size());
    }
  };
  int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, std::min<int>(threads, static_cast<int>(jobs.size())));
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  Status mapping_status = mapping.Write(*file_system);
  if (!mapping_status.ok()) summary.errors.push_back(mapping_status);
  summary.tensors = converter.tensors;
  summary.bytes_read = converter.bytes_read;
  summary.bytes_written = converter.bytes_written;
  summary.warnings = converter.warnings;
  return summary;
}

StatusOr<AscendHostTensor> LoadAscendTensor(const std::string& path, bool is_input, int index) {
  GRAPHDUMP_ASSIGN_OR_RETURN(AscendDumpFile dump, ReadAscendDumpHeader(path));
  const std::vector<AscendTensor>& list = is_input ? dump.inputs : dump.outputs;
  if (index < 0 || static_cast<size_t>(index) >= list.size()) {
    return Status::NotFound(fmt::format("{}: has {} {}s, no {} {}", path, list.size(),
                                        is_input ? "input" : "output",
                                        is_input ? "input" : "output", index));
  }
  return LoadAscendTensor(path, list[index]);
}

StatusOr<AscendHostTensor> LoadAscendTensor(const std::string& path, const AscendTensor& t) {
  if (!AscendDataTypeToDType(t.data_type)) {
    return Status::Unsupported(fmt::format("{}: {}: NumPy has no type for {}", path, Describe(t),
                                           AscendDataTypeName(t.data_type)));
  }
  GRAPHDUMP_ASSIGN_OR_RETURN(ReadableFile file, OpenRegularFile(path));
  std::string bytes;
  GRAPHDUMP_RETURN_IF_ERROR(file.Read(t.offset, t.size, &bytes));
  PreparedTensor p = Prepare(t, reinterpret_cast<const uint8_t*>(bytes.data()), true);
  AscendHostTensor out;
  out.dtype = p.dtype;
  out.shape = p.shape;
  out.converted = p.conversion.has_value();
  out.note = p.note;
  if (!p.conversion) {
    out.bytes.assign(p.data, p.data + DTypeStorageBytes(p.dtype, p.count));
    return out;
  }
  out.bytes.resize(DTypeStorageBytes(p.dtype, p.count));
  GRAPHDUMP_RETURN_IF_ERROR(ConvertToHostLayout(*p.conversion, p.data, out.bytes.data()));
  return out;
}

}  // namespace graphdump
