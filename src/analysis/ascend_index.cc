#include "graphdump/analysis/ascend_index.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>

#include "fmt/format.h"
#include "graphdump/analysis/ascend_dump.h"

namespace graphdump {
namespace {

namespace fs = std::filesystem;

template <typename T>
bool ParseNumber(std::string_view s, T* out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

bool ParseShape(std::string_view s, std::vector<int64_t>* shape) {
  shape->clear();
  if (s.empty()) return true;  // a scalar
  for (std::string_view d : Split(s, 'x')) {
    int64_t v = 0;
    if (!ParseNumber(d, &v)) return false;
    shape->push_back(v);
  }
  return true;
}

// Fills the GE fields from the last five directories of `rel_dir`, when they have that form.
void ParseGeDirs(const fs::path& rel_dir, AscendIndexEntry* e) {
  std::vector<std::string> parts;
  for (const auto& p : rel_dir) parts.push_back(p.string());
  if (parts.size() < 5) return;
  const size_t k = parts.size() - 5;
  const std::string& session = parts[k];
  const bool stamp =
      session.size() == 14 && std::all_of(session.begin(), session.end(),
                                          [](unsigned char c) { return std::isdigit(c) != 0; });
  AscendIndexEntry g;
  if (stamp && ParseNumber(parts[k + 1], &g.device_id) && ParseNumber(parts[k + 3], &g.model_id) &&
      ParseNumber(parts[k + 4], &g.data_index)) {
    e->ge_layout = true;
    e->session = session;
    e->device_id = g.device_id;
    e->model_name = parts[k + 2];
    e->model_id = g.model_id;
    e->data_index = g.data_index;
  }
}

// `name`: the dump file name `path` stands for (its own, or mapping.csv's original).
void AddDumpFile(const fs::path& path, const std::string& name, const fs::path& rel_dir,
                 AscendIndex* index) {
  AscendIndexEntry base;
  base.path = path.string();
  base.in_dump_file = true;
  if (!ParseAscendBasename(name, &base)) return;
  ParseGeDirs(rel_dir, &base);
  StatusOr<AscendDumpFile> header = ReadAscendDumpHeader(base.path);
  if (!header.ok()) {
    index->problems.push_back(header.status().message());
    return;
  }
  for (const auto* list : {&header->inputs, &header->outputs}) {
    for (const AscendTensor& t : *list) {
      if (t.absent()) continue;
      AscendIndexEntry e = base;
      e.is_input = t.is_input;
      e.slot = static_cast<uint32_t>(t.index);
      e.shape = t.original_shape.empty() ? t.shape : t.original_shape;
      e.tensor = t;
      index->entries.push_back(std::move(e));
    }
  }
}

}  // namespace

bool ParseAscendBasename(std::string_view basename, AscendIndexEntry* entry) {
  std::vector<std::string_view> f = Split(basename, '.');
  if (f.size() < 5) return false;
  const size_t n = f.size();
  if (!ParseNumber(f[n - 3], &entry->task_id) || !ParseNumber(f[n - 2], &entry->stream_id) ||
      !ParseNumber(f[n - 1], &entry->timestamp) || f[0].empty()) {
    return false;
  }
  entry->op_type = std::string(f[0]);
  const size_t name_begin = f[0].size() + 1;
  const size_t name_end = static_cast<size_t>(f[n - 3].data() - basename.data()) - 1;
  entry->op_name = std::string(basename.substr(name_begin, name_end - name_begin));
  return true;
}

bool ParseConvertedNpyName(std::string_view name, AscendIndexEntry* entry) {
  constexpr std::string_view kExt = ".npy";
  if (name.size() <= kExt.size() || name.substr(name.size() - kExt.size()) != kExt) return false;
  name.remove_suffix(kExt.size());
  std::vector<std::string_view> f = Split(name, '.');
  if (f.size() < 7) return false;
  const size_t n = f.size();
  size_t io_at = 0;
  if (f[n - 3] == "input" || f[n - 3] == "output") {
    if (!ParseShape(f[n - 1], &entry->shape)) return false;
    io_at = n - 3;
  } else if (f[n - 2] == "input" || f[n - 2] == "output") {
    entry->shape.clear();
    io_at = n - 2;
  } else {
    return false;
  }
  if (!ParseNumber(f[io_at + 1], &entry->slot)) return false;
  entry->is_input = f[io_at] == "input";
  const size_t basename_end = static_cast<size_t>(f[io_at].data() - name.data()) - 1;
  return ParseAscendBasename(name.substr(0, basename_end), entry);
}

StatusOr<AscendIndex> IndexAscendDump(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Status::NotFound(fmt::format("{}: no such directory", dir));
  }
  AscendIndex index;
  MappedNames names;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;
    const fs::path& path = it->path();
    const fs::path rel_dir = fs::relative(path.parent_path(), dir);
    const std::string name = names.NameOf(path);
    if (LooksLikeAscendDumpName(name)) {
      AddDumpFile(path, name, rel_dir, &index);
      continue;
    }
    if (fs::path(name).extension() != ".npy") continue;
    AscendIndexEntry e;
    if (!ParseConvertedNpyName(name, &e)) continue;
    e.path = path.string();
    ParseGeDirs(rel_dir, &e);
    index.entries.push_back(std::move(e));
  }
  if (ec) {
    return Status::IOError(fmt::format("{}: cannot read a directory below it: {}", dir,
                                       ec.message()));
  }
  std::sort(index.entries.begin(), index.entries.end(),
            [](const AscendIndexEntry& a, const AscendIndexEntry& b) {
              return std::tie(a.path, b.is_input, a.slot) < std::tie(b.path, a.is_input, b.slot);
            });
  return index;
}

}  // namespace graphdump
