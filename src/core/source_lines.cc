#include "graphdump/internal/source_lines.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "graphdump/file_system.h"

namespace graphdump {
namespace {

constexpr uint64_t kMaxSourceBytes = uint64_t{64} << 20;

// The encoding a PEP 263 declaration on this line names ("latin-1"), or "" when it has none:
// a comment holding "coding:" or "coding=" followed by the name.
std::string DeclaredEncoding(std::string_view line) {
  const size_t hash = line.find('#');
  if (hash == std::string_view::npos ||
      line.substr(0, hash).find_first_not_of(" \t\f") != std::string_view::npos) {
    return "";
  }
  for (size_t at = line.find("coding", hash); at != std::string_view::npos;
       at = line.find("coding", at + 1)) {
    size_t i = at + 6;
    if (i >= line.size() || (line[i] != ':' && line[i] != '=')) continue;
    ++i;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    std::string name;
    while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) ||
                               line[i] == '-' || line[i] == '_' || line[i] == '.')) {
      name += static_cast<char>(std::tolower(static_cast<unsigned char>(line[i++])));
    }
    if (!name.empty()) return name;
  }
  return "";
}

// Whether Python reads a file declaring `encoding` as UTF-8 (tokenize's normalisation).
bool IsUtf8(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name == "utf-8" || name == "utf8" || name.starts_with("utf-8-");
}

}  // namespace

SourceLines::File SourceLines::Read(const std::string& path) {
  File file;
  // A FIFO, device or directory under the name is refused without blocking on it.
  StatusOr<ReadableFile> opened = OpenRegularFile(path);
  if (!opened.ok() || opened->size() > kMaxSourceBytes ||
      !opened->Read(0, opened->size(), &file.text).ok()) {
    return File{};
  }
  if (file.text.starts_with("\xEF\xBB\xBF")) file.text.erase(0, 3);
  // Line starts; a line ends at "\n", "\r\n" or a lone "\r". Most files have no "\r": their
  // line ends are found with memchr (the first capturing step reads PyTorch's largest sources).
  file.starts.push_back(0);
  const char* text = file.text.data();
  const size_t size = file.text.size();
  if (std::memchr(text, '\r', size) == nullptr) {
    for (const char* at = text; (at = static_cast<const char*>(
                                     std::memchr(at, '\n', size - (at - text)))) != nullptr;) {
      ++at;
      file.starts.push_back(static_cast<size_t>(at - text));
    }
  } else {
    for (size_t i = 0; i < size; ++i) {
      const char c = text[i];
      if (c == '\r' && i + 1 < size && text[i + 1] == '\n') continue;
      if (c == '\n' || c == '\r') file.starts.push_back(i + 1);
    }
  }
  if (file.starts.back() != file.text.size()) file.starts.push_back(file.text.size());
  for (size_t l = 0; l + 1 < file.starts.size() && l < 2; ++l) {
    const std::string encoding = DeclaredEncoding(
        std::string_view(file.text).substr(file.starts[l], file.starts[l + 1] - file.starts[l]));
    if (!encoding.empty()) {
      if (!IsUtf8(encoding)) return File{};
      break;
    }
  }
  file.readable = true;
  return file;
}

std::optional<std::string> SourceLines::Line(const std::string& path, int line) {
  auto it = files_.find(path);
  if (it == files_.end()) it = files_.emplace(path, Read(path)).first;
  const File& file = it->second;
  if (!file.readable) return std::nullopt;
  if (line < 1 || static_cast<size_t>(line) >= file.starts.size()) return std::string();
  const size_t begin = file.starts[line - 1];
  size_t end = file.starts[line];
  while (end > begin && (file.text[end - 1] == '\n' || file.text[end - 1] == '\r')) --end;
  return file.text.substr(begin, end - begin);
}

}  // namespace graphdump
