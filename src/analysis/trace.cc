// trace: script line -> kernels (from the .ir source traces) -> dumped files.
#include "graphdump/analysis/trace.h"

#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace graphdump::analysis {
namespace {

// `recorded` names `wanted` when equal, or when one ends with "/" + the other (a basename or a
// path suffix given by the user).
bool SameFile(const std::string& recorded, const std::string& wanted) {
  if (recorded == wanted) return true;
  auto ends_with = [](const std::string& s, const std::string& tail) {
    return s.size() > tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0 &&
           s[s.size() - tail.size() - 1] == '/';
  };
  return ends_with(recorded, wanted) || ends_with(wanted, recorded);
}

}  // namespace

Status ParseFileLine(const std::string& text, std::string* file, int* line) {
  const size_t colon = text.rfind(':');
  const std::string number = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (colon == 0 || number.empty() || number.size() > 9 ||
      number.find_first_not_of("0123456789") != std::string::npos) {
    return Status::InvalidArgument("'" + text + "' is not FILE:LINE (expected e.g. model.py:58)");
  }
  *file = text.substr(0, colon);
  *line = std::stoi(number);
  return Status::Ok();
}

std::vector<TraceMatch> TraceLine(const DumpIndex& index, const std::string& file, int line,
                                  std::optional<int64_t> iteration) {
  std::vector<TraceMatch> matches;
  for (const RankEntry& r : index.ranks) {
    for (const GraphEntry& g : r.graphs) {
      // Kernels in execution order, then any traced kernel the order does not list (found
      // through a hash set: a graph has tens of thousands of kernels).
      const std::unordered_set<std::string_view> ordered(g.execution_order.begin(),
                                                         g.execution_order.end());
      std::vector<const std::string*> listed;
      listed.reserve(g.execution_order.size());
      for (const std::string& name : g.execution_order) listed.push_back(&name);
      for (const auto& [name, trace] : g.source_traces()) {
        if (!ordered.count(name)) listed.push_back(&name);
      }
      // The matches' files are gathered in one pass over the graph's kernels afterwards, not
      // in a pass per match (a line inside a loop or a repeated block matches thousands).
      std::unordered_map<std::string_view, std::vector<size_t>> by_name;  // -> matches
      for (const std::string* listed_name : listed) {
        const std::string& name = *listed_name;
        auto trace = g.source_traces().find(name);
        if (trace == g.source_traces().end()) continue;
        for (const SourceLocation& loc : trace->second) {
          if (loc.line != line || !SameFile(loc.file, file)) continue;
          TraceMatch& m = matches.emplace_back();
          m.rank = r.rank;
          m.graph_id = g.graph_id;
          m.full_name = name;
          m.location = loc.file + ":" + std::to_string(loc.line);
          m.code = loc.code;
          m.source_trace = trace->second;
          by_name[name].push_back(matches.size() - 1);
          break;
        }
      }
      if (by_name.empty()) continue;
      for (const IterationEntry& it : g.iterations) {
        if (iteration && it.iteration != *iteration) continue;
        for (const KernelEntry& k : it.kernels) {
          auto found = by_name.find(k.full_name);
          if (found == by_name.end()) continue;
          for (const TensorEntry& t : k.tensors) {
            const TraceFile where{it.iteration, k.call, k.calls,
                                  t.path.empty() ? it.dir + "/statistic.csv (" +
                                                       (t.is_input ? "input " : "output ") +
                                                       std::to_string(t.slot) + ")"
                                                 : t.path};
            for (size_t m : found->second) matches[m].files.push_back(where);
          }
        }
      }
    }
  }
  return matches;
}

}  // namespace graphdump::analysis
