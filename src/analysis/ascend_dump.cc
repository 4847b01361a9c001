#include "graphdump/analysis/ascend_dump.h"

#include <algorithm>
#include <array>
#include <limits>
#include <string>

#include "dump_data.pb.h"
#include "fmt/format.h"
#include "graphdump/file_system.h"
#include "graphdump/internal/ascii.h"
#include "graphdump/shape.h"

namespace graphdump {
namespace {

struct DataTypeRow {
  const char* name;
  int bits;
};

// Indexed by OutputDataType value (proto/dump_data.proto, docs/ascend.md).
constexpr std::array<DataTypeRow, kAscendMaxDataType + 1> kDataTypes = {{
    {"UNDEFINED", 0},  {"FLOAT", 32},       {"FLOAT16", 16},      {"INT8", 8},
    {"UINT8", 8},      {"INT16", 16},       {"UINT16", 16},       {"INT32", 32},
    {"INT64", 64},     {"UINT32", 32},      {"UINT64", 64},       {"BOOL", 8},
    {"DOUBLE", 64},    {"STRING", 0},       {"DUAL_SUB_INT8", 8}, {"DUAL_SUB_UINT8", 8},
    {"COMPLEX64", 64}, {"COMPLEX128", 128}, {"QINT8", 8},         {"QINT16", 16},
    {"QINT32", 32},    {"QUINT8", 8},       {"QUINT16", 16},      {"RESOURCE", 0},
    {"STRING_REF", 0}, {"DUAL", 0},         {"VARIANT", 0},       {"BF16", 16},
    {"INT4", 4},       {"UINT1", 1},        {"INT2", 2},          {"UINT2", 2},
}};

// Indexed by OutputFormat value (proto/dump_data.proto, docs/ascend.md; with the later toolkit
// additions 41-49).
constexpr std::array<const char*, kAscendMaxFormat + 1> kFormats = {
    "NCHW",
    "NHWC",
    "ND",
    "NC1HWC0",
    "FRACTAL_Z",
    "NC1C0HWPAD",
    "NHWC1C0",
    "FSR_NCHW",
    "FRACTAL_DECONV",
    "C1HWNC0",
    "FRACTAL_DECONV_TRANSPOSE",
    "FRACTAL_DECONV_SP_STRIDE_TRANS",
    "NC1HWC0_C04",
    "FRACTAL_Z_C04",
    "CHWN",
    "FRACTAL_DECONV_SP_STRIDE8_TRANS",
    "HWCN",
    "NC1KHKWHWC0",
    "BN_WEIGHT",
    "FILTER_HWCK",
    "HASHTABLE_LOOKUP_LOOKUPS",
    "HASHTABLE_LOOKUP_KEYS",
    "HASHTABLE_LOOKUP_VALUE",
    "HASHTABLE_LOOKUP_OUTPUT",
    "HASHTABLE_LOOKUP_HITS",
    "C1HWNCoC0",
    "MD",
    "NDHWC",
    "FRACTAL_ZZ",
    "FRACTAL_NZ",
    "NCDHW",
    "DHWCN",
    "NDC1HWC0",
    "FRACTAL_Z_3D",
    "CN",
    "NC",
    "DHWNC",
    "FRACTAL_Z_3D_TRANSPOSE",
    "FRACTAL_ZN_LSTM",
    "FRACTAL_Z_G",
    "RESERVED",
    "ALL",
    "NULL",
    "ND_RNN_BIAS",
    "FRACTAL_ZN_RNN",
    "YUV",
    "YUV_A",
    "NCL",
    "FRACTAL_Z_WINO",
    "C1HWC0",
};

// Fills `out` from one OpInput/OpOutput message and checks what can be checked per tensor.
template <typename Msg>
Status ReadTensor(const Msg& msg, bool is_input, int index, const std::string& path,
                  AscendTensor* out) {
  const std::string field = fmt::format("{}[{}]", is_input ? "input" : "output", index);
  out->is_input = is_input;
  out->index = index;
  out->data_type = static_cast<int>(msg.data_type());
  out->format = static_cast<int>(msg.format());
  out->sub_format = msg.sub_format();
  out->size = msg.size();
  if (out->data_type < 0 || out->data_type > kAscendMaxDataType) {
    return Status::Corrupt(
        fmt::format("{}: {}.data_type: unknown OutputDataType value {} "
                    "(known values are 0..{}, UNDEFINED..UINT2)",
                    path, field, out->data_type, kAscendMaxDataType));
  }
  if (out->format < 0 || out->format > kAscendMaxFormat) {
    return Status::Corrupt(
        fmt::format("{}: {}.format: unknown OutputFormat value {} (known "
                    "values are 0..{}, NCHW..C1HWC0)",
                    path, field, out->format, kAscendMaxFormat));
  }
  // Both shapes must have an element count that fits int64_t (ShapeElements): every later
  // product of their dimensions (conversion plans, .npy headers) is then bounded.
  auto read_shape = [&](const auto& dims, const char* name,
                        std::vector<int64_t>* shape) -> StatusOr<int64_t> {
    for (uint64_t d : dims) {
      if (d > static_cast<uint64_t>(INT64_MAX)) {
        return Status::Corrupt(
            fmt::format("{}: {}.{}: dimension {} is too large", path, field, name, d));
      }
      shape->push_back(static_cast<int64_t>(d));
    }
    std::optional<int64_t> count = ShapeElements(*shape);
    if (!count) {
      return Status::Corrupt(fmt::format("{}: {}.{}: the element count of ({}) overflows", path,
                                         field, name, fmt::join(*shape, ",")));
    }
    return *count;
  };
  GRAPHDUMP_ASSIGN_OR_RETURN(const int64_t count,
                             read_shape(msg.shape().dim(), "shape", &out->shape));
  GRAPHDUMP_RETURN_IF_ERROR(
      read_shape(msg.original_shape().dim(), "original_shape", &out->original_shape).status());
  const int bits = AscendDataTypeBits(out->data_type);
  if (bits > 0) {
    std::optional<int64_t> expected = ElementBytes(count, static_cast<size_t>(bits));
    if (!expected || static_cast<uint64_t>(*expected) != out->size) {
      return Status::Corrupt(fmt::format(
          "{}: {}.size: {} bytes, but shape ({}) of {} needs {} bytes", path, field, out->size,
          fmt::join(out->shape, ","), AscendDataTypeName(out->data_type),
          expected ? std::to_string(*expected) : std::string("more than can be addressed")));
    }
  }
  return Status::Ok();
}

// Assigns offsets in file order (inputs, outputs, buffers) and checks they fit in the file.
Status PlaceTensors(const toolkit::dumpdata::DumpData& proto, AscendDumpFile* file) {
  const uint64_t available = file->file_size - file->data_offset;
  unsigned __int128 offset = file->data_offset;
  auto place = [&](AscendTensor& t) -> Status {
    t.offset = static_cast<uint64_t>(offset);
    offset += t.size;
    if (offset > file->file_size) {
      return Status::Corrupt(fmt::format(
          "{}: {}[{}].size: the tensor's {} bytes end at byte {}, beyond the end of the file "
          "({} bytes; {} bytes of tensor data after the header): the file is truncated or the "
          "size is wrong",
          file->path, t.io(), t.index, t.size, static_cast<uint64_t>(offset), file->file_size,
          available));
    }
    return Status::Ok();
  };
  for (AscendTensor& t : file->inputs) GRAPHDUMP_RETURN_IF_ERROR(place(t));
  for (AscendTensor& t : file->outputs) GRAPHDUMP_RETURN_IF_ERROR(place(t));
  for (int i = 0; i < proto.buffer_size(); ++i) {
    offset += proto.buffer(i).size();
    file->buffer_bytes += proto.buffer(i).size();
    if (offset > file->file_size) {
      return Status::Corrupt(
          fmt::format("{}: buffer[{}].size: {} bytes end beyond the end of the file ({} bytes)",
                      file->path, i, proto.buffer(i).size(), file->file_size));
    }
  }
  return Status::Ok();
}

StatusOr<uint64_t> HeaderLength(const uint8_t* data, size_t size, const std::string& path) {
  if (size < 8) {
    return Status::Corrupt(fmt::format(
        "{}: truncated: {} bytes, too short for the 8-byte header length that starts a dump file",
        path, size));
  }
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | data[i];
  if (length > size - 8) {
    return Status::Corrupt(fmt::format(
        "{}: header length: {} bytes, beyond the {} bytes that follow the length field (the "
        "file is truncated or not an Ascend dump file)",
        path, length, size - 8));
  }
  return length;
}

StatusOr<AscendDumpFile> FromProto(const uint8_t* header, uint64_t header_length,
                                   uint64_t file_size, const std::string& path) {
  toolkit::dumpdata::DumpData proto;
  if (header_length > static_cast<uint64_t>(std::numeric_limits<int>::max()) ||
      !proto.ParseFromArray(header, static_cast<int>(header_length))) {
    return Status::Corrupt(fmt::format(
        "{}: header: the {} bytes after the length field are not a toolkit.dumpdata.DumpData "
        "message",
        path, header_length));
  }
  AscendDumpFile file;
  file.path = path;
  file.version = proto.version();
  file.dump_time = proto.dump_time();
  file.op_name = proto.op_name();
  file.data_offset = 8 + header_length;
  file.file_size = file_size;
  file.inputs.resize(proto.input_size());
  for (int i = 0; i < proto.input_size(); ++i) {
    GRAPHDUMP_RETURN_IF_ERROR(ReadTensor(proto.input(i), true, i, path, &file.inputs[i]));
  }
  file.outputs.resize(proto.output_size());
  for (int i = 0; i < proto.output_size(); ++i) {
    GRAPHDUMP_RETURN_IF_ERROR(ReadTensor(proto.output(i), false, i, path, &file.outputs[i]));
  }
  GRAPHDUMP_RETURN_IF_ERROR(PlaceTensors(proto, &file));
  return file;
}

}  // namespace

std::string_view AscendDataTypeName(int data_type) {
  if (data_type < 0 || data_type > kAscendMaxDataType) return {};
  return kDataTypes[data_type].name;
}

std::string_view AscendFormatName(int format) {
  if (format < 0 || format > kAscendMaxFormat) return {};
  return kFormats[format];
}

std::optional<int> AscendFormatFromName(std::string_view name) {
  if (name.size() > 7 && internal::EqualsIgnoringCase(name.substr(0, 7), "FORMAT_")) name.remove_prefix(7);
  for (int i = 0; i <= kAscendMaxFormat; ++i) {
    if (internal::EqualsIgnoringCase(name, kFormats[i])) return i;
  }
  return std::nullopt;
}

int AscendDataTypeBits(int data_type) {
  if (data_type < 0 || data_type > kAscendMaxDataType) return 0;
  return kDataTypes[data_type].bits;
}

std::optional<DType> AscendDataTypeToDType(int data_type) {
  switch (data_type) {
    case 1:
      return DType::kFloat32;
    case 2:
      return DType::kFloat16;
    case 3:
    case 14:
    case 18:
      return DType::kInt8;
    case 4:
    case 15:
    case 21:
      return DType::kUInt8;
    case 5:
    case 19:
      return DType::kInt16;
    case 6:
    case 22:
      return DType::kUInt16;
    case 7:
    case 20:
      return DType::kInt32;
    case 8:
      return DType::kInt64;
    case 9:
      return DType::kUInt32;
    case 10:
      return DType::kUInt64;
    case 11:
      return DType::kBool;
    case 12:
      return DType::kFloat64;
    case 16:
      return DType::kComplex64;
    case 17:
      return DType::kComplex128;
    case 27:
      return DType::kBFloat16;
    case 28:
      return DType::kInt4;
    default:
      return std::nullopt;
  }
}

int AscendDataTypeFromDType(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return 11;
    case DType::kInt8:
      return 3;
    case DType::kInt16:
      return 5;
    case DType::kInt32:
      return 7;
    case DType::kInt64:
      return 8;
    case DType::kUInt8:
      return 4;
    case DType::kUInt16:
      return 6;
    case DType::kUInt32:
      return 9;
    case DType::kUInt64:
      return 10;
    case DType::kFloat16:
      return 2;
    case DType::kBFloat16:
      return 27;
    case DType::kFloat32:
      return 1;
    case DType::kFloat64:
      return 12;
    case DType::kComplex64:
      return 16;
    case DType::kComplex128:
      return 17;
    case DType::kInt4:
      return 28;
  }
  return 0;
}

