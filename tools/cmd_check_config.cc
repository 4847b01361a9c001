// graphdump check-config: validate a data_dump.json and print the effective configuration.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "graphdump/config.h"
#include "graphdump/ge_dialect.h"

namespace graphdump::tools {
namespace {

constexpr char kFooter[] = R"(
The configuration is MindSpore's data_dump.json (see docs/configuration.md), or the GE /
TF-adapter dialect {"dump": {...}} (docs/ascend.md), which is printed back in that dialect. On
success the effective configuration (every default filled in, forced modes applied) is printed
as JSON on stdout and the exit status is 0; warnings (unknown keys, forced modes) go to stderr.
On error every problem of the file is printed, one per line, naming its key, and the exit
status is 2.
Without FILE, the file named by GRAPHDUMP_CONFIG (or MINDSPORE_DUMP_CONFIG) is checked.
An empty or missing "path" is taken from $MS_DIAGNOSTIC_DATA_PATH/debug_dump.

Example:
  $ cat data_dump.json
  {"common_dump_settings": {"dump_mode": 0, "path": "/tmp/dump", "net_name": "ResNet50",
     "iteration": "0|5-8", "input_output": 0, "kernels": [], "support_device": [0]}}
  $ graphdump check-config data_dump.json
  {
      "common_dump_settings": {
          "dump_mode": 0,
          "path": "/tmp/dump",
          ...
  $ GRAPHDUMP_CONFIG=$PWD/data_dump.json graphdump check-config)";

void PrintProblems(const Status& status) {
  const std::string& message = status.message();
  size_t start = 0;
  while (start <= message.size()) {
    const size_t end = message.find('\n', start);
    std::fprintf(stderr, "graphdump check-config: error: %s\n",
                 message.substr(start, end - start).c_str());
    if (end == std::string::npos) break;
    start = end + 1;
  }
}

}  // namespace

int RunCheckConfig(int argc, char** argv) {
  CLI::App app(
      "Validate a dump configuration (data_dump.json) and print the effective "
      "configuration.",
      "graphdump check-config");
  std::string file;
  app.add_option("FILE", file,
                 "the configuration file (.json); default: $GRAPHDUMP_CONFIG or "
                 "$MINDSPORE_DUMP_CONFIG");
  app.footer(kFooter);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }

  std::unique_ptr<ParsedConfig> parsed;
  if (!file.empty()) {
    const char* diagnostic = std::getenv(kDiagnosticPathEnv);
    StatusOr<ParsedConfig> loaded = LoadConfigFile(file, diagnostic ? diagnostic : "");
    if (!loaded.ok()) {
      PrintProblems(loaded.status());
      return kExitUsage;
    }
    parsed = std::make_unique<ParsedConfig>(std::move(loaded).value());
  } else {
    StatusOr<std::unique_ptr<ParsedConfig>> loaded = LoadConfigFromEnvironment();
    if (!loaded.ok()) {
      PrintProblems(loaded.status());
      return kExitUsage;
    }
    if (*loaded == nullptr) {
      std::fprintf(stderr,
                   "graphdump check-config: error: no FILE given and neither %s nor %s is set "
                   "(see --help)\n",
                   kConfigEnv, kMindSporeConfigEnv);
      return kExitUsage;
    }
    parsed = std::move(loaded).value();
  }
  for (const std::string& warning : parsed->warnings) {
    std::fprintf(stderr, "graphdump check-config: warning: %s\n", warning.c_str());
  }
  const DumpConfig& config = parsed->config;
  if (!config.dump_enabled) {
    std::fprintf(stderr, "graphdump check-config: note: enable_dump is false: nothing is dumped\n");
  }
  // A GE-dialect file is printed back in its dialect: as common_dump_settings it would lose the
  // GE layout, and its dump_layer names would read as op types.
  const bool ge = config.ge_layout || !config.dump_enabled;
  std::fputs((ge ? GeConfigToJson(config) : ConfigToJson(config)).c_str(), stdout);
  return kExitOk;
}

}  // namespace graphdump::tools
