// statistic.csv reading (docs/file-format.md): quoted Shape fields, trailing commas, any statistic
// columns.
// One pass over the file's text with fields as views into it: no string per field, and the
// statistic cells of every row in one string shared by the rows (StatisticCells).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <mutex>
#include <set>
#include <string_view>
#include <unordered_set>

#include "dump_index_parts.h"
#include "graphdump/analysis/dump_index.h"
#include "graphdump/file_system.h"
#include "graphdump/shape.h"

namespace graphdump::analysis {
namespace {

// Splits `line` at commas outside quotes into `fields`, quote characters removed. Fields are
// views into `line`; a field whose quotes do not enclose it whole (`a"b,c"d`) is a view into
// `scratch`, which is reserved once per line so that the views stay valid.
void SplitCsvLine(std::string_view line, std::string* scratch,
                  std::vector<std::string_view>* fields) {
  fields->clear();
  scratch->clear();
  size_t start = 0;
  while (true) {
    // The common field: no quote, or one quoted whole ("(16,16)").
    if (start < line.size() && line[start] == '"') {
      const size_t close = line.find('"', start + 1);
      if (close != std::string_view::npos &&
          (close + 1 == line.size() || line[close + 1] == ',')) {
        fields->push_back(line.substr(start + 1, close - start - 1));
        if (close + 1 == line.size()) return;
        start = close + 2;
        continue;
      }
    } else {
      size_t end = start;
      while (end < line.size() && line[end] != ',' && line[end] != '"') ++end;
      if (end == line.size()) {
        fields->push_back(line.substr(start));
        return;
      }
      if (line[end] == ',') {
        fields->push_back(line.substr(start, end - start));
        start = end + 1;
        continue;
      }
    }
    // Quotes inside the field: the field's characters without them, into `scratch`.
    if (scratch->capacity() < line.size()) scratch->reserve(line.size());
    const size_t from = scratch->size();
    bool quoted = false;
    size_t i = start;
    for (; i < line.size() && (quoted || line[i] != ','); ++i) {
      if (line[i] == '"') {
        quoted = !quoted;
      } else {
        scratch->push_back(line[i]);
      }
    }
    fields->push_back(std::string_view(*scratch).substr(from));
    if (i >= line.size()) return;
    start = i + 1;
  }
}

// "(2,3)", "()"; every dimension a non-negative integer and the element count within int64_t.
bool ParseShapeText(std::string_view text, RowShape* shape) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') return false;
  text = text.substr(1, text.size() - 2);
  // The dimensions in place; past RowShape::kInPlace of them, in `many`.
  int64_t few[RowShape::kInPlace];
  std::vector<int64_t> many;
  size_t n = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view dim = text.substr(start, comma - start);
    start = comma + 1;
    while (!dim.empty() && dim.front() == ' ') dim.remove_prefix(1);
    while (!dim.empty() && dim.back() == ' ') dim.remove_suffix(1);
    if (dim.empty()) continue;
    int64_t value = 0;
    auto [ptr, ec] = std::from_chars(dim.data(), dim.data() + dim.size(), value);
    if (ec != std::errc() || ptr != dim.data() + dim.size() || value < 0) return false;
    if (n < RowShape::kInPlace) {
      few[n] = value;
    } else {
      if (n == RowShape::kInPlace) many.assign(few, few + n);
      many.push_back(value);
    }
    ++n;
  }
  const int64_t* dims = n <= RowShape::kInPlace ? few : many.data();
  if (!ShapeElements(std::span<const int64_t>(dims, n))) return false;
  shape->Assign(dims, n);
  return true;
}

// Digits only, within uint64_t; `*out` is left alone otherwise.
bool ParseUnsigned(std::string_view text, uint64_t* out) {
  if (text.empty()) return false;
  uint64_t value = 0;
  for (char c : text) {
    const unsigned digit = static_cast<unsigned char>(c) - unsigned{'0'};
    if (digit > 9 || __builtin_mul_overflow(value, uint64_t{10}, &value) ||
        __builtin_add_overflow(value, uint64_t{digit}, &value)) {
      return false;
    }
  }
  *out = value;
  return true;
}

