// Source traces from graphs/ms_output_trace_code_graph_{id}.ir.
#include <cctype>
#include <charconv>
#include <sstream>
#include <unordered_set>

#include "graphdump/analysis/dump_index.h"

namespace graphdump::analysis {
namespace {

// Parses the text after "# In file ": "PATH(LINE)/ code/" or "PATH:LINE[~L2, C1~C2]/ code/".
bool ParseInFile(const std::string& rest, SourceLocation* loc) {
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
      if (slash == std::string::npos) continue;
      code_start = slash + 1;
    }
    // A line number beyond int (a hand-edited or corrupt .ir) is not a location: std::stoi
    // threw out_of_range there, and the uncaught exception ended the command (fuzz_ir).
    int line = 0;
    const auto [end, error] = std::from_chars(rest.data() + p + 1, rest.data() + q, line);
    if (error != std::errc()) continue;
    loc->file = rest.substr(0, p);
    loc->line = line;
    std::string code = rest.substr(code_start);
    while (!code.empty() && (code.back() == '/' || code.back() == ' ')) code.pop_back();
    const size_t first = code.find_first_not_of(' ');
    loc->code = first == std::string::npos ? "" : code.substr(first);
    return true;
  }
  return false;
}

std::string FindKnownName(const std::string& line, const std::unordered_set<std::string>& known) {
  std::string token;
  auto is_sep = [](char c) {
    return std::isspace(static_cast<unsigned char>(c)) || c == '(' || c == ')' || c == '{' ||
           c == '}' || c == '[' || c == ']' || c == ',' || c == '=' || c == '"' || c == '\'' ||
           c == ';';
  };
  for (size_t i = 0; i <= line.size(); ++i) {
    if (i == line.size() || is_sep(line[i])) {
      if (!token.empty() && known.count(token)) return token;
      token.clear();
    } else {
      token += line[i];
    }
  }
  return "";
}

}  // namespace

std::map<std::string, std::vector<SourceLocation>> ParseIrSourceTraces(
    const std::string& text, const std::vector<std::string>& known_names) {
  const std::unordered_set<std::string> known(known_names.begin(), known_names.end());
  std::map<std::string, std::vector<SourceLocation>> traces;
  std::istringstream in(text);
  std::string line, current;
  static const std::string kFullname = "Fullname with scope: (";
  static const std::string kInFile = "# In file ";
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos) continue;
    const size_t fn = line.find(kFullname);
    if (fn != std::string::npos) {
      const size_t open = fn + kFullname.size();
      const size_t close = line.rfind(')');
      current = close != std::string::npos && close > open ? line.substr(open, close - open) : "";
      continue;
    }
    const size_t in_file = line.find(kInFile);
    if (in_file != std::string::npos) {
      SourceLocation loc;
      if (!current.empty() && ParseInFile(line.substr(in_file + kInFile.size()), &loc)) {
        traces[current].push_back(std::move(loc));
      }
      continue;
    }
    if (line[start] == '#') continue;
    current = FindKnownName(line, known);
  }
  return traces;
}

}  // namespace graphdump::analysis
