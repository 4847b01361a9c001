// graphdump compare A B: the first kernel where two runs part ways.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "analysis_cli.h"
#include "analysis_distributed.h"
#include "distributed_commands.h"
#include "commands.h"
#include "graphdump/analysis/compare.h"
#include "graphdump/analysis/compare_spilled.h"
#include "graphdump/analysis/precision_verdict.h"
#include "graphdump/analysis/rank_compare.h"
#include "graphdump/internal/json_text.h"
#include "compare_shown.h"
#include "replay_suspects.h"

namespace graphdump::tools {
namespace {

// "0.0123" or "-" when not measured.
std::string Err(double v) { return std::isnan(v) ? "-" : fmt::format("{:.3g}", v); }

// The ranked contributors and the sources that differ (docs/precision.md).
void PrintAttribution(const CompareShown& r) {
  constexpr size_t kShown = 10;
  if (!r.contributors.empty()) {
    fmt::print(
        "kernels adding error (discrete divergences first, then norm rel err of inputs -> "
        "outputs, largest added first):\n");
    for (size_t i = 0; i < r.contributors.size() && i < kShown; ++i) {
      const auto& k = r.contributors[i];
      const std::string what =
          k.discrete_divergence
              ? fmt::format("{} (a discrete divergence; inputs {})", k.discrete_change,
                            Err(k.input_error))
              : fmt::format("{} -> {} (x{})", Err(k.input_error), Err(k.output_error),
                            Err(k.growth));
      fmt::print("  {:2}. it {}{}{} {}{}: {}\n", i + 1, k.iteration, CallTag(k.call, k.calls),
                 OrderTag(k.order), k.name_a, k.source_line.empty() ? "" : " at " + k.source_line,
                 what);
    }
    if (r.contributors.size() > kShown)
      fmt::print("  ... {} in all (see --json contributors)\n", r.contributors.size());
  }
  if (!r.sources.empty() || !r.graph_inputs.empty()) {
    fmt::print("sources that differ (not a divergence: their values differ before any kernel):\n");
    size_t shown = 0;
    for (const auto& k : r.sources) {
      if (++shown > kShown) break;
      fmt::print("  {} it {} {}: {}\n", analysis::KernelRoleName(k.role), k.iteration, k.name_a,
                 k.reason);
    }
    for (const auto& [k, slot] : r.graph_inputs) {
      if (++shown > kShown) break;
      fmt::print("  graph input: it {} {} input {} (produced by no dumped kernel)\n", k.iteration,
                 k.name_a, slot);
    }
    if (shown > kShown)
      fmt::print("  ... (see --json differing_sources, differing_graph_inputs)\n");
  }
}

void PrintReplays(const analysis::CompareResult& r, const std::vector<SuspectReplay>& replays) {
  if (replays.empty()) return;
  fmt::print("replays of the kernels adding the most error (docs/precision.md, \"Replay\"):\n");
  for (size_t i = 0; i < replays.size(); ++i) {
    fmt::print("  {:2}. {}: {}\n", i + 1, r.kernels[replays[i].kernel].name_a,
               SuspectReplayText(replays[i]));
  }
}

// The "replays" array of --json: [{"kernel", "iteration", "call", "contributor", "replay"}].
std::string ReplaysJson(const analysis::CompareResult& ranked,
                        const std::vector<SuspectReplay>& replays) {
  nlohmann::json list = nlohmann::json::array();
  for (const SuspectReplay& replay : replays) {
    const analysis::KernelComparison& k = ranked.kernels[replay.kernel];
    list.push_back({{"kernel", k.name_a},
                    {"iteration", k.iteration},
                    {"call", k.call},
                    {"contributor", k.contribution_rank},
                    {"replay", replay.result}});
  }
  return internal::JsonText(list);
}

// --json after the rank pairs were spilled: the CSV of --out, the replays, the JSON. 0 or the
// exit status of an error.
int PrintJson(analysis::SpilledCompare& spilled, std::vector<analysis::Skipped> index_skipped,
              const std::string& a, const std::string& b, const std::string& out,
              int replay_count, bool replays_asked) {
  if (int rc = OutputError("graphdump compare", spilled.Finish(std::move(index_skipped)))) {
    return rc;
  }
  if (!out.empty()) {
    if (int rc = OutputError("graphdump compare", spilled.WriteCsv(out))) return rc;
  }
  const analysis::CompareResult& ranked = spilled.ranked();
  const std::vector<SuspectReplay> replays =
      ReplaySuspects(ranked, a, b, replay_count, "compare");
  std::optional<std::string> replays_json;
  if (replays_asked) replays_json = ReplaysJson(ranked, replays);
  if (int rc = PrintStreamedJson("graphdump compare", [&](const auto& write) {
        return spilled.WriteJson(replays_json ? &*replays_json : nullptr, write);
      })) {
    return rc;
  }
  PrintSkipped("graphdump compare", spilled.skipped());
  return kExitOk;
}

void PrintText(const CompareShown& r, const std::string& a, const std::string& b) {
  fmt::print("compare A={} B={}\n", a, b);
  fmt::print("kernels: {} paired ({} pass, {} warning, {} error), {} unpaired\n", r.kernels,
             r.passed, r.warnings, r.errors, r.unpaired.size());
  int shown = 0;
  for (const auto& k : r.not_passed) {
    if (++shown > 20) break;
    fmt::print(
        "  {:7} it {}{}{} {}{}: {}\n", analysis::VerdictName(k.verdict), k.iteration,
        CallTag(k.call, k.calls), OrderTag(k.order), k.name_a,
        k.pairing == analysis::Pairing::kFullName
            ? ""
            : fmt::format(" (paired by {} with {})", analysis::PairingName(k.pairing), k.name_b),
        k.reason);
  }
  if (shown > 20) fmt::print("  ... (see --out for every tensor)\n");
  for (size_t i = 0; i < r.unpaired.size() && i < 20; ++i) {
    const auto& u = r.unpaired[i];
    fmt::print("  unpaired: only in {}: iteration {}{} {}{}\n", u.side, u.iteration,
               u.call > 0 ? fmt::format(" call {}", u.call) : "", u.full_name,
               u.why == "intermediate"
                   ? " (an intermediate value: the compiled side's fusion never materialises it)"
                   : "");
  }
  for (size_t i = 0; i < r.call_count_differences.size() && i < 20; ++i) {
    const auto& d = r.call_count_differences[i];
    fmt::print(
        "  calls differ: iteration {} {}: {} call(s) in A, {} in B (calls pair by number; the "
        "extra ones are unpaired)\n",
        d.iteration, d.name_a, d.calls_a, d.calls_b);
  }
  const bool adding = r.first_adding_error.has_value();
  const auto& first = adding ? r.first_adding_error : r.first_failure;
  if (first) {
    const auto& f = *first;
    fmt::print("first divergence: {} (rank {}, graph {}, iteration {}{}){}\n  {}\n", f.name_a,
               f.rank, f.graph_id, f.iteration,
               f.calls > 1 ? fmt::format(", call {} of {}", f.call, f.calls) : "",
               f.source_line.empty() ? "" : " at " + f.source_line, f.reason);
    if (!f.fused_ops.empty()) fmt::print("  fused operators: {}\n", f.fused_ops);
    if (f.adds_error) {
      fmt::print("{}", adding ? r.first_adding_error_chain : r.first_failure_chain);
    }
  } else {
    fmt::print("{}\n", r.errors == 0 ? "no kernel failed" : "no kernel adds error");
  }
  PrintAttribution(r);
}

// "0, 1, 2" (the dumped iterations of any rank and graph, constants not counted), "none".
std::string IterationList(const std::set<int64_t>& found) {
  if (found.empty()) return "none";
  constexpr size_t kShown = 10;
  std::vector<int64_t> first(found.begin(), found.end());
  const size_t all = first.size();
  first.resize(std::min(all, kShown));
  return fmt::format("{}{}", fmt::join(first, ", "),
                     all > kShown ? fmt::format(" ... ({} in all)", all) : "");
}

// "0,1,3" -> {0, 1, 3}; empty text -> {} (every rank). False on a malformed list.
bool ParseRankList(const std::string& text, std::vector<uint32_t>* ranks) {
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    if (item.empty() || item.size() > 9 ||
        item.find_first_not_of("0123456789") != std::string::npos)
      return false;
    ranks->push_back(static_cast<uint32_t>(std::stoul(item)));
    start = comma + 1;
    if (comma + 1 == text.size()) return false;  // trailing comma
  }
  return true;
}

void PrintRanksText(const analysis::RankCompareResult& rr, const std::string& dir) {
  const analysis::CompareResult& r = rr.result;
  fmt::print("compare ranks in {}: reference rank {}, compared rank(s) {}\n", dir,
             rr.reference_rank, fmt::join(rr.compared_ranks, ", "));
  fmt::print(
      "synced kernels (parameters, AllReduce, optimizer outputs): {} compared ({} pass, {} "
      "warning, {} error), {} unpaired\n",
      r.kernels.size() + rr.dropped_kernels, r.passed, r.warnings, r.errors,
      r.unpaired.size() + rr.dropped_unpaired);
  int shown = 0;
  for (const auto& k : r.kernels) {
    if (k.verdict == analysis::Verdict::kPass) continue;
    if (++shown > 20) break;
    fmt::print("  {:7} it {} rank {} vs {} {}: {}\n", analysis::VerdictName(k.verdict), k.iteration,
               k.rank, rr.reference_rank, k.name_a, k.reason);
  }
  if (shown > 20) fmt::print("  ... (see --out for every tensor)\n");
  for (size_t i = 0; i < r.unpaired.size() && i < 20; ++i) {
    const auto& u = r.unpaired[i];
    fmt::print("  unpaired: only in rank {}: iteration {} {}\n",
               u.side == 'A' ? u.rank : rr.reference_rank, u.iteration, u.full_name);
  }
  if (r.first_failure >= 0) {
    const auto& f = r.kernels[r.first_failure];
    fmt::print("first disagreement: iteration {}, {} (graph {}), rank {} vs rank {}, {}{}\n  {}\n",
               f.iteration, f.name_a, f.graph_id, f.rank, rr.reference_rank,
               analysis::DifferenceOf(f).text,
               f.source_line.empty() ? "" : " at " + f.source_line, f.reason);
  } else {
    fmt::print("all ranks agree\n");
  }
}

// The exit status of compare --ranks: 1 for an error, a skipped file or nothing compared.
int RanksExit(const analysis::CompareResult& r, size_t kernels) {
  PrintSkipped("graphdump compare", r.skipped);
  const bool none = kernels == 0;
  if (none) {
    fmt::print(stderr,
               "graphdump compare: warning: no parameter, AllReduce or optimizer kernel was "
               "dumped on two ranks\n");
  }
  return r.errors > 0 || !r.skipped.empty() || none ? kExitFinding : kExitOk;
}

// --ranks with --json or --out in one process: each rank's kernels spilled to temporary files and
// merged while written, so memory does not grow with them.
int RunRanksSpilled(const std::string& dir, const analysis::RankCompareOptions& options,
                    const std::string& out, bool json) {
  std::vector<std::string> warnings;
  auto spilled = analysis::SpilledRankCompare::Run(dir, options, json, !out.empty(), &warnings);
  if (!spilled.ok()) return OpenError("graphdump compare", spilled.status());
  PrintWarnings("graphdump compare", warnings);
  const analysis::SpilledRankCompare& s = **spilled;
  if (!out.empty()) {
    if (int rc = OutputError("graphdump compare", s.WriteCsv(out))) return rc;
  }
  if (json) {
    if (int rc = PrintStreamedJson("graphdump compare",
                                   [&](const auto& write) { return s.WriteJson(write); })) {
      return rc;
    }
  } else {
    PrintRanksText(s.result(), dir);
  }
  return RanksExit(s.result().result, s.kernels());
}

// graphdump compare DIR --ranks [LIST].
int RunRanks(const std::string& dir, const std::string& ranks_text,
             const analysis::CompareOptions& options, const std::string& out, bool json,
             int nproc, int argc, char** argv) {
  analysis::RankCompareOptions rank_options;
  rank_options.compare = options;
  if (!ParseRankList(ranks_text, &rank_options.ranks)) {
    fmt::print(stderr,
               "graphdump compare: error: --ranks '{}': expected a comma-separated list of rank "
               "ids such as 0,1 (or no value for every rank)\n",
               ranks_text);
    return kExitUsage;
  }
  if (nproc > 0 && !InDistributedJob()) return LaunchAnalysisJob("compare", nproc, argc, argv);
  // The text shows 20 kernels that do not pass (a 21st says there are more) and 20 unpaired:
  // only those are kept, so memory does not grow with the ranks (--out's rows are spilled).
  if (!json && (out.empty() || !InDistributedJob())) rank_options.keep_shown = 21;
  if (!InDistributedJob() && (json || !out.empty())) {
    return RunRanksSpilled(dir, rank_options, out, json);
  }
  int rc = kExitOk;
  std::optional<analysis::RankCompareResult> result;
  if (InDistributedJob()) {
    const analysis::CompareOptions& o = options;
    const JobCommand command{
        "compare --ranks",
        dir,
        {{"--ranks", ranks_text},
         {"--iteration", o.iteration ? std::to_string(*o.iteration) : ""},
         {"--atol", o.user_tolerances ? fmt::format("{}", o.atol) : ""},
         {"--rtol", o.user_tolerances ? fmt::format("{}", o.rtol) : ""}}};
    result = DistributedCompareRanks(command, rank_options, &rc);
    if (!result) return rc;
  } else {
    // Ranks are indexed and compared one at a time: memory holds the reference rank and the
    // result, not the dump's index.
    std::vector<std::string> warnings;
    auto compared = analysis::CompareRanksInDump(dir, rank_options, &warnings);
    if (!compared.ok()) return OpenError("graphdump compare", compared.status());
    PrintWarnings("graphdump compare", warnings);
    result = std::move(compared).value();
  }
  const analysis::CompareResult& r = result->result;
  if (!out.empty()) {
    const std::string csv = analysis::CompareResultCsv(r);
    if (int written = WriteOutput("graphdump compare", out, csv)) return written;
  }
  if (json) {  // distributed: process 0 holds the merged result
    fmt::print("{}\n", analysis::RankCompareResultJson(*result));
  } else {
    PrintRanksText(*result, dir);
  }
  return RanksExit(r, r.kernels.size() + result->dropped_kernels);
}

}  // namespace

