// The lines of Python source files as Python reads them, for source traces: each file is read
// once, then its lines are looked up by number.
//
//   SourceLines lines;
//   std::optional<std::string> text = lines.Line("/path/model.py", 42);  // without its line end
//   if (!text) ...  // not a plain UTF-8 file here: ask Python's linecache
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace graphdump {

class SourceLines {
 public:
  // Line `line` (from 1) of the file at `path` as Python decodes it (UTF-8; "\n", "\r\n" and a
  // lone "\r" end lines; a leading byte order mark is dropped), without its line end; "" past
  // the file's end. nullopt when the file cannot be read here: it does not exist (relative
  // paths are taken from the working directory), is not a regular file, is larger than a source
  // file would be, or declares another encoding than UTF-8 (PEP 263) in its first two lines.
  std::optional<std::string> Line(const std::string& path, int line);

 private:
  struct File {
    bool readable = false;
    std::string text;
    std::vector<size_t> starts;  // where each line starts in `text`; a last entry at the end
  };
  static File Read(const std::string& path);
  std::unordered_map<std::string, File> files_;
};

}  // namespace graphdump
