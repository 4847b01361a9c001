#include "graphdump/internal/json_text.h"

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

}  // namespace graphdump::internal
