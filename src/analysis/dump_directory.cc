// The directory helpers of the dump index (dump_index_parts.h): listing a dump's directories
// in order, telling an unreadable directory from an empty one, refusing links, reading small
// text files.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dump_index_parts.h"
#include "graphdump/file_system.h"

namespace graphdump::analysis {
namespace fs = std::filesystem;

namespace {

// An error naming `dir`, the system's reason, and the entry it was met at (when not `dir`).
Status UnreadableDirectory(const fs::path& dir, const std::error_code& ec,
                           const fs::path& entry = {}) {
  return Status::IOError(fmt::format("{}: cannot read the directory: {}{}", dir.string(),
                                     ec.message(),
                                     entry.empty() ? std::string()
                                                   : fmt::format(" (at its entry {})",
                                                                 entry.filename().string())));
}

bool Vanished(const std::error_code& ec) {
  return ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory;
}

}  // namespace

StatusOr<std::vector<fs::path>> SortedChildren(const fs::path& dir) {
  std::vector<fs::path> children;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    children.push_back(it->path());
  }
  if (ec && !Vanished(ec)) return UnreadableDirectory(dir, ec);
  // A directory that lists but cannot be searched (mode r--) holds entries that nothing can
  // open: one look at an entry tells.
  if (!ec && !children.empty()) {
    (void)fs::symlink_status(children.front(), ec);
    if (ec && !Vanished(ec)) return UnreadableDirectory(dir, ec, children.front());
  }
  std::sort(children.begin(), children.end());
  return children;
}

StatusOr<bool> IsSubdirectory(const fs::path& entry) {
  std::error_code ec;
  const fs::file_status status = fs::status(entry, ec);
  if (ec && !Vanished(ec)) return UnreadableDirectory(entry.parent_path(), ec, entry);
  return fs::is_directory(status);
}

bool RefusedLink(const fs::path& path, std::vector<Skipped>* skipped) {
  std::error_code ec;
  if (!fs::is_symlink(fs::symlink_status(path, ec))) return false;
  skipped->push_back({path.string(),
                      "a symbolic link: graphdump reads nothing a link inside a dump points to "
                      "(a file written there by graphdump is never a link)"});
  return true;
}

std::string ReadText(const fs::path& path, std::vector<Skipped>* skipped) {
  StatusOr<std::string> text = ReadRegularFile(path.string());
  if (text.ok()) return std::move(*text);
  skipped->push_back({path.string(), text.status().message()});
  return "";
}

bool Present(const fs::path& path, std::vector<Skipped>* skipped) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec && !Vanished(ec)) skipped->push_back({path.string(), "cannot read it: " + ec.message()});
  return fs::exists(status);
}

std::vector<std::string> ReadLines(const fs::path& path, std::vector<Skipped>* skipped) {
  std::vector<std::string> lines;
  const std::string text = ReadText(path, skipped);
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) lines.emplace_back(line);
  }
  return lines;
}

}  // namespace graphdump::analysis
