// Reading Ascend asynchronous dump files (docs/ascend.md).
//
// File layout (no extension; named {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}):
//   bytes 0-7   header length L, uint64 little-endian
//   bytes 8..   a toolkit.dumpdata.DumpData protobuf of L bytes (proto/dump_data.proto)
//   then        the raw tensor bytes: every input, then every output, then every buffer, each
//               taking its message's `size` bytes; the messages' `data` fields are empty.
// Enum values are kept as integers so that files from newer toolkits (formats 41-49) and
// unknown values can be reported by number.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graphdump/dtype.h"
#include "graphdump/status.h"

namespace graphdump {

// Largest OutputDataType (UINT2) and OutputFormat (C1HWC0) value graphdump knows.
inline constexpr int kAscendMaxDataType = 31;
inline constexpr int kAscendMaxFormat = 49;

// OutputFormat values the converter and writer refer to by name.
enum AscendFormat : int {
  kAscendNCHW = 0,
  kAscendNHWC = 1,
  kAscendND = 2,
  kAscendNC1HWC0 = 3,
  kAscendFractalZ = 4,
  kAscendNC1HWC0C04 = 12,
  kAscendHWCN = 16,
  kAscendC1HWNCoC0 = 25,
  kAscendNDHWC = 27,
  kAscendFractalNZ = 29,
  kAscendNCDHW = 30,
  kAscendNDC1HWC0 = 32,
  kAscendFractalZ3D = 33,
};

// The name of an OutputDataType value without its DT_ prefix ("FLOAT16", "BF16"); empty for
// values outside 0..kAscendMaxDataType.
std::string_view AscendDataTypeName(int data_type);

// The name of an OutputFormat value without its FORMAT_ prefix ("NC1HWC0", "FRACTAL_Z"); empty
// for values outside 0..kAscendMaxFormat.
std::string_view AscendFormatName(int format);

// Parses a format name, case-insensitively, with or without the FORMAT_ prefix.
std::optional<int> AscendFormatFromName(std::string_view name);

// Bits one element of `data_type` occupies (4 for INT4, 1 for UINT1); 0 for types without a
// fixed element size (STRING, RESOURCE, VARIANT...) and unknown values.
int AscendDataTypeBits(int data_type);

// The graphdump dtype holding the same values (QINT8 -> int8, BF16 -> bfloat16...); nullopt
// for types NumPy cannot represent (STRING, RESOURCE, UINT1...).
std::optional<DType> AscendDataTypeToDType(int data_type);

// The OutputDataType for a graphdump dtype (float32 -> FLOAT, int4 -> INT4).
int AscendDataTypeFromDType(DType dtype);

// One tensor of a dump file. Its bytes are [offset, offset + size) of the file.
struct AscendTensor {
  bool is_input = false;
  int index = 0;  // position among the file's inputs or outputs
  int data_type = 0;
  int format = 0;
  std::vector<int64_t> shape;           // device shape, as stored
  std::vector<int64_t> original_shape;  // host shape before the device format; may be empty
  int32_t sub_format = 0;               // group count of grouped convolutions when > 1
  uint64_t offset = 0;
  uint64_t size = 0;

  const char* io() const { return is_input ? "input" : "output"; }
  // A placeholder for a slot without a tensor (UNDEFINED, no bytes): graphdump's writer puts one
  // where a kernel has no tensor, so that later tensors keep their index. No .npy is made of it.
  bool absent() const { return data_type == 0 && size == 0; }
};

// The parsed header of a dump file.
struct AscendDumpFile {
  std::string path;
  std::string version;
  uint64_t dump_time = 0;
  std::string op_name;
  std::vector<AscendTensor> inputs;
  std::vector<AscendTensor> outputs;
  uint64_t buffer_bytes = 0;  // bytes of the OpBuffer entries after the outputs
  uint64_t data_offset = 0;   // 8 + header length: where the first input starts
  uint64_t file_size = 0;
};

// Parses and validates a dump file held in memory (`size` bytes, the whole file). Checks: the
// 8-byte length, that the header fits in the file and parses, every data type and format is a
// known value, every tensor's size equals its element count times the element size (where the
// type has one), and the sizes together fit in the file. Errors are kCorrupt and name `path`
// and the field ("input[1].size", "output[0].format").
StatusOr<AscendDumpFile> ParseAscendDump(const uint8_t* data, size_t size, const std::string& path);

// Reads only the header of the dump file at `path` (the 8-byte length and the DumpData), and
// validates it as ParseAscendDump does against the file's size. kNotFound/kIOError for files
// that cannot be read.
StatusOr<AscendDumpFile> ReadAscendDumpHeader(const std::string& path);

// True when `file_name` looks like a dump file name: no .npy/.csv/.json/... extension and its
// last three dot-separated fields are decimal numbers (task id, stream id, timestamp).
bool LooksLikeAscendDumpName(std::string_view file_name);

// Parses the text of a mapping.csv: one "{short name},{original name}" line per file (a '\r'
// before the '\n' is dropped; lines without a comma or with an empty short name are skipped; of
// two lines for one short name the last wins).
std::map<std::string, std::string> ParseMappingCsv(std::string_view text);

// The names files in a dump directory stand for: a file whose name was too long has a short one
// ("{n}", "{n}.npy") and a "{short},{original}" line in mapping.csv beside it. Reads each
// directory's mapping.csv once.
class MappedNames {
 public:
  // The original name of `path` when mapping.csv lists it, else its own file name.
  std::string NameOf(const std::filesystem::path& path);

 private:
  std::map<std::filesystem::path, std::map<std::string, std::string>> mappings_;
};

}  // namespace graphdump
