// graphdump ls DIR: what a dump directory holds.
#include <fmt/format.h>

#include <iterator>
#include <nlohmann/json.hpp>
#include <vector>

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

// What ls shows of one rank: its text, or its JSON, and its counts.
struct RankListing {
  std::string text;
  nlohmann::json json;
  Totals total;
  uint64_t graphs = 0, iterations = 0;
};

RankListing ListRank(const analysis::RankEntry& r, bool json, bool kernels) {
  RankListing out;
  nlohmann::json& jr = out.json;
  jr = {{"rank", r.rank}, {"dir", r.dir}, {"graphs", nlohmann::json::array()}};
  auto text = std::back_inserter(out.text);
  if (!json) fmt::format_to(text, "rank {}: {} graph(s)  ({})\n", r.rank, r.graphs.size(), r.dir);
  for (const auto& g : r.graphs) {
    ++out.graphs;
    nlohmann::json jg = {{"graph_id", g.graph_id},
                         {"net_name", g.net_name},
                         {"execution_order_kernels", g.execution_order.size()},
                         {"traced_kernels", g.source_traces().size()},
                         {"iterations", nlohmann::json::array()}};
    if (!json) {
      fmt::format_to(text,
                     "  graph {} (net {}): {} iteration dir(s), execution order of {} kernels, "
                     "{} with source traces\n",
                     g.graph_id, g.net_name, g.iterations.size(), g.execution_order.size(),
                     g.source_traces().size());
    }
    for (const auto& it : g.iterations) {
      const Totals t = Count(it);
      out.total.Add(t);
      if (it.iteration >= 0) ++out.iterations;
      if (json) {
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
        jg["iterations"].push_back(std::move(ji));
        continue;
      }
      fmt::format_to(
          text,
          "    {:>12}: {} kernel calls, {} tensors ({} files, {} statistic-only; {} "
          "statistic.csv rows), {}\n",
          it.iteration < 0 ? std::string("constants")
                           : "iteration " + std::to_string(it.iteration),
          t.kernels, t.tensors, t.files, t.stat_only, t.rows, TableBytes(t.bytes));
      if (!kernels) continue;
      for (const auto& k : it.kernels) {
        fmt::format_to(text, "      {}{}\n", k.full_name,
                       k.calls > 1 ? fmt::format(" (call {} of {})", k.call, k.calls) : "");
        for (const auto& tensor : k.tensors) {
          fmt::format_to(text, "        {} {} {} {}\n", tensor.is_input ? "input " : "output",
                         tensor.slot, tensor.dtype_name,
                         tensor.path.empty() ? std::string("(statistic.csv only)") : tensor.path);
        }
      }
    }
    if (json) jr["graphs"].push_back(std::move(jg));
  }
  return out;
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
      "Reads graphdump's layout and MindSpore's (Float32 dtype suffix, mapping.csv, constants/).\n"
      "Exit status: 0 listed, 2 usage error (a missing or non-dump directory), 3 a directory of\n"
      "the dump cannot be read.");
  if (auto rc = ParseArgs(app, argc, argv)) return *rc;
  int rc = kExitOk;
  auto ranks = ListRanks("graphdump ls", dir, &rc);
  if (!ranks) return rc;
  // Ranks are indexed one at a time (as many at once as there are cores), and each is printed
  // (or kept as its JSON) once the ranks before it are: memory holds the ranks being indexed and
  // what is shown, not the dump's index.
  const std::string root = ranks->root;
  if (!json) fmt::print("dump: {}\n", root);
  std::vector<RankListing> listed(ranks->size());
  InOrderPrinter printer(ranks->size());
  const std::optional<analysis::StreamedDump> streamed_or = StreamRanks(
      "graphdump ls", std::move(*ranks), true,
      [&](size_t i, analysis::DumpIndex& one) {
        RankListing rank = ListRank(one.ranks.front(), json, kernels);
        if (!json) printer.Put(i, std::move(rank.text));
        listed[i] = std::move(rank);
      },
      &rc);
  if (!streamed_or) return rc;
  const analysis::StreamedDump& streamed = *streamed_or;
  nlohmann::json j = {{"root", root}, {"ranks", nlohmann::json::array()}};
  Totals total;
  uint64_t graphs = 0, iterations = 0;
  for (RankListing& r : listed) {
    total.Add(r.total);
    graphs += r.graphs;
    iterations += r.iterations;
    if (json) j["ranks"].push_back(std::move(r.json));
  }
  j["total"] = TotalsJson(total);
  j["total"]["ranks"] = streamed.ranks;
  j["total"]["graphs"] = graphs;
  j["total"]["iterations"] = iterations;
  j["warnings"] = streamed.warnings;  // also on stderr: a rank marked incomplete, two runs
  j["skipped"] = nlohmann::json::array();
  for (const auto& s : streamed.skipped)
    j["skipped"].push_back({{"path", s.path}, {"reason", s.reason}});
  if (json) {
    fmt::print("{}\n", internal::JsonText(j, 2));
  } else {
    fmt::print(
        "total: {} rank(s), {} graph(s), {} iteration(s), {} kernel calls, {} tensors "
        "({} files, {} statistic-only; {} statistic.csv rows), {}\n",
        streamed.ranks, graphs, iterations, total.kernels, total.tensors, total.files,
        total.stat_only, total.rows, TableBytes(total.bytes));
    PrintSkipped("graphdump ls", streamed.skipped);
  }
  return kExitOk;
}

}  // namespace graphdump::tools
