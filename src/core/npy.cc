#include "graphdump/npy.h"

#include <charconv>
#include <cstring>
#include <span>
#include <string>

namespace graphdump {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
constexpr size_t kAlign = 64;

// Appends the header dict exactly as NumPy's own writer prints it: shape as a Python tuple
// repr, "(2, 3)", "(5,)" for one dimension and "()" for a scalar.
void AppendHeaderDict(DType dtype, std::span<const int64_t> shape, std::string* out) {
  out->append("{'descr': '").append(NpyDescr(dtype));
  out->append("', 'fortran_order': False, 'shape': (");
  char number[24];
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out->append(", ");
    out->append(number, std::to_chars(number, number + sizeof number, shape[i]).ptr);
  }
  if (shape.size() == 1) out->push_back(',');
  out->append("), }");
}

void AppendLittleEndian(uint64_t value, size_t bytes, std::string* out) {
  for (size_t i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

std::string NpyHeader(DType dtype, const Dims& shape) {
  std::string dict;
  dict.reserve(kAlign * 2);
  AppendHeaderDict(dtype, shape, &dict);
  // Like NumPy: pad = 64 - (prefix + dict + '\n') % 64, so 1..64 spaces and the data offset is
  // a multiple of 64. Version 1.0 has a 2-byte length; 2.0 (for huge headers) a 4-byte one.
  size_t length_bytes = 2;
  size_t pad = kAlign - (kMagicBytes + 2 + length_bytes + dict.size() + 1) % kAlign;
  size_t header_len = dict.size() + pad + 1;
  if (header_len > 0xffff) {
    length_bytes = 4;
    pad = kAlign - (kMagicBytes + 2 + length_bytes + dict.size() + 1) % kAlign;
    header_len = dict.size() + pad + 1;
  }
  std::string header;
  header.reserve(kMagicBytes + 2 + length_bytes + header_len);
  header.append(kMagic, kMagicBytes);
  header.push_back(static_cast<char>(length_bytes == 2 ? 1 : 2));
  header.push_back('\0');
  AppendLittleEndian(header_len, length_bytes, &header);
  header += dict;
  header.append(pad, ' ');
  header.push_back('\n');
  return header;
}

bool NpyPayloadIsIdentity(DType dtype) {
  return dtype != DType::kBFloat16 && dtype != DType::kInt4;
}

void EncodeNpyPayload(DType dtype, const uint8_t* in, int64_t count, std::vector<uint8_t>* out) {
  if (count <= 0) return;
  const size_t n = static_cast<size_t>(count);
  const size_t start = out->size();
  switch (dtype) {
    case DType::kBFloat16: {
      // bfloat16 is the upper half of a float32: widening is exact.
      out->resize(start + n * 4);
      uint8_t* dst = out->data() + start;
      for (size_t i = 0; i < n; ++i) {
        uint16_t half;
        std::memcpy(&half, in + 2 * i, 2);
        const uint32_t bits = static_cast<uint32_t>(half) << 16;
        std::memcpy(dst + 4 * i, &bits, 4);
      }
      return;
    }
    case DType::kInt4: {
      // Two signed 4-bit values per byte, low nibble first; each becomes one int8.
      out->resize(start + n);
      auto* dst = reinterpret_cast<int8_t*>(out->data() + start);
      for (size_t i = 0; i < n; ++i) {
        const uint8_t byte = in[i / 2];
        const uint8_t nibble = (i % 2 == 0) ? (byte & 0x0f) : (byte >> 4);
        dst[i] = static_cast<int8_t>(static_cast<int8_t>(nibble << 4) >> 4);
      }
      return;
    }
    default: {
      const size_t bytes = DTypeStorageBytes(dtype, count);
      out->insert(out->end(), in, in + bytes);
      return;
    }
  }
}

}  // namespace graphdump
