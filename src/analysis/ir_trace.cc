// Source traces from graphs/ms_output_trace_code_graph_{id}.ir.
#include <cctype>
#include <charconv>
#include <optional>
#include <string_view>
#include <unordered_set>

#include "graphdump/analysis/dump_index.h"

namespace graphdump::analysis {
namespace {

// Parses the text after "# In file ": "PATH(LINE)/ code/" or "PATH:LINE[~L2, C1~C2]/ code/".
bool ParseInFile(std::string_view rest, SourceLocation* loc) {
  for (size_t p = 0; p < rest.size(); ++p) {
    const char c = rest[p];
    if (c != '(' && c != ':') continue;
    size_t q = p + 1;
    while (q < rest.size() && std::isdigit(static_cast<unsigned char>(rest[q]))) ++q;
    if (q == p + 1 || q >= rest.size()) continue;
    size_t code_start;
    if (c == '(') {
      if (rest[q] != ')' || q + 1 >= rest.size() || rest[q + 1] != '/') continue;
      code_start = q + 2;
    } else {
      if (rest[q] != '/' && rest[q] != '~' && rest[q] != ',') continue;
      const size_t slash = rest.find('/', q);
      if (slash == std::string_view::npos) continue;
      code_start = slash + 1;
    }
    // A line number beyond int (a hand-edited or corrupt .ir) is not a location: std::stoi
    // threw out_of_range there, and the uncaught exception ended the command (fuzz_ir).
    int line = 0;
    const auto [end, error] = std::from_chars(rest.data() + p + 1, rest.data() + q, line);
    if (error != std::errc()) continue;
    loc->file = rest.substr(0, p);
    loc->line = line;
    std::string_view code = rest.substr(code_start);
    while (!code.empty() && (code.back() == '/' || code.back() == ' ')) code.remove_suffix(1);
    const size_t first = code.find_first_not_of(' ');
    loc->code = first == std::string_view::npos ? std::string_view() : code.substr(first);
    return true;
  }
  return false;
}

// The first token of `line` (split at spaces and punctuation) that `known` holds; "" when none.
std::string_view FindKnownName(std::string_view line,
                               const std::unordered_set<std::string_view>& known) {
  auto is_sep = [](char c) {
    return std::isspace(static_cast<unsigned char>(c)) || c == '(' || c == ')' || c == '{' ||
           c == '}' || c == '[' || c == ']' || c == ',' || c == '=' || c == '"' || c == '\'' ||
           c == ';';
  };
  size_t start = 0;
  for (size_t i = 0; i <= line.size(); ++i) {
    if (i < line.size() && !is_sep(line[i])) continue;
    if (i > start && known.count(line.substr(start, i - start))) {
      return line.substr(start, i - start);
    }
    start = i + 1;
  }
  return {};
}

}  // namespace

std::map<std::string, std::vector<SourceLocation>> ParseIrSourceTraces(
    const std::string& text, const std::vector<std::string>& known_names) {
  // A node line names the kernel of the trace lines after it by a known name in it, unless a
  // Fullname line names it first (graphdump's and MindSpore's .ir have one per node): the node
  // line is searched, and the names hashed, only when a trace line needs it.
  std::optional<std::unordered_set<std::string_view>> known;
  std::map<std::string, std::vector<SourceLocation>> traces;
  std::string current;
  std::vector<SourceLocation>* into = nullptr;  // current's trace, once it has a line
  std::string_view node_line;  // the last node line, while its kernel is not known yet
  static constexpr std::string_view kFullname = "Fullname with scope: (";
  static constexpr std::string_view kInFile = "# In file ";
  const std::string_view all(text);
  for (size_t pos = 0; pos < all.size();) {
    size_t end = all.find('\n', pos);
    if (end == std::string_view::npos) end = all.size();
    std::string_view line = all.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string_view::npos) continue;
    const size_t fn = line.find(kFullname);
    if (fn != std::string_view::npos) {
      const size_t open = fn + kFullname.size();
      const size_t close = line.rfind(')');
      current = close != std::string_view::npos && close > open
                    ? line.substr(open, close - open)
                    : std::string_view();
      into = nullptr;
      node_line = {};
      continue;
    }
    const size_t in_file = line.find(kInFile);
    if (in_file != std::string_view::npos) {
      if (node_line.data()) {
        if (!known) known.emplace(known_names.begin(), known_names.end());
        current = FindKnownName(node_line, *known);
        into = nullptr;
        node_line = {};
      }
      SourceLocation loc;
      if (!current.empty() && ParseInFile(line.substr(in_file + kInFile.size()), &loc)) {
        // A kernel's trace lines follow each other: its entry is found once (a map's entries
        // stay where they are).
        if (!into) into = &traces[current];
        into->push_back(std::move(loc));
      }
      continue;
    }
    if (line[start] == '#') continue;
    node_line = line;
  }
  return traces;
}

}  // namespace graphdump::analysis
