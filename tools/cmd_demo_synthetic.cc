// graphdump demo-synthetic: dumps a small synthetic graph through the session API, with no
// framework involved. Useful to see the dump format and to try the analysis tools.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "graphdump/config.h"
#include "graphdump/session.h"
#include "graphdump/synthetic.h"

namespace graphdump::tools {

int RunDemoSynthetic(int argc, char** argv) {
  CLI::App app(
      "Dump a small synthetic two-layer perceptron through the session API (no model needed).\n"
      "The configuration comes from --config, else from GRAPHDUMP_CONFIG/MINDSPORE_DUMP_CONFIG.",
      "graphdump demo-synthetic");
  std::string config_file;
  SyntheticOptions options;
  bool async = false;
  app.add_option("--config", config_file, "data_dump.json to use")->check(CLI::ExistingFile);
  app.add_option("--steps", options.steps, "steps to run")->check(CLI::Range(1, 1000000));
  app.add_option("--seed", options.seed, "random seed of weights and inputs");
  app.add_option("--input-scale", options.input_scale,
                 "scale of the inputs (e.g. 1e4 overflows the float16 cast kernel)");
  app.add_option("--nan-kernel", options.nan_kernel, "plant a NaN in this kernel's output (index)");
  app.add_option("--perturb-kernel", options.perturb_kernel, "add --perturb to this kernel's output");
  app.add_option("--perturb", options.perturb, "value added by --perturb-kernel");
  app.add_option("--fault-iteration", options.fault_iteration, "iteration of the planted faults");
  app.add_flag("--async", async, "force asynchronous dump (e2e_dump_settings.enable = false)");
  app.footer(
      "\nExample:\n  graphdump demo-synthetic --config examples/data_dump.json --steps 3\n"
      "  graphdump ls /tmp/graphdump_demo/dump\n");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }

  std::unique_ptr<ParsedConfig> parsed;
  if (!config_file.empty()) {
    StatusOr<ParsedConfig> loaded = LoadConfigFile(config_file, "");
    if (!loaded.ok()) {
      std::fprintf(stderr, "graphdump demo-synthetic: %s\n", loaded.status().message().c_str());
      return kExitUsage;
    }
    parsed = std::make_unique<ParsedConfig>(std::move(loaded).value());
  } else {
    StatusOr<std::unique_ptr<ParsedConfig>> env = LoadConfigFromEnvironment();
    if (!env.ok()) {
      std::fprintf(stderr, "graphdump demo-synthetic: %s\n", env.status().message().c_str());
      return kExitUsage;
    }
    parsed = std::move(env).value();
  }
  if (!parsed) {
    std::fprintf(stderr,
                 "graphdump demo-synthetic: no configuration: pass --config FILE or set "
                 "GRAPHDUMP_CONFIG\n");
    return kExitUsage;
  }
  for (const std::string& w : parsed->warnings) std::fprintf(stderr, "graphdump: warning: %s\n", w.c_str());
  SessionOptions session_options;
  session_options.config = parsed->config;
  if (async) session_options.config.enable = false;
  session_options.model_name = "synthetic_mlp";
  StatusOr<std::unique_ptr<DumpSession>> session = DumpSession::Open(std::move(session_options));
  if (!session.ok()) {
    std::fprintf(stderr, "graphdump demo-synthetic: %s\n", session.status().message().c_str());
    return kExitFailure;
  }
  if (!*session) {
    std::printf("rank 0 is not in support_device: nothing dumped\n");
    return kExitOk;
  }
  Status run = RunSyntheticGraph(**session, options);
  Status closed = (*session)->Close();
  if (!run.ok() || !closed.ok()) {
    std::fprintf(stderr, "graphdump demo-synthetic: %s\n",
                 (!run.ok() ? run : closed).message().c_str());
    return kExitFailure;
  }
  DumpSummary s = (*session)->Summary();
  std::printf("dumped %d steps: %llu kernels, %llu files, %llu bytes, %llu statistic rows\n",
              options.steps, static_cast<unsigned long long>(s.kernels_dumped),
              static_cast<unsigned long long>(s.files), static_cast<unsigned long long>(s.bytes),
              static_cast<unsigned long long>(s.statistic_rows));
  std::printf("dump: %s\n", s.root.c_str());
  return kExitOk;
}

}  // namespace graphdump::tools
