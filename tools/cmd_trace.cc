// graphdump trace DIR FILE:LINE: which kernels a script line became, and their files.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "analysis_cli.h"
#include "commands.h"
#include "graphdump/analysis/trace.h"
#include "graphdump/analysis/source_json.h"
#include "graphdump/internal/json_text.h"

namespace graphdump::tools {

int RunTrace(int argc, char** argv) {
  CLI::App app{
      "Find the kernels whose source trace (graphs/*.ir) names FILE:LINE, with their "
      "dumped files per iteration.",
      "graphdump trace"};
  std::string dir, where;
  bool json = false;
  app.add_option("DIR", dir, "dump root or rank_{id} directory")->required();
  app.add_option("FILE:LINE", where, "script line, FILE by basename or path suffix")->required();
  app.add_flag("--json", json, "print JSON");
  app.footer(
      "Examples:\n"
      "  graphdump trace dump/ model.py:58\n"
      "  graphdump trace dump/rank_0 models/resnet.py:120 --json\n"
      "Exit status: 0 kernels found, 1 none found, 2 usage error.");
  if (auto rc = ParseArgs(app, argc, argv)) return *rc;
  std::string file;
  int line = 0;
  if (Status st = analysis::ParseFileLine(where, &file, &line); !st.ok()) {
    fmt::print(stderr, "graphdump trace: error: {}\n", st.message());
    return kExitUsage;
  }
  int rc = kExitOk;
  auto index = OpenDump("graphdump trace", dir, &rc);
  if (!index) return rc;
  const auto matches = analysis::TraceLine(*index, file, line);
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& m : matches) {
      nlohmann::json files = nlohmann::json::array();
      for (const auto& f : m.files) files.push_back({{"iteration", f.iteration}, {"path", f.path}});
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
      size_t traced = 0;
      for (const auto& r : index->ranks)
        for (const auto& g : r.graphs) traced += g.source_traces.size();
      fmt::print(
          "no kernel's source trace names {}:{} ({} kernels have source traces in "
          "graphs/*.ir)\n",
          file, line, traced);
    }
    for (const auto& m : matches) {
      fmt::print("rank {} graph {}: {}\n  at {}{}\n", m.rank, m.graph_id, m.full_name, m.location,
                 m.code.empty() ? "" : ": " + m.code);
      int64_t last = -2;
      for (const auto& f : m.files) {
        if (f.iteration != last) {
          fmt::print("  {}:\n", f.iteration < 0 ? std::string("constants")
                                                : "iteration " + std::to_string(f.iteration));
          last = f.iteration;
        }
        fmt::print("    {}\n", f.path);
      }
    }
  }
  return matches.empty() ? kExitFinding : kExitOk;
}

}  // namespace graphdump::tools