// The next line of `text` from `*pos` (without its '\n' and a '\r' before it); false at the end.
bool NextLine(std::string_view text, size_t* pos, std::string_view* line) {
  if (*pos >= text.size()) return false;
  size_t end = text.find('\n', *pos);
  if (end == std::string_view::npos) end = text.size();
  *line = text.substr(*pos, end - *pos);
  *pos = end + 1;
  if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
  return true;
}

}  // namespace

std::optional<std::string_view> StatisticValues::Find(std::string_view column) const {
  if (!cells_) return std::nullopt;
  const char* p = cells_->bytes.data() + offset_;
  for (const std::string& title : cells_->titles) {
    const uint32_t n = Length(p);
    if (title == column) return std::string_view(p + 4, n);
    p += 4 + n;
  }
  return std::nullopt;
}

std::string_view StatisticValues::at(std::string_view column) const {
  return Find(column).value_or(std::string_view());
}

void StatisticValues::Set(const std::string& column, std::string_view cell) {
  auto copy = std::make_shared<StatisticCells>();
  bool replaced = false;
  ForEach([&](const std::string& title, std::string_view value) {
    copy->titles.push_back(title);
    Append(copy.get(), title == column ? (replaced = true, cell) : value);
  });
  if (!replaced) {
    copy->titles.push_back(column);
    Append(copy.get(), cell);
  }
  cells_ = std::move(copy);
  offset_ = 0;
}

std::string_view InternDTypeName(std::string_view name) {
  static std::mutex mu;
  static std::set<std::string, std::less<>> names;  // nodes never move
  std::lock_guard<std::mutex> lock(mu);
  auto found = names.find(name);
  if (found == names.end()) found = names.emplace(name).first;
  return *found;
}

