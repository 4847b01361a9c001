// ParseNpyHeader: validation of the .npy header (docs/file-format.md). The header dict is a Python
// literal; we accept what numpy.save and MindSpore write (any key order, either quote style,
// trailing commas, True/False) and reject everything else with a message that names the file.
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "graphdump/npy.h"
#include "graphdump/shape.h"
#include "graphdump/tensor_view.h"

namespace graphdump {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

Status CorruptNpy(const std::string& path, const std::string& what) {
  return Status::Corrupt(path + ": not a valid .npy file: " + what);
}

// A tiny cursor over the header dict text.
class DictParser {
 public:
  explicit DictParser(std::string_view text) : text_(text) {}

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool ConsumeWord(std::string_view word) {
    SkipSpace();
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  bool ParseString(std::string* out) {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) return false;
    *out = std::string(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }
  bool ParseInt(int64_t* out) {
    SkipSpace();
    size_t start = pos_;
    uint64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const uint64_t digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (value > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - digit) / 10) {
        return false;
      }
      value = value * 10 + digit;
      ++pos_;
    }
    // Python 2 era writers may append 'L' to long integers.
    if (pos_ > start && pos_ < text_.size() && text_[pos_] == 'L') ++pos_;
    *out = static_cast<int64_t>(value);
    return pos_ > start;
  }
  // "(2, 3)", "(5,)", "()".
  bool ParseShape(std::vector<int64_t>* shape) {
    if (!Consume('(')) return false;
    shape->clear();
    while (true) {
      if (Consume(')')) return true;
      int64_t dim = 0;
      if (!ParseInt(&dim)) return false;
      shape->push_back(dim);
      if (Consume(',')) continue;
      return Consume(')');
    }
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ == text_.size();
  }
  size_t pos() const { return pos_; }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

// Normalises the byte-order character of one-byte descrs ("<i1" and "=u1" mean "|i1").
std::string NormaliseDescr(const std::string& descr) {
  if (descr.size() == 3 && descr[2] == '1' && (descr[0] == '<' || descr[0] == '=')) {
    return "|" + descr.substr(1);
  }
  if (descr.size() >= 2 && descr[0] == '=') return "<" + descr.substr(1);  // little-endian host
  return descr;
}

Status ParseDict(std::string_view dict, const std::string& path, NpyInfo* info) {
  DictParser p(dict);
  if (!p.Consume('{')) return CorruptNpy(path, "header does not start with '{' (a Python dict)");
  bool have_descr = false, have_order = false, have_shape = false;
  while (!p.Consume('}')) {
    std::string key;
    if (!p.ParseString(&key) || !p.Consume(':')) {
      return CorruptNpy(path, "malformed header dict near byte " + std::to_string(p.pos()) +
                                  " (expected 'key': value)");
    }
    if (key == "descr") {
      if (!p.ParseString(&info->descr)) return CorruptNpy(path, "'descr' is not a string");
      have_descr = true;
    } else if (key == "fortran_order") {
      if (p.ConsumeWord("True")) {
        info->fortran_order = true;
      } else if (p.ConsumeWord("False")) {
        info->fortran_order = false;
      } else {
        return CorruptNpy(path, "'fortran_order' is not True or False");
      }
      have_order = true;
    } else if (key == "shape") {
      if (!p.ParseShape(&info->shape)) {
        return CorruptNpy(path, "'shape' is not a tuple of non-negative integers");
      }
      have_shape = true;
    } else {
      return CorruptNpy(
          path, "unexpected header key '" + key + "' (allowed: 'descr', 'fortran_order', 'shape')");
    }
    if (!p.Consume(',')) {
      if (!p.Consume('}')) return CorruptNpy(path, "header dict is not closed with '}'");
      break;
    }
  }
  if (!p.AtEnd()) return CorruptNpy(path, "unexpected text after the header dict");
  if (!have_descr || !have_order || !have_shape) {
    return CorruptNpy(path, std::string("header lacks ") + (!have_descr   ? "'descr'"
                                                            : !have_order ? "'fortran_order'"
                                                                          : "'shape'"));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<NpyInfo> ParseNpyHeader(const uint8_t* data, size_t size, const std::string& path) {
  if (size < 10) {
    return CorruptNpy(path, "file has " + std::to_string(size) +
                                " bytes, fewer than the 10 of a .npy preamble (truncated?)");
  }
  if (std::memcmp(data, kMagic, kMagicSize) != 0) {
    return CorruptNpy(path, "magic bytes are not \\x93NUMPY");
  }
  NpyInfo info;
  info.major_version = data[6];
  info.minor_version = data[7];
  if (info.major_version < 1 || info.major_version > 3 || info.minor_version != 0) {
    return CorruptNpy(path, "format version " + std::to_string(info.major_version) + "." +
                                std::to_string(info.minor_version) +
                                " is not supported (allowed: 1.0, 2.0, 3.0)");
  }
  size_t header_len = 0;
  size_t prefix = 10;
  if (info.major_version == 1) {
    header_len = size_t{data[8]} | (size_t{data[9]} << 8);
  } else {
    if (size < 12) return CorruptNpy(path, "file ends inside the version 2/3 preamble");
    header_len = size_t{data[8]} | (size_t{data[9]} << 8) | (size_t{data[10]} << 16) |
                 (size_t{data[11]} << 24);
    prefix = 12;
  }
  if (header_len > size - prefix) {
    return CorruptNpy(path, "header length " + std::to_string(header_len) + " exceeds the " +
                                std::to_string(size - prefix) +
                                " bytes left in the file (truncated?)");
  }
  info.data_offset = prefix + header_len;
  const std::string_view dict(reinterpret_cast<const char*>(data + prefix), header_len);
  GRAPHDUMP_RETURN_IF_ERROR(ParseDict(dict, path, &info));

  const std::string descr = NormaliseDescr(info.descr);
  if (!descr.empty() && descr[0] == '>') {
    return CorruptNpy(path,
                      "descr '" + info.descr + "' is big-endian (only little-endian is read)");
  }
  std::optional<DType> dtype = DTypeFromNpyDescr(descr);
  if (!dtype) {
    return CorruptNpy(path, "descr '" + info.descr +
                                "' is not supported (allowed: |b1 |i1 |u1 <i2 <u2 <i4 <u4 <i8 "
                                "<u8 <f2 <f4 <f8 <c8 <c16, and <E2 for raw bfloat16)");
  }
  info.dtype = *dtype;
  std::optional<int64_t> elements = ShapeElements(info.shape);
  std::optional<int64_t> bytes = elements ? ElementBytes(*elements, DTypeBits(*dtype)) : elements;
  if (!bytes) {
    return CorruptNpy(path, "'shape' " + ShapeToString(info.shape) +
                                " describes more bytes than can be addressed");
  }
  info.elements = *elements;
  info.data_bytes = static_cast<size_t>(*bytes);
  return info;
}

Status CheckNpyDataSize(const NpyInfo& info, uint64_t file_size, const std::string& path) {
  const uint64_t available = file_size > info.data_offset ? file_size - info.data_offset : 0;
  if (info.data_bytes > available) {
    return Status::Corrupt(path + ": truncated .npy: header promises " +
                           std::to_string(info.data_bytes) + " data bytes, file has " +
                           std::to_string(available));
  }
  return Status::Ok();
}

}  // namespace graphdump
