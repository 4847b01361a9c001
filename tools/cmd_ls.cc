// graphdump ls DIR: what a dump directory holds.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "analysis_cli.h"
#include "commands.h"
#include "graphdump/internal/json_text.h"

namespace graphdump::tools {
namespace {

// What an iteration (or the dump) holds. `kernels` counts kernel calls: a kernel called twice
// in an iteration is two entries (docs/analysis.md); every file and statistic.csv row counts.
struct Totals {
  uint64_t kernels = 0, tensors = 0, files = 0, stat_only = 0, rows = 0, bytes = 0;
  void Add(const Totals& o) {
    kernels += o.kernels, tensors += o.tensors, files += o.files, stat_only += o.stat_only,
        rows += o.rows, bytes += o.bytes;
  }
};

Totals Count(const analysis::IterationEntry& it) {
  Totals t;
  t.kernels = it.kernels.size();
  for (const auto& k : it.kernels) {
    for (const auto& tensor : k.tensors) {
      ++t.tensors;
      if (tensor.stats) ++t.rows;
      if (tensor.path.empty()) {
        ++t.stat_only;
      } else {
        ++t.files;
        t.bytes += tensor.file_bytes;
      }
    }
  }
  return t;
}

nlohmann::json TotalsJson(const Totals& t) {
  return {{"kernels", t.kernels},          {"tensors", t.tensors},     {"files", t.files},
          {"statistic_only", t.stat_only}, {"statistic_rows", t.rows}, {"bytes", t.bytes}};
}

}  // namespace

int RunLs(int argc, char** argv) {
  CLI::App app{
      "List what a dump directory holds: ranks, graphs, iterations, kernels, tensors "
      "and bytes, with a summary per iteration.",
      "graphdump ls"};
  std::string dir;
  bool json = false, kernels = false;
  app.add_option("DIR", dir, "dump root (holding rank_{id}/) or one rank_{id} directory")
      ->required();
  app.add_flag("--json", json, "print JSON instead of text");
  app.add_flag("-k,--kernels", kernels, "also list each iteration's kernels and tensor files");
  app.footer(
      "Examples:\n"
      "  graphdump ls dump/\n"
      "  graphdump ls dump/rank_0 --kernels\n"
      "  graphdump ls dump/ --json | jq '.ranks[0].graphs[0].iterations'\n"
      "Reads graphdump's layout and MindSpore's (Float32 dtype suffix, mapping.csv, constants/).");
  if (auto rc = ParseArgs(app, argc, argv)) return *rc;
  int rc = kExitOk;
  auto index = OpenDump("graphdump ls", dir, &rc);
  if (!index) return rc;

  nlohmann::json j = {{"root", index->root}, {"ranks", nlohmann::json::array()}};
  Totals total;
  uint64_t graphs = 0, iterations = 0;
  if (!json) fmt::print("dump: {}\n", index->root);
  for (const auto& r : index->ranks) {
    nlohmann::json jr = {{"rank", r.rank}, {"dir", r.dir}, {"graphs", nlohmann::json::array()}};
    if (!json) fmt::print("rank {}: {} graph(s)  ({})\n", r.rank, r.graphs.size(), r.dir);
    for (const auto& g : r.graphs) {
      ++graphs;
      nlohmann::json jg = {{"graph_id", g.graph_id},
                           {"net_name", g.net_name},
                           {"execution_order_kernels", g.execution_order.size()},
                           {"traced_kernels", g.source_traces.size()},
                           {"iterations", nlohmann::json::array()}};
      if (!json) {
        fmt::print(
            "  graph {} (net {}): {} iteration dir(s), execution order of {} kernels, "
            "{} with source traces\n",
            g.graph_id, g.net_name, g.iterations.size(), g.execution_order.size(),
            g.source_traces.size());
      }
      for (const auto& it : g.iterations) {
        const Totals t = Count(it);
        total.Add(t);
        if (it.iteration >= 0) ++iterations;
        nlohmann::json ji = TotalsJson(t);
        ji["iteration"] =
            it.iteration < 0 ? nlohmann::json("constants") : nlohmann::json(it.iteration);
        ji["dir"] = it.dir;
        if (kernels) {
          ji["kernel_list"] = nlohmann::json::array();
          for (const auto& k : it.kernels) {
            nlohmann::json files = nlohmann::json::array();
            for (const auto& tensor : k.tensors) files.push_back(tensor.path);
            ji["kernel_list"].push_back(
                {{"full_name", k.full_name},
                 {"op_type", k.op_type},
                 {"order", k.order},
                 {"call", k.call},
                 {"calls", k.calls},
                 {"timestamp", k.first_timestamp == UINT64_MAX ? nlohmann::json(nullptr)
                                                               : nlohmann::json(k.first_timestamp)},
                 {"files", files}});
          }
        }
        jg["iterations"].push_back(ji);
        if (json) continue;
        fmt::print(
            "    {:>12}: {} kernel calls, {} tensors ({} files, {} statistic-only; {} "
            "statistic.csv rows), {}\n",
            it.iteration < 0 ? std::string("constants")
                             : "iteration " + std::to_string(it.iteration),
            t.kernels, t.tensors, t.files, t.stat_only, t.rows, TableBytes(t.bytes));
        if (!kernels) continue;
        for (const auto& k : it.kernels) {
          fmt::print("      {}{}\n", k.full_name,
                     k.calls > 1 ? fmt::format(" (call {} of {})", k.call, k.calls) : "");
          for (const auto& tensor : k.tensors) {
            fmt::print("        {} {} {} {}\n", tensor.is_input ? "input " : "output", tensor.slot,
                       tensor.dtype_name,
                       tensor.path.empty() ? std::string("(statistic.csv only)") : tensor.path);
          }
        }
      }
      jr["graphs"].push_back(jg);
    }
    j["ranks"].push_back(jr);
  }
  j["total"] = TotalsJson(total);
  j["total"]["ranks"] = index->ranks.size();
  j["total"]["graphs"] = graphs;
  j["total"]["iterations"] = iterations;
  j["skipped"] = nlohmann::json::array();
  for (const auto& s : index->skipped)
    j["skipped"].push_back({{"path", s.path}, {"reason", s.reason}});
  if (json) {
    fmt::print("{}\n", internal::JsonText(j, 2));
  } else {
    fmt::print(
        "total: {} rank(s), {} graph(s), {} iteration(s), {} kernel calls, {} tensors "
        "({} files, {} statistic-only; {} statistic.csv rows), {}\n",
        index->ranks.size(), graphs, iterations, total.kernels, total.tensors, total.files,
        total.stat_only, total.rows, TableBytes(total.bytes));
    PrintSkipped("graphdump ls", index->skipped);
  }
  return kExitOk;
}

}  // namespace graphdump::tools
