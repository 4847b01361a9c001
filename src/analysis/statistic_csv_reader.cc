// statistic.csv reading (docs/file-format.md): quoted Shape fields, trailing commas, any statistic
// columns.
#include <charconv>
#include <sstream>

#include "graphdump/analysis/dump_index.h"
#include "graphdump/file_system.h"
#include "graphdump/shape.h"

namespace graphdump::analysis {
namespace {

std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.push_back(field);
      field.clear();
    } else {
      field += c;
    }
  }
  fields.push_back(field);
  return fields;
}

// "(2,3)", "()"; every dimension a non-negative integer and the element count within int64_t.
bool ParseShapeText(const std::string& text, std::vector<int64_t>* shape) {
  shape->clear();
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') return false;
  std::stringstream in(text.substr(1, text.size() - 2));
  std::string dim;
  while (std::getline(in, dim, ',')) {
    const size_t first = dim.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    const size_t last = dim.find_last_not_of(' ');
    int64_t value = 0;
    const char* begin = dim.data() + first;
    const char* end = dim.data() + last + 1;
    auto [ptr, ec] = std::from_chars(begin, end, value);
    if (ec != std::errc() || ptr != end || value < 0) return false;
    shape->push_back(value);
  }
  return ShapeElements(*shape).has_value();
}

bool ParseUnsigned(const std::string& text, uint64_t* out) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
  try {
    *out = std::stoull(text);
  } catch (...) {
    return false;
  }
  return true;
}

}  // namespace

StatusOr<std::vector<StatisticRow>> ParseStatisticCsv(const std::string& path) {
  GRAPHDUMP_ASSIGN_OR_RETURN(std::string text, ReadRegularFile(path));
  return ParseStatisticCsvText(text, path);
}

StatusOr<std::vector<StatisticRow>> ParseStatisticCsvText(const std::string& text,
                                                          const std::string& path) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) return Status::Corrupt(path + ": empty statistic.csv (no header)");
  if (!line.empty() && line.back() == '\r') line.pop_back();
  std::vector<std::string> header = SplitCsvLine(line);
  if (!header.empty() && header.back().empty()) header.pop_back();
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
                           line + "'");
  }
  std::vector<StatisticRow> rows;
  for (int line_no = 2; std::getline(in, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> f = SplitCsvLine(line);
    if (f.size() == header.size() + 1 && f.back().empty()) f.pop_back();  // trailing comma
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    if (f.size() != header.size()) {
      return Status::Corrupt(where + "malformed statistic.csv row: " + std::to_string(f.size()) +
                             " fields, the header has " + std::to_string(header.size()));
    }
    StatisticRow row;
    row.op_type = f[c_type];
    row.op_name = f[c_name];
    if (f[c_io] != "input" && f[c_io] != "output") {
      return Status::Corrupt(where + "IO is '" + f[c_io] + "' (expected input or output)");
    }
    row.is_input = f[c_io] == "input";
    uint64_t slot = 0;
    if (!ParseUnsigned(f[c_slot], &slot)) {
      return Status::Corrupt(where + "Slot is '" + f[c_slot] + "' (expected an integer)");
    }
    row.slot = static_cast<uint32_t>(slot);
    if (c_size >= 0 && !f[c_size].empty() && !ParseUnsigned(f[c_size], &row.data_size)) {
      return Status::Corrupt(where + "Data Size is '" + f[c_size] + "' (expected an integer)");
    }
    if (c_dtype >= 0) row.dtype = f[c_dtype];
    // A timestamp that is not a number only loses the match by time (docs/analysis.md).
    if (c_time >= 0 && !ParseUnsigned(f[c_time], &row.timestamp)) row.timestamp = 0;
    if (c_shape >= 0 && !ParseShapeText(f[c_shape], &row.shape)) {
      return Status::Corrupt(where + "Shape is '" + f[c_shape] +
                             "' (expected \"(d0,d1,...)\" of non-negative integers whose product "
                             "fits int64)");
    }
    for (size_t i = 0; i < header.size(); ++i) {
      if (static_cast<int>(i) == c_type || static_cast<int>(i) == c_name ||
          static_cast<int>(i) == c_io || static_cast<int>(i) == c_slot ||
          static_cast<int>(i) == c_size || static_cast<int>(i) == c_dtype ||
          static_cast<int>(i) == c_shape || header[i] == "Task ID" || header[i] == "Stream ID" ||
          header[i] == "Timestamp") {
        continue;
      }
      row.values[header[i]] = f[i];
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace graphdump::analysis
