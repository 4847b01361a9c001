// graphdump report: one self-contained HTML page with plots.
#include <fmt/format.h>

#include "analysis_cli.h"
#include "commands.h"
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
      "are written), 3 the file could not be written.");
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
  int rc = kExitOk;
  auto main_index = OpenDump("graphdump report", compare.empty() ? dir : compare[0], &rc);
  if (!main_index) return rc;
  analysis::ReportInput input;
  analysis::CompareResult compare_result;
  options.threads = threads;
  if (!compare.empty()) {
    auto reference = OpenDump("graphdump report", compare[1], &rc);
    if (!reference) return rc;
    compare_result = analysis::CompareDumps(*main_index, *reference, options);
    input.compare = &compare_result;
    for (const SuspectReplay& r :
         ReplaySuspects(compare_result, compare[0], compare[1], replay_count, "report")) {
      input.replays.push_back({r.kernel, r.Verdict(), r.Words()});
    }
    input.title = fmt::format("graphdump report: {} vs {}", compare[0], compare[1]);
  } else {
    input.title = "graphdump report: " + dir;
  }
  analysis::WatchOptions watch_options;
  watch_options.threads = threads;
  const analysis::WatchResult watch = analysis::RunWatch(*main_index, *checks, watch_options);
  input.watch = &watch;
  if (Status s = analysis::CollectReportCharts(*main_index, selection, threads, rank, &input);
      !s.ok()) {
    fmt::print(stderr, "graphdump report: error: {}\n", s.message());
    return kExitUsage;
  }
  if (int written = WriteOutput("graphdump report", out, analysis::RenderReportHtml(input))) {
    return written;
  }
  fmt::print("wrote {}\n", out);
  return kExitOk;
}

}  // namespace graphdump::tools
