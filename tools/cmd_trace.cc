// graphdump trace DIR FILE:LINE: which kernels a script line became, and their files.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <iterator>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "analysis_cli.h"
#include "commands.h"
#include "graphdump/analysis/source_json.h"
#include "graphdump/analysis/trace.h"
#include "graphdump/internal/json_text.h"

namespace graphdump::tools {

int RunTrace(int argc, char** argv) {
  CLI::App app{
      "Find the kernels whose source trace (graphs/*.ir) names FILE:LINE, with their "
      "dumped files per iteration.",
      "graphdump trace"};
  std::string dir, where;
  bool json = false;
  int64_t iteration = -1;
  app.add_option("DIR", dir, "dump root or rank_{id} directory")->required();
  app.add_option("FILE:LINE", where, "script line, FILE by basename or path suffix")->required();
  app.add_option("--iteration", iteration, "list the files of this iteration only (default: all)");
  app.add_flag("--json", json, "print JSON");
  app.footer(
      "Examples:\n"
      "  graphdump trace dump/ model.py:58\n"
      "  graphdump trace dump/rank_0 models/resnet.py:120 --json\n"
      "  graphdump trace dump/ model.py:58 --iteration 3\n"
      "A kernel called more than once in an iteration lists each call's files under 'call N'.\n"
      "Exit status: 0 kernels found, 1 none found, 2 usage error, 3 a directory of the dump\n"
      "cannot be read.");
  if (auto rc = ParseArgs(app, argc, argv)) return *rc;
  std::string file;
  int line = 0;
  if (Status st = analysis::ParseFileLine(where, &file, &line); !st.ok()) {
    fmt::print(stderr, "graphdump trace: error: {}\n", st.message());
    return kExitUsage;
  }
  if (app.count("--iteration") > 0 && iteration < 0) {
    fmt::print(stderr, "graphdump trace: error: --iteration {}: iterations count from 0\n",
               iteration);
    return kExitUsage;
  }
  int rc = kExitOk;
  auto ranks = ListRanks("graphdump trace", dir, &rc);
  if (!ranks) return rc;
  std::optional<int64_t> only;
  if (app.count("--iteration") > 0) only = iteration;
  // Ranks are indexed one at a time (as many at once as there are cores): memory holds the ranks
  // being indexed and the matches, not the dump's index.
  std::vector<std::vector<analysis::TraceMatch>> per_rank(ranks->size());
  std::set<int64_t> found;  // the iterations of every rank and graph, constants left out
  size_t traced = 0;        // kernels with source traces, over ranks and graphs
  std::mutex mu;
  const bool streamed = StreamRanks(
      "graphdump trace", std::move(*ranks), true,
      [&](size_t i, analysis::DumpIndex& one) {
        per_rank[i] = analysis::TraceLine(one, file, line, only);
        std::lock_guard<std::mutex> lock(mu);
        for (const auto& g : one.ranks.front().graphs) {
          traced += g.source_traces().size();
          for (const auto& it : g.iterations)
            if (it.iteration >= 0) found.insert(it.iteration);
        }
      },
      &rc).has_value();
  if (!streamed) return rc;
  if (only && !found.count(iteration)) {
    fmt::print(stderr, "graphdump trace: error: --iteration {}: {} holds iterations {}\n",
               iteration, dir, found.empty() ? "none" : fmt::format("{}", fmt::join(found, ", ")));
    return kExitUsage;
  }
  std::vector<analysis::TraceMatch> matches;
  for (auto& rank : per_rank) std::move(rank.begin(), rank.end(), std::back_inserter(matches));
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& m : matches) {
      nlohmann::json files = nlohmann::json::array();
      for (const auto& f : m.files)
        files.push_back({{"iteration", f.iteration}, {"call", f.call}, {"path", f.path}});
      j.push_back({{"rank", m.rank},
                   {"graph_id", m.graph_id},
                   {"kernel", m.full_name},
                   {"location", m.location},
                   {"code", m.code},
                   {"source_trace", analysis::SourceTraceJson<nlohmann::json>(m.source_trace)},
                   {"files", files}});
    }
    fmt::print("{}\n", internal::JsonText(j, 2));
  } else {
    if (matches.empty()) {
      fmt::print(
          "no kernel's source trace names {}:{} ({} kernels have source traces in "
          "graphs/*.ir)\n",
          file, line, traced);
    }
    for (const auto& m : matches) {
      fmt::print("rank {} graph {}: {}\n  at {}{}\n", m.rank, m.graph_id, m.full_name, m.location,
                 m.code.empty() ? "" : ": " + m.code);
      int64_t last = -2;
      int64_t last_call = -1;
      for (const auto& f : m.files) {
        if (f.iteration != last) {
          fmt::print("  {}:\n", f.iteration < 0 ? std::string("constants")
                                                : "iteration " + std::to_string(f.iteration));
          last = f.iteration;
          last_call = -1;
        }
        if (f.calls > 1 && f.call != last_call) {
          fmt::print("    call {}:\n", f.call);
          last_call = f.call;
        }
        fmt::print("    {}{}\n", f.calls > 1 ? "  " : "", f.path);
      }
    }
  }
  return matches.empty() ? kExitFinding : kExitOk;
}

}  // namespace graphdump::tools
