// graphdump compare A B: the first kernel where two runs part ways.
#include <fmt/format.h>

#include <fstream>

#include "analysis_cli.h"
#include "commands.h"
#include "graphdump/analysis/compare.h"

namespace graphdump::tools {
namespace {

void PrintText(const analysis::CompareResult& r, const std::string& a, const std::string& b) {
  fmt::print("compare A={} B={}\n", a, b);
  fmt::print("kernels: {} paired ({} pass, {} warning, {} error), {} unpaired\n",
             r.kernels.size(), r.passed, r.warnings, r.errors, r.unpaired.size());
  int shown = 0;
  for (const auto& k : r.kernels) {
    if (k.verdict == analysis::Verdict::kPass) continue;
    if (++shown > 20) break;
    fmt::print("  {:7} it {} #{} {}{}: {}\n", analysis::VerdictName(k.verdict), k.iteration,
               k.order, k.name_a,
               k.pairing == analysis::Pairing::kFullName
                   ? ""
                   : fmt::format(" (paired by {} with {})", analysis::PairingName(k.pairing),
                                 k.name_b),
               k.reason);
  }
  if (shown > 20) fmt::print("  ... (see --out for every tensor)\n");
  for (size_t i = 0; i < r.unpaired.size() && i < 20; ++i) {
    const auto& u = r.unpaired[i];
    fmt::print("  unpaired: only in {}: iteration {} {}\n", u.side, u.iteration, u.full_name);
  }
  if (r.first_failure >= 0) {
    const auto& f = r.kernels[r.first_failure];
    fmt::print("first divergence: {} (rank {}, graph {}, iteration {}){}\n  {}\n", f.name_a,
               f.rank, f.graph_id, f.iteration,
               f.source_line.empty() ? "" : " at " + f.source_line, f.reason);
  } else {
    fmt::print("no kernel failed\n");
  }
}

}  // namespace

int RunCompare(int argc, char** argv) {
  CLI::App app{"Compare two dumps kernel by kernel: cosine similarity, max abs/rel error, RMSE, "
               "shares within 0.1%/0.5%, |a-b| <= atol + rtol*|b|; report the first failing "
               "kernel in execution order with its source line.",
               "graphdump compare"};
  std::string a, b, out;
  bool json = false, quiet = false;
  analysis::CompareOptions options;
  int64_t iteration = -1;
  app.add_option("A", a, "dump under test (root or rank_{id})")->required();
  app.add_option("B", b, "reference dump")->required();
  app.add_option("--iteration", iteration, "compare only this iteration (default: all common)");
  app.add_option("--atol", options.atol, "absolute tolerance")->capture_default_str();
  app.add_option("--rtol", options.rtol, "relative tolerance")->capture_default_str();
  app.add_option("--out", out, "write the per-tensor CSV here (columns: docs/analysis.md)");
  app.add_option("-j,--threads", options.threads, "worker threads (default: all cores)");
  app.add_flag("--json", json, "print the result as JSON");
  app.add_flag("-q,--quiet", quiet, "no progress bar");
  app.footer(
      "Examples:\n"
      "  graphdump compare dump_bf16/ dump_fp32/ --out diff.csv\n"
      "  graphdump compare run_a/rank_0 run_b/rank_0 --iteration 3 --atol 1e-3 --rtol 1e-2\n"
      "Kernels pair by full name, then by name without -op{N} ids, then by execution order and\n"
      "op type. Exit status: 0 every kernel passes (warnings allowed), 1 a kernel fails or a\n"
      "file was skipped, 2 usage error (including a missing or non-dump directory).");
  if (auto rc = ParseArgs(app, argc, argv)) return *rc;
  if (iteration >= 0) options.iteration = iteration;
  if (!(options.atol >= 0) || !(options.rtol >= 0)) {
    fmt::print(stderr, "graphdump compare: error: --atol and --rtol must be >= 0\n");
    return kExitUsage;
  }
  options.progress = !quiet;
  int rc = kExitOk;
  auto ia = OpenDump("graphdump compare", a, &rc);
  if (!ia) return rc;
  auto ib = OpenDump("graphdump compare", b, &rc);
  if (!ib) return rc;
  const analysis::CompareResult result = analysis::CompareDumps(*ia, *ib, options);
  if (!out.empty()) {
    std::ofstream f(out, std::ios::binary | std::ios::trunc);
    f << analysis::CompareResultCsv(result);
    if (!f.good()) {
      fmt::print(stderr, "graphdump compare: error: cannot write {}\n", out);
      return kExitFailure;
    }
  }
  if (json) {
    fmt::print("{}\n", analysis::CompareResultJson(result));
  } else {
    PrintText(result, a, b);
  }
  PrintSkipped("graphdump compare", result.skipped);
  if (result.kernels.empty()) {
    fmt::print(stderr, "graphdump compare: warning: no kernel pairs (different graphs or "
                       "iterations?)\n");
  }
  return result.errors > 0 || !result.skipped.empty() ? kExitFinding : kExitOk;
}

}  // namespace graphdump::tools
