// graphdump report: one self-contained HTML page with plots.
#include <fmt/format.h>

#include "analysis_cli.h"
#include "commands.h"
#include "graphdump/analysis/report.h"

namespace graphdump::tools {

int RunReport(int argc, char** argv) {
  CLI::App app{
      "Write one self-contained HTML report (inline SVG, no network fetches): error "
      "metrics along the execution order with the first divergence marked, statistics "
      "of chosen kernels across iterations, and a table of watchpoint hits.",
      "graphdump report"};
  std::string dir, out, kernel_filter, checks_text = "nan,inf,overflow";
  std::vector<std::string> compare;
  size_t max_kernels = 6;
  analysis::CompareOptions options;
  app.add_option("DIR", dir, "dump to report on (not with --compare)");
  app.add_option("--compare", compare, "A B: compare two dumps")->expected(2);
  app.add_option("-o,--out", out, "HTML file to write")->required();
  app.add_option("--kernels", kernel_filter, "plot kernels whose full name contains this text");
  app.add_option("--max-kernels", max_kernels, "kernels to plot across iterations")
      ->capture_default_str();
  app.add_option("--check", checks_text, "watchpoints for the hit table (see watch --help)")
      ->capture_default_str();
  app.add_option("--atol", options.atol, "compare: absolute tolerance")->capture_default_str();
  app.add_option("--rtol", options.rtol, "compare: relative tolerance")->capture_default_str();
  app.footer(
      "Examples:\n"
      "  graphdump report dump/ -o report.html\n"
      "  graphdump report --compare dump_bf16/ dump_fp32/ -o diff.html --kernels conv\n"
      "Exit status: 0 written, 2 usage error (including an -o whose directory is missing or not\n"
      "writable), 3 the file could not be written.");
  if (auto rc = ParseArgs(app, argc, argv)) return *rc;
  if (dir.empty() == compare.empty()) {
    fmt::print(stderr, "graphdump report: error: give either DIR or --compare A B\n");
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
  if (!compare.empty()) {
    auto reference = OpenDump("graphdump report", compare[1], &rc);
    if (!reference) return rc;
    compare_result = analysis::CompareDumps(*main_index, *reference, options);
    input.compare = &compare_result;
    input.title = fmt::format("graphdump report: {} vs {}", compare[0], compare[1]);
  } else {
    input.title = "graphdump report: " + dir;
  }
  const analysis::WatchResult watch = analysis::RunWatch(*main_index, *checks, {});
  input.watch = &watch;
  input.series = analysis::CollectKernelSeries(*main_index, kernel_filter, max_kernels);
  if (int written = WriteOutput("graphdump report", out, analysis::RenderReportHtml(input))) {
    return written;
  }
  fmt::print("wrote {}\n", out);
  return kExitOk;
}

}  // namespace graphdump::tools