StatusOr<AscendDumpFile> ParseAscendDump(const uint8_t* data, size_t size,
                                         const std::string& path) {
  GRAPHDUMP_ASSIGN_OR_RETURN(uint64_t length, HeaderLength(data, size, path));
  return FromProto(data + 8, length, size, path);
}

StatusOr<AscendDumpFile> ReadAscendDumpHeader(const std::string& path) {
  GRAPHDUMP_ASSIGN_OR_RETURN(ReadableFile file, OpenRegularFile(path));
  std::string head;
  GRAPHDUMP_RETURN_IF_ERROR(file.Read(0, std::min<uint64_t>(file.size(), 8), &head));
  GRAPHDUMP_ASSIGN_OR_RETURN(
      uint64_t length,
      HeaderLength(reinterpret_cast<const uint8_t*>(head.data()), file.size(), path));
  std::string header;
  GRAPHDUMP_RETURN_IF_ERROR(file.Read(8, length, &header));
  return FromProto(reinterpret_cast<const uint8_t*>(header.data()), length, file.size(), path);
}

bool LooksLikeAscendDumpName(std::string_view name) {
  for (std::string_view ext : {".npy", ".csv", ".json", ".txt", ".pb", ".ir", ".bin"}) {
    if (name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext) return false;
  }
  int numeric_fields = 0;
  size_t end = name.size();
  while (numeric_fields < 3) {
    const size_t dot = name.rfind('.', end == 0 ? 0 : end - 1);
    if (dot == std::string_view::npos) return false;
    std::string_view field = name.substr(dot + 1, end - dot - 1);
    if (field.empty()) return false;
    for (char c : field) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    }
    ++numeric_fields;
    end = dot;
  }
  return end > 0;
}

std::string MappedNames::NameOf(const std::filesystem::path& path) {
  const std::filesystem::path dir = path.parent_path();
  auto found = mappings_.find(dir);
  if (found == mappings_.end()) {
    // A directory without a readable mapping.csv maps nothing.
    StatusOr<std::string> text = ReadRegularFile((dir / "mapping.csv").string());
    found = mappings_.emplace(dir, ParseMappingCsv(text.ok() ? *text : "")).first;
  }
  const std::string name = path.filename().string();
  auto mapped = found->second.find(name);
  return mapped == found->second.end() ? name : mapped->second;
}

std::map<std::string, std::string> ParseMappingCsv(std::string_view text) {
  std::map<std::string, std::string> mapping;
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t comma = line.find(',');
    if (comma == std::string_view::npos || comma == 0) continue;
    mapping[std::string(line.substr(0, comma))] = std::string(line.substr(comma + 1));
  }
  return mapping;
}

}  // namespace graphdump
