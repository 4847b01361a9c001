// graphdump watch DIR --check ...: the first NaN, overflow, vanishing gradient...
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "analysis_cli.h"
#include "analysis_distributed.h"
#include "distributed_commands.h"
#include "commands.h"
#include "graphdump/analysis/watch.h"

namespace graphdump::tools {
namespace {

// "rank 3 " in a dump of several ranks, where every line names its rank; "" in one of one rank.
std::string RankTag(const analysis::WatchResult& result, uint32_t rank) {
  return result.ranks > 1 ? fmt::format("rank {} ", rank) : "";
}

void PrintFirstHit(const std::string& label, const analysis::WatchHit& f) {
  fmt::print("{}: {} (rank {}, graph {}, iteration {}{}, {} {}){}: [{}] {}\n", label, f.kernel,
             f.rank, f.graph_id, f.iteration,
             f.calls > 1 ? fmt::format(", call {} of {}", f.call, f.calls) : "",
             f.is_input ? "input" : "output", f.slot,
             f.source_line.empty() ? "" : " at " + f.source_line, f.check, f.detail);
}

// Multi-rank dumps: the first hit of each rank, the rank that hit first on top.
void PrintPerRank(const analysis::WatchResult& result) {
  const std::vector<analysis::WatchHit> firsts = analysis::FirstHitPerRank(result);
  fmt::print("first hit per rank ({} of {} ranks hit):\n", firsts.size(), result.ranks);
  for (const analysis::WatchHit& h : firsts) {
    fmt::print("  rank {}: it {}{}{} {} {} {}: [{}] {}\n", h.rank, h.iteration,
               CallTag(h.call, h.calls), OrderTag(h.order), h.kernel,
               h.is_input ? "input" : "output", h.slot, h.check, h.detail);
  }
  if (!firsts.empty()) {
    PrintFirstHit(fmt::format("first rank to hit: rank {}; first hit", firsts.front().rank),
                  firsts.front());
  }
}

// --first: what followed the first hit of `first`'s rank: how many hits, in which kernels and
// iterations, the kernels in the order they were hit.
void PrintPropagation(const analysis::WatchResult& result, const analysis::WatchHit& first) {
  constexpr size_t kShown = 5;
  auto kept = result.spreads.find(first.rank);
  const analysis::HitSpread spread = kept != result.spreads.end()
                                         ? kept->second
                                         : analysis::SpreadAfter(result.hits, first, kShown);
  if (spread.later == 0) {
    fmt::print("then: no other hit{}\n", result.ranks > 1 ? " on this rank" : "");
    return;
  }
  std::string names;
  for (size_t i = 0; i < spread.kernels.size() && i < kShown; ++i) {
    names += (i ? ", " : "") + spread.kernels[i];
  }
  if (spread.kernel_count > kShown) {
    names += fmt::format(" (and {} more)", spread.kernel_count - kShown);
  }
  fmt::print("then: {} more hit(s){}, {} other kernel(s), iterations {} to {}{}{}\n", spread.later,
             result.ranks > 1 ? " on this rank" : "", spread.kernel_count, first.iteration,
             spread.last_iteration, spread.kernel_count == 0 ? "" : "; next hit: ", names);
}

// Infinities written on purpose (an attention mask): not hits, but said (docs/analysis.md).
void PrintIntended(const analysis::WatchResult& result) {
  if (result.intended.empty()) return;
  fmt::print(
      "not hits: {} tensor(s) hold only infinities an operator writes on purpose "
      "(--count-intended-inf counts them):\n",
      result.intended.size() + result.dropped_intended);
  constexpr size_t kShown = 3;
  for (size_t i = 0; i < result.intended.size() && i < kShown; ++i) {
    const analysis::WatchHit& h = result.intended[i];
    fmt::print("     {}it {}{} {} {} {}: {}\n", RankTag(result, h.rank), h.iteration,
               CallTag(h.call, h.calls), h.kernel, h.is_input ? "input" : "output", h.slot,
               h.detail);
  }
  if (result.intended.size() + result.dropped_intended > kShown) {
    fmt::print("     ... (see --json intended_infinities)\n");
  }
}

// 1 with a hit; else 3 when a check judged nothing (said on stderr: not an all-clear), else 0.
int ExitStatus(size_t hits, const std::map<std::string, int64_t>& judged) {
  const std::vector<std::string> nothing = analysis::NothingJudged(judged);
  for (const std::string& line : nothing) fmt::print(stderr, "graphdump watch: {}\n", line);
  if (hits > 0) return kExitFinding;
  return nothing.empty() ? kExitOk : kExitFailure;
}

// --json over one process: the hits spilled rank by rank and merged while printed, so memory
// does not grow with them (the JSON itself can be larger than memory).
int PrintSpilledJson(const std::string& dir, const std::vector<analysis::WatchCheck>& checks,
                     const analysis::WatchOptions& options) {
  std::vector<std::string> warnings;
  auto watched = analysis::SpilledWatch::Run(dir, checks, options, &warnings);
  if (!watched.ok()) return OpenError("graphdump watch", watched.status());
  PrintWarnings("graphdump watch", warnings);
  const analysis::SpilledWatch& result = **watched;
  if (int rc = PrintStreamedJson("graphdump watch",
                                 [&](const auto& write) { return result.WriteJson(write); })) {
    return rc;
  }
  PrintSkipped("graphdump watch", result.skipped());
  return ExitStatus(result.hits(), result.judged());
}

}  // namespace

int RunWatch(int argc, char** argv) {
  CLI::App app{
      "Check every dumped tensor against watchpoints and print the hits in execution "
      "order, the first one highlighted with its kernel, iteration and source line.",
      "graphdump watch"};
  std::string dir, checks_text = "nan,inf";
  bool json = false, quiet = false, first_only = false;
  size_t limit = 20;
  int nproc = 0;
  analysis::WatchOptions options;
  app.add_option("DIR", dir, "dump root or rank_{id} directory")->required();
  app.add_option("--check", checks_text, "comma-separated: " + analysis::WatchChecksHelp())
      ->capture_default_str();
  app.add_option("-j,--threads", options.threads, "worker threads (default: all cores)");
  app.add_flag("--first", first_only,
               "print only the first hit (of each rank) and a summary of the hits after it "
               "(how many, in which kernels and iterations): what the first bad value spread to");
  app.add_option("--limit", limit, "print at most N hits (0: all; --json always lists all)")
      ->capture_default_str();
  app.add_flag("--count-intended-inf", options.count_intended_inf,
               "count the infinities an operator writes on purpose (masked_fill, where, full or "
               "fill with a constant +-inf) as inf, overflow and large hits; without it they "
               "are listed apart");
  app.add_flag("--json", json, "print JSON (every hit)");
  app.add_flag("-q,--quiet", quiet, "no progress bar");
  app.add_option("--nproc", nproc,
                 "run as N processes of one torch.distributed (gloo) job on this machine, each "
                 "reading its share of the rank_{id} directories (docs/scale.md)");
  app.footer(
      "Examples:\n"
      "  graphdump watch dump/ --check nan,inf,overflow\n"
      "  graphdump watch dump/ --nproc 4      (4 processes, the same answer)\n"
      "  graphdump watch dump/ --check grad-vanish:1e-9,grad-explode:100\n"
      "  graphdump watch dump/ --check weight-unchanged,weight-change:0.5 --json\n"
      "  graphdump watch dump/ --check nan,inf --first\n"
      "Without --check: nan,inf. NaN is always a hit. Infinities an operator writes on purpose\n"
      "(masked_fill, where, full or fill with its own constant +-inf argument, as an attention\n"
      "mask does; the same tensor as a later kernel's input; and what a kernel carries on from\n"
      "such inputs, as add(scores, mask) does, when its inputs hold no other infinity) are\n"
      "listed apart, not as hits.\n"
      "Only floating-point tensors are value-checked; 'zero' skips\n"
      "parameters and constants. A tensor dumped as statistics only (saved_data statistic) is\n"
      "judged by its statistic.csv row: counts are printed only where the row has a count\n"
      "column, otherwise what max and min prove ('max is NaN: at least one NaN').\n"
      "Gradient kernels are those whose full name starts with Gradients/; weights are the\n"
      "Parameter.* files, compared between consecutive dumped iterations, and the parameter\n"
      "each optimizer update kernel (Default/optimizer-...) wrote against the one it read;\n"
      "from statistics alone, their L2 norms bound the change from below. loss-spike takes each\n"
      "iteration's loss (the last one-element output before the backward) against the median\n"
      "of the iterations before. A check that had nothing to judge says what it needs.\n"
      "Hits are listed in the order they occurred. Over a dump root with several rank_{id}\n"
      "directories every line names its rank and the order is across ranks: by iteration, then\n"
      "by the position of the kernel call among its rank's calls (ranks run the same program:\n"
      "a collective that spreads a NaN comes after the kernel that made it on every rank). The\n"
      "first hit of each rank is listed and the rank that hit first named.\n"
      "Distributed: with --nproc N, or under torchrun (RANK, WORLD_SIZE, MASTER_ADDR and\n"
      "MASTER_PORT set: torchrun --no-python --nproc-per-node 8 ... graphdump watch dump/), each\n"
      "process reads the rank_{id} directories it is given among those its disk holds, and\n"
      "process 0 prints what one process would print (docs/scale.md). Every process must be\n"
      "given the same DIR and --check, on dumps of one graphdump version (exit 2 otherwise).\n"
      "Exit status: 0 no hit (skipped files are listed on stderr), 1 a watchpoint hit, 2 usage\n"
      "error, 3 a directory of the dump cannot be read (or a process of the job did not join\n"
      "within GRAPHDUMP_DIST_TIMEOUT seconds), or no hit but a check judged nothing (what it\n"
      "needs is said on stderr).");
  if (auto rc = ParseArgs(app, argc, argv)) return *rc;
  auto checks = analysis::ParseWatchChecks(checks_text);
  if (!checks.ok()) {
    fmt::print(stderr, "graphdump watch: error: {}\n", checks.status().message());
    return kExitUsage;
  }
  options.progress = !quiet;
  if (nproc < 0 || nproc > 1024) {
    fmt::print(stderr, "graphdump watch: error: --nproc {}: expected 1 to 1024 processes\n", nproc);
    return kExitUsage;
  }
  if (nproc > 0 && !InDistributedJob()) return LaunchAnalysisJob("watch", nproc, argc, argv);
  // Text lists the first `limit` hits and 3 intended infinities: only those are kept (with
  // each rank's first hit and what followed it), so memory does not grow with the hits.
  if (!json && limit > 0) options.keep_hits = std::max<size_t>(first_only ? 1 : limit, 3);
  if (json && !InDistributedJob()) return PrintSpilledJson(dir, *checks, options);
  int rc = kExitOk;
  std::optional<analysis::WatchResult> found;
  if (InDistributedJob()) {
    JobCommand command{"watch", dir, {}};
    std::string given;
    for (const analysis::WatchCheck& check : *checks) {
      given += (given.empty() ? "" : ",") + check.text;
    }
    command.options = {{"--check", given},
                       {"--count-intended-inf", options.count_intended_inf ? "on" : "off"}};
    found = DistributedWatch(command, *checks, options, &rc);
    if (!found) return rc;
  } else {
    // Ranks are indexed and checked one at a time: memory holds the hits, not the dump's index.
    std::vector<std::string> warnings;
    auto watched = analysis::WatchDump(dir, *checks, options, &warnings);
    if (!watched.ok()) return OpenError("graphdump watch", watched.status());
    PrintWarnings("graphdump watch", warnings);
    found = std::move(watched).value();
  }
  const analysis::WatchResult& result = *found;
  const size_t hit_count = result.hits.size() + result.dropped_hits;
  if (json) {
    fmt::print("{}\n", analysis::WatchResultJson(result));
  } else {
    fmt::print("watch {}: {} tensors checked{}, {} hit(s)\n", dir, result.tensors_checked,
               result.weight_pairs_checked
                   ? fmt::format(", {} weight pairs compared", result.weight_pairs_checked)
                   : "",
               hit_count);
    const size_t shown = first_only ? 0 : limit == 0 ? result.hits.size()
                                                     : std::min(limit, result.hits.size());
    // In the order they occurred across ranks: the first line is the dump's first hit.
    for (size_t i = 0; i < shown; ++i) {
      const auto& h = result.hits[i];
      fmt::print("  {} {}it {}{} {} {} {}: [{}] {}\n", i == 0 ? "->" : "  ",
                 RankTag(result, h.rank), h.iteration, CallTag(h.call, h.calls), h.kernel,
                 h.is_input ? "input" : "output", h.slot, h.check, h.detail);
    }
    if (!first_only && shown < hit_count) {
      fmt::print("  ... {} more hit(s) (--limit 0 prints all; --first summarises them)\n",
                 hit_count - shown);
    }
    PrintIntended(result);
    if (result.ranks > 1) {
      PrintPerRank(result);
    } else if (!result.hits.empty()) {
      PrintFirstHit("first hit", result.hits.front());
    }
    if (first_only && !result.hits.empty()) {
      const std::vector<analysis::WatchHit> firsts = analysis::FirstHitPerRank(result);
      PrintPropagation(result, firsts.front());
    }
  }
  PrintSkipped("graphdump watch", result.skipped);
  return ExitStatus(hit_count, result.judged);
}

}  // namespace graphdump::tools