Status ParseStatisticRows(std::string_view text, const std::string& path,
                          const StatisticRowSink& each) {
  size_t pos = 0;
  std::string_view line;
  if (!NextLine(text, &pos, &line)) {
    return Status::Corrupt(path + ": empty statistic.csv (no header)");
  }
  std::string scratch;
  std::vector<std::string_view> f;
  SplitCsvLine(line, &scratch, &f);
  if (!f.empty() && f.back().empty()) f.pop_back();  // a trailing comma
  if (f.size() > kMaxStatisticColumns) {
    return Status::Corrupt(fmt::format(
        "{}:1: statistic.csv header has {} columns; at most {} are read (docs/file-format.md)",
        path, f.size(), kMaxStatisticColumns));
  }
  std::vector<std::string> header(f.begin(), f.end());
  auto column = [&](const std::string& name) -> int {
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return static_cast<int>(i);
    return -1;
  };
  const int c_type = column("Op Type"), c_name = column("Op Name"), c_io = column("IO"),
            c_slot = column("Slot"), c_size = column("Data Size"), c_dtype = column("Data Type"),
            c_shape = column("Shape"), c_time = column("Timestamp");
  if (c_type < 0 || c_name < 0 || c_io < 0 || c_slot < 0) {
    return Status::Corrupt(path +
                           ":1: malformed statistic.csv header: expected columns 'Op Type', "
                           "'Op Name', 'IO' and 'Slot', found '" +
                           std::string(line) + "'");
  }
  // The statistic columns, in the file's order; a title given twice keeps its last cell (found
  // from the end, each title hashed once).
  std::vector<size_t> value_columns;
  std::unordered_set<std::string_view> later;
  for (size_t i = header.size(); i-- > 0;) {
    const int c = static_cast<int>(i);
    if (c == c_type || c == c_name || c == c_io || c == c_slot || c == c_size || c == c_dtype ||
        c == c_shape || header[i] == "Task ID" || header[i] == "Stream ID" ||
        header[i] == "Timestamp") {
      continue;
    }
    if (later.insert(header[i]).second) value_columns.push_back(i);
  }
  std::reverse(value_columns.begin(), value_columns.end());
  auto cells = std::make_shared<StatisticCells>();
  for (size_t i : value_columns) cells->titles.push_back(header[i]);
  // The cells take about what the lines take.
  cells->bytes.reserve(pos < text.size() ? text.size() - pos : 0);
  const std::shared_ptr<const StatisticCells> shared = cells;
  std::string_view dtype = InternDTypeName("");
  for (int line_no = 2; NextLine(text, &pos, &line); ++line_no) {
    if (line.empty()) continue;
    SplitCsvLine(line, &scratch, &f);
    if (f.size() == header.size() + 1 && f.back().empty()) f.pop_back();  // trailing comma
    auto where = [&] { return path + ":" + std::to_string(line_no) + ": "; };
    if (f.size() != header.size()) {
      return Status::Corrupt(where() + "malformed statistic.csv row: " +
                             std::to_string(f.size()) + " fields, the header has " +
                             std::to_string(header.size()));
    }
    StatisticRow row;
    if (f[c_io] != "input" && f[c_io] != "output") {
      return Status::Corrupt(where() + "IO is '" + std::string(f[c_io]) +
                             "' (expected input or output)");
    }
    row.is_input = f[c_io] == "input";
    uint64_t slot = 0;
    if (!ParseUnsigned(f[c_slot], &slot)) {
      return Status::Corrupt(where() + "Slot is '" + std::string(f[c_slot]) +
                             "' (expected an integer)");
    }
    row.slot = static_cast<uint32_t>(slot);
    if (c_size >= 0 && !f[c_size].empty() && !ParseUnsigned(f[c_size], &row.data_size)) {
      return Status::Corrupt(where() + "Data Size is '" + std::string(f[c_size]) +
                             "' (expected an integer)");
    }
    if (c_dtype >= 0) {
      if (f[c_dtype] != dtype) dtype = InternDTypeName(f[c_dtype]);  // the last row's, mostly
      row.dtype = dtype;
    }
    // A timestamp that is not a number only loses the match by time (docs/analysis.md).
    if (c_time >= 0 && !ParseUnsigned(f[c_time], &row.timestamp)) row.timestamp = 0;
    if (c_shape >= 0 && !ParseShapeText(f[c_shape], &row.shape)) {
      return Status::Corrupt(where() + "Shape is '" + std::string(f[c_shape]) +
                             "' (expected \"(d0,d1,...)\" of non-negative integers whose product "
                             "fits int64)");
    }
    row.values = StatisticValues(shared, cells->bytes.size());
    for (size_t i : value_columns) StatisticValues::Append(cells.get(), f[i]);
    each(f[c_type], f[c_name], std::move(row));
  }
  return Status::Ok();
}

StatusOr<std::vector<NamedStatisticRow>> ParseStatisticCsv(const std::string& path) {
  GRAPHDUMP_ASSIGN_OR_RETURN(std::string text, ReadRegularFile(path));
  return ParseStatisticCsvText(text, path);
}

StatusOr<std::vector<NamedStatisticRow>> ParseStatisticCsvText(const std::string& text,
                                                               const std::string& path) {
  std::vector<NamedStatisticRow> rows;
  rows.reserve(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')));
  GRAPHDUMP_RETURN_IF_ERROR(ParseStatisticRows(
      text, path, [&](std::string_view op_type, std::string_view op_name, StatisticRow row) {
        NamedStatisticRow& named = rows.emplace_back();
        static_cast<StatisticRow&>(named) = std::move(row);
        named.op_type = op_type;
        named.op_name = op_name;
      }));
  return rows;
}

}  // namespace graphdump::analysis
