#include "graphdump/internal/json_text.h"

#include <nlohmann/json.hpp>
#include <string>

namespace graphdump::internal {

Status CheckJsonDepth(std::string_view text, const std::string& file_name) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      line_start = i + 1;
    }
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        return Status::InvalidArgument(
            (file_name.empty() ? "" : file_name + ": ") +
            "Parse dump json failed, error: arrays and objects nest deeper than " +
            std::to_string(kMaxJsonDepth) + " levels at line " + std::to_string(line) +
            ", column " + std::to_string(i - line_start + 1) +
            " (a dump configuration needs 3: the file, its sections and their arrays)");
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return Status::Ok();
}

bool IsValidUtf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    // The length of the sequence and the range of its second byte (RFC 3629's table).
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
    } else if (c == 0xE0) {
      length = 3, low = 0xA0;
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
      length = 3;
    } else if (c == 0xED) {
      length = 3, high = 0x9F;  // no surrogates
    } else if (c == 0xF0) {
      length = 4, low = 0x90;
    } else if (c >= 0xF1 && c <= 0xF3) {
      length = 4;
    } else if (c == 0xF4) {
      length = 4, high = 0x8F;  // nothing past U+10FFFF
    } else {
      return false;
    }
    if (n - i < length || p[i + 1] < low || p[i + 1] > high) return false;
    for (size_t k = 2; k < length; ++k) {
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return false;
    }
    i += length;
  }
  return true;
}

std::string ValidUtf8(std::string_view text) {
  if (IsValidUtf8(text)) return std::string(text);
  // Through the JSON printer, so the replacement is the one JsonText makes.
  const std::string quoted = JsonText(nlohmann::json(std::string(text)));
  return nlohmann::json::parse(quoted).get<std::string>();
}

}  // namespace graphdump::internal