int RunCompare(int argc, char** argv) {
  CLI::App app{
      "Compare two dumps kernel by kernel: cosine similarity, max abs/rel error, RMSE, norm "
      "rel err, shares within 0.1%/0.5%, an elementwise check by the pair's dtype standard "
      "(or --atol/--rtol); attribute the error to the kernels that add it (outputs against "
      "inputs) and report the first of them with its source line, and a ranked list.",
      "graphdump compare"};
  std::string a, b, out, ranks_text;
  bool json = false, quiet = false;
  analysis::CompareOptions options;
  int64_t iteration = -1;
  int replay_count = 0, nproc = 0;
  app.add_option("A", a, "dump under test (root or rank_{id}); with --ranks the multi-rank dump")
      ->required();
  app.add_option("B", b, "reference dump (not with --ranks)");
  app.add_option("--ranks", ranks_text,
                 "cross-rank check inside dump A: parameters, AllReduce and optimizer outputs of "
                 "every listed rank (default all) against the first one")
      ->expected(0, 1);
  app.add_option("--iteration", iteration, "compare only this iteration (default: all common)");
  AddToleranceOptions(app, &options);
  app.add_option("--out", out, "write the per-tensor CSV here (columns: docs/analysis.md)");
  app.add_option("-j,--threads", options.threads, "worker threads (default: all cores)");
  app.add_option("--replay", replay_count,
                 "re-execute the first N kernels of the ranked list of kernels adding error "
                 "(discrete divergences, such as topk indices that differ, first) with LibTorch "
                 "and say whether each is inaccurate, ill-conditioned or inherits (graphdump "
                 "replay; needs inputs in the dump)");
  app.add_flag("--json", json, "print the result as JSON");
  app.add_flag("-q,--quiet", quiet, "no progress bar");
  app.add_option("--nproc", nproc,
                 "with --ranks: run as N processes of one torch.distributed (gloo) job on this "
                 "machine, each comparing its share of the ranks (docs/scale.md)");
  app.footer(
      "Examples:\n"
      "  graphdump compare dump_bf16/ dump_fp32/ --out diff.csv\n"
      "  graphdump compare run_a/rank_0 run_b/rank_0 --iteration 3 --atol 1e-3 --rtol 1e-2\n"
      "  graphdump compare dump/ --ranks          (every rank against rank_0)\n"
      "  graphdump compare dump/ --ranks=0,2,3 --json\n"
      "  graphdump compare bf16/ fp32/ --replay 3    (replay the 3 kernels adding most error)\n"
      "--ranks checks one multi-rank dump: Parameter.* files, kernels whose full name contains\n"
      "AllReduce and the outputs of Default/optimizer-* kernels must agree across data-parallel\n"
      "ranks; each rank is compared against the first with --atol/--rtol, and the first\n"
      "disagreement (iteration, kernel, ranks, and the max abs error, or for a statistics-only\n"
      "dump the statistic that differs with both values) is reported. Put --ranks after DIR\n"
      "or write --ranks=LIST. With --nproc N, or under torchrun (RANK, WORLD_SIZE, MASTER_ADDR\n"
      "and MASTER_PORT set), --ranks runs as one job: each process compares the ranks whose\n"
      "directories its disk holds (the reference rank's must be there too) and process 0\n"
      "prints what one process would (docs/scale.md); every process must be given the same DIR,\n"
      "--ranks, --iteration and tolerances, on dumps of one graphdump version (exit 2 otherwise).\n"
      "Kernels pair by full name, then by name without -op{N} ids, then by execution order and\n"
      "op type. Without --atol/--rtol each tensor pair is judged by the standard of the lower\n"
      "precision of its dtypes (bfloat16: |a-b| <= 2^-8*max(|b|, 2^-8)); a kernel adds error\n"
      "when an output fails it and its error grows 10x over its inputs' (docs/precision.md).\n"
      "Parameters, constants and graph inputs that differ are listed apart.\n"
      "Exit status: 0 no kernel adds error (parameters, constants and graph inputs that\n"
      "differ, kernels that only inherit error and skipped files are reported, not failed),\n"
      "1 a kernel adds error (or an output fails where its error cannot be measured), 2 usage\n"
      "error (including a missing or non-dump directory, nothing to pair, or an --out whose\n"
      "directory is missing or not writable, or that names a FIFO, device or symbolic link:\n"
      "only regular files and new paths are written), 3 --out could not be written or a\n"
      "directory of a dump cannot be read (or a process of the job did not join). With\n"
      "--ranks: 1 when a synced tensor disagrees, a file was skipped or nothing was compared.");
  if (auto rc = ParseArgs(app, argc, argv)) return *rc;
  if (app.count("--iteration") > 0) {
    if (iteration < 0) {
      fmt::print(stderr, "graphdump compare: error: --iteration {}: iterations count from 0\n",
                 iteration);
      return kExitUsage;
    }
    options.iteration = iteration;
  }
  if (!ApplyToleranceOptions(app, "graphdump compare", &options)) return kExitUsage;
  options.progress = !quiet;
  const bool ranks = app.count("--ranks") > 0;
  if (replay_count < 0 || replay_count > 1000 || (ranks && app.count("--replay") > 0)) {
    fmt::print(stderr, "graphdump compare: error: --replay {}: {}\n", replay_count,
               ranks ? "replays need a reference dump B, not --ranks"
                     : "expected a number of kernels from 0 to 1000");
    return kExitUsage;
  }
  if (ranks != b.empty()) {
    fmt::print(stderr, "graphdump compare: error: {}\n",
               ranks ? "--ranks takes one dump directory, got two (" + a + ", " + b + ")"
                     : std::string("B is required: give a reference dump, or --ranks to check "
                                   "the ranks of A against each other"));
    return kExitUsage;
  }
  if (!CheckOutputPath("graphdump compare", "--out", out)) return kExitUsage;
  if (nproc < 0 || nproc > 1024 || (nproc > 0 && !ranks)) {
    fmt::print(stderr, "graphdump compare: error: --nproc {}: {}\n", nproc,
               ranks ? "expected 1 to 1024 processes" : "--nproc runs compare --ranks only");
    return kExitUsage;
  }
  if (ranks) return RunRanks(a, ranks_text, options, out, json, nproc, argc, argv);
  // Rank pairs are indexed and compared one at a time. Memory holds what the text shows
  // (CompareShown), or with --json what its document needs whole (the contributors, the first
  // failure); every kernel's records (JSON, the CSV's rows) are spilled to temporary files as
  // each pair finishes and merged while written.
  analysis::CompareDirsInfo info;
  std::optional<CompareCollector> collector;
  std::optional<analysis::SpilledCompare> spilled;
  std::function<void(analysis::CompareResult&)> each_part;
  if (json) {
    spilled.emplace(!out.empty(), replay_count > 0);
    each_part = [&](analysis::CompareResult& part) { spilled->Add(part); };
  } else {
    collector.emplace(!out.empty());
    each_part = [&](analysis::CompareResult& part) { collector->Add(part); };
  }
  auto compared = analysis::CompareDumpDirs(a, b, options, &info, {}, each_part);
  if (!compared.ok()) return OpenError("graphdump compare", compared.status());
  PrintWarnings("graphdump compare", info.warnings_a);
  PrintWarnings("graphdump compare", info.warnings_b);
  analysis::CompareResult result = std::move(compared).value();
  size_t kernels = 0;
  bool failed = false;
  if (json) {
    if (int rc = PrintJson(*spilled, std::move(result.skipped), a, b, out, replay_count,
                           app.count("--replay") > 0)) {
      return rc;
    }
    kernels = spilled->kernels();
    failed = spilled->failed();
  } else {
    const CompareShown shown = collector->Finish(std::move(result.skipped));
    if (!out.empty()) {
      const Status written = collector->WriteCsv(out);
      if (!written.ok()) {
        fmt::print(stderr, "graphdump compare: error: {}\n", written.message());
        return written.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
      }
    }
    // ReplaySuspects takes the ranked contributors (each its own index).
    analysis::CompareResult ranked;
    ranked.kernels = shown.contributors;
    for (size_t i = 0; i < ranked.kernels.size(); ++i) ranked.contributors.push_back(i);
    const std::vector<SuspectReplay> replays =
        ReplaySuspects(ranked, a, b, replay_count, "compare");
    PrintText(shown, a, b);
    PrintReplays(ranked, replays);
    PrintSkipped("graphdump compare", shown.skipped);
    kernels = shown.kernels;
    failed = shown.first_failure.has_value();
  }
  if (kernels == 0) {
    fmt::print(stderr, "graphdump compare: error: no kernel pairs: {}\n",
               options.iteration
                   ? fmt::format("--iteration {}; A has iterations {}, B has {}",
                                 *options.iteration, IterationList(info.iterations_a),
                                 IterationList(info.iterations_b))
                   : std::string("the dumps share no graph and iteration with kernels of the "
                                 "same names, order and types"));
  }
  // docs/analysis.md: 1 only when a kernel adds error (or an output fails where its error
  // cannot be measured); sources that differ, inherited error and skipped files are reported.
  if (kernels == 0) return kExitUsage;
  return failed ? kExitFinding : kExitOk;
}

}  // namespace graphdump::tools
