// graphdump report: one self-contained HTML page with plots.
#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "analysis_cli.h"
#include "commands.h"
#include "graphdump/analysis/parallel.h"
#include "graphdump/analysis/report.h"
#include "replay_suspects.h"

namespace graphdump::tools {

int RunReport(int argc, char** argv) {
  CLI::App app{
      "Write one self-contained HTML report: charts first (error metrics along the execution "
      "order with the first divergence marked; the error each kernel adds, inputs against "
      "outputs, with the kernels adding the most marked; statistics of every kernel along the "
      "execution "
      "order; statistics of the kernels that hit across iterations), tables after. NaN and "
      "+-Inf are drawn as marked points, never dropped. d3.js is inlined into the file: no "
      "network fetch. docs/analysis.md describes the page.",
      "graphdump report"};
  std::string dir, out, checks_text = "nan,inf,overflow";
  std::vector<std::string> compare;
  analysis::SeriesSelection selection;
  int threads = 0, replay_count = 0;
  std::optional<uint32_t> rank;
  analysis::CompareOptions options;
  app.add_option("DIR", dir, "dump to report on (not with --compare)");
  app.add_option("--compare", compare, "A B: compare two dumps")->expected(2);
  app.add_option("-o,--out", out, "HTML file to write")->required();
  app.add_option("--kernels", selection.filter,
                 "plot across iterations the kernels whose full name contains this text "
                 "(default: the kernels that hit and the first divergence, else the first ones)");
  app.add_option("--rank", rank,
                 "the rank the charts show (default: the first hit's, else the first "
                 "divergence's, else the first rank)");
  app.add_option("--max-kernels", selection.limit, "kernels to plot across iterations")
      ->capture_default_str();
  app.add_option("--check", checks_text, "watchpoints for the hits (see watch --help)")
      ->capture_default_str();
  AddToleranceOptions(app, &options);
  app.add_option("--threads", threads, "worker threads (0: all cores)")->capture_default_str();
  app.add_option("--replay", replay_count,
                 "with --compare: replay the first N kernels adding error (graphdump replay) and "
                 "show their verdicts")
      ->capture_default_str();
  app.footer(
      "The page opens with every rank: a rank selector saying what was found in each, and a\n"
      "rank-by-iteration overview of the hits and failing kernels. The charts show one rank\n"
      "(--rank, else the first hit's, else the first divergence's, else the first); the\n"
      "statistics along the execution order are of its first hit's (or divergence's) iteration,\n"
      "else of its last one. Each chart is downsampled to its width (per pixel column the\n"
      "lowest and highest values and the first NaN and +-Inf, the first hit and the first\n"
      "divergence exactly where they are): the page stays under 5 MB whatever the dump.\n"
      "Examples:\n"
      "  graphdump report dump/ -o report.html\n"
      "  graphdump report --compare dump_bf16/ dump_fp32/ -o diff.html --kernels conv\n"
      "  graphdump report --compare dump_bf16/ dump_fp32/ -o diff.html --replay 3\n"
      "Exit status: 0 written, 2 usage error (including an -o whose directory is missing or not\n"
      "writable, or that names a FIFO, device or symbolic link: only regular files and new paths\n"
      "are written), 3 the file could not be written or a directory of a dump cannot be read.");
  if (auto rc = ParseArgs(app, argc, argv)) return *rc;
  if (!ApplyToleranceOptions(app, "graphdump report", &options)) return kExitUsage;
  if (dir.empty() == compare.empty()) {
    fmt::print(stderr, "graphdump report: error: give either DIR or --compare A B\n");
    return kExitUsage;
  }
  if (replay_count < 0 || replay_count > 1000 || (replay_count > 0 && compare.empty())) {
    fmt::print(stderr, "graphdump report: error: --replay {}: {}\n", replay_count,
               compare.empty() ? "replays need --compare A B"
                               : "expected a number of kernels from 0 to 1000");
    return kExitUsage;
  }
  if (threads < 0) {
    fmt::print(stderr, "graphdump report: error: --threads must be 0 or more, got {}\n", threads);
    return kExitUsage;
  }
  auto checks = analysis::ParseWatchChecks(checks_text);
  if (!checks.ok()) {
    fmt::print(stderr, "graphdump report: error: {}\n", checks.status().message());
    return kExitUsage;
  }
  if (!CheckOutputPath("graphdump report", "-o", out)) return kExitUsage;
  // The dump (A of a comparison) is read one rank at a time, each rank checked against the
  // watchpoints (and compared with B's rank) while it is indexed: memory holds the ranks being
  // read, the hits and kernel comparisons the page lists with counts of the others
  // (report_compare.h) and a summary of each rank; the rank the charts show is indexed (checked
  // and compared) again alone.
  int rc = kExitOk;
  const std::string main_dir = compare.empty() ? dir : compare[0];
  std::vector<analysis::ReportRankSummary> summaries;
  analysis::WatchResult watch;  // KeepReportHits of every rank
  std::mutex mu;
  analysis::WatchOptions watch_options;
  watch_options.progress = false;
  watch_options.keep_hits = analysis::kReportHitsShown;
  // Called with every rank of the dump, as many ranks at once as there are threads, each rank's
  // files on the threads left over (`rank_threads`).
  auto each_rank = [&](size_t i, const analysis::DumpIndex& one, int rank_threads) {
    analysis::ReportRankSummary summary = analysis::SummarizeReportRank(one.ranks.front());
    analysis::WatchOptions each = watch_options;
    each.threads = rank_threads;
    analysis::WatchResult hits = analysis::RunWatch(one, *checks, each);
    std::lock_guard<std::mutex> lock(mu);
    if (summaries.size() <= i) summaries.resize(i + 1);
    summaries[i] = std::move(summary);
    analysis::KeepReportHits(std::move(hits), &watch);
  };
  const int all = threads > 0 ? threads : analysis::DefaultThreads();
  analysis::ReportInput input;
  analysis::ReportComparison comparison;  // what the page shows of it
  options.threads = threads;
  if (!compare.empty()) {
    analysis::CompareDirsInfo info;
    analysis::ReportCompareCollector collector(static_cast<size_t>(replay_count));
    auto compared = analysis::CompareDumpDirs(
        compare[0], compare[1], options, &info, each_rank,
        [&](analysis::CompareResult& part) { collector.Add(part); });
    if (!compared.ok()) return OpenError("graphdump report", compared.status());
    PrintWarnings("graphdump report", info.warnings_a);
    PrintWarnings("graphdump report", info.warnings_b);
    input.notes = info.warnings_a;
    input.notes.insert(input.notes.end(), info.warnings_b.begin(), info.warnings_b.end());
    comparison = collector.Finish(compared->skipped);
    input.compare = &comparison;
    input.title = fmt::format("graphdump report: {} vs {}", compare[0], compare[1]);
  } else {
    auto ranks = ListRanks("graphdump report", dir, &rc);
    if (!ranks) return rc;
    const int outer = static_cast<int>(std::clamp<size_t>(ranks->size(), 1, all));
    const StatusOr<analysis::StreamedDump> streamed = analysis::ForEachRank(
        std::move(*ranks), analysis::IndexFilter(), outer, "indexing ranks",
        [&](size_t i, analysis::DumpIndex& one) { each_rank(i, one, std::max(1, all / outer)); });
    if (!streamed.ok()) return OpenError("graphdump report", streamed.status());
    PrintWarnings("graphdump report", streamed->warnings);
    input.notes = streamed->warnings;
    input.title = "graphdump report: " + dir;
  }
  input.watch = &watch;
  if (Status s = analysis::CollectReportCharts(main_dir, summaries, selection, *checks, threads,
                                               rank, &input);
      !s.ok()) {
    fmt::print(stderr, "graphdump report: error: {}\n", s.message());
    return s.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  if (!compare.empty()) {
    // The charted rank's kernels whole (its charts draw every one): its pair compared again.
    auto part = analysis::CompareRankPair(compare[0], compare[1], input.rank, options);
    if (!part.ok()) return OpenError("graphdump report", part.status());
    analysis::AddChartedRank(*part, &comparison);
    for (const SuspectReplay& r :
         ReplaySuspects(comparison.shown, compare[0], compare[1], replay_count, "report")) {
      input.replays.push_back({r.kernel, r.Verdict(), r.Words()});
    }
  }
  if (int written = WriteOutput("graphdump report", out, analysis::RenderReportHtml(input))) {
    return written;
  }
  fmt::print("wrote {}\n", out);
  return kExitOk;
}

}  // namespace graphdump::tools
