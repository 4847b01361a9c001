// graphdump: dump a model's kernels while its graph runs, then find where the numbers go wrong.
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.h"
#include "graphdump/analysis/parallel.h"
#include "graphdump/file_system.h"

namespace graphdump::tools {
namespace {

constexpr Command kCommands[] = {
    {"python", "run your own PyTorch script unchanged, dumping its kernels (--precision: in bf16)",
     RunPython},
    {"hunt", "find where a script's training first goes NaN/Inf and why, in two runs of it",
     RunHunt},
    {"run", "run a TorchScript model's graph kernel by kernel, dumping what the config selects",
     RunRun},
    {"train", "train a TorchScript model, dumping forward, backward and optimizer kernels",
     RunTrain},
    {"bisect", "find the kernels that must run in float32 for a bf16/fp16 run to match float32",
     RunBisect},
    {"check-config", "validate a data_dump.json and print the effective configuration",
     RunCheckConfig},
    {"convert", "convert Ascend dump files (NC1HWC0, FRACTAL_Z...) to .npy in host layout",
     RunConvert},
    {"demo-synthetic", "dump a small synthetic graph through the session API", RunDemoSynthetic},
    {"ls", "list what a dump directory holds", RunLs},
    {"trace", "map a script line (FILE:LINE) to its kernels and dumped files", RunTrace},
    {"compare", "compare two dumps and report the first diverging kernel", RunCompare},
    {"watch", "check a dump against watchpoints (nan, inf, overflow, gradients...)", RunWatch},
    {"report", "write a self-contained HTML report with plots", RunReport},
    {"replay", "re-execute one dumped kernel: its own, conditioning and inherited error",
     RunReplay},
};

void PrintUsage(FILE* out) {
  std::fprintf(out,
               "graphdump: graph-mode operator data dump (MindSpore's Dump format) and analysis\n\n"
               "usage: graphdump <command> [options]   (graphdump <command> --help for more)\n\n"
               "commands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-16s %s\n", c.name, c.summary);
  std::fprintf(out,
               "\nDumping is enabled by GRAPHDUMP_CONFIG=/abs/path/data_dump.json (or "
               "MINDSPORE_DUMP_CONFIG),\nor by --config on run/train. See docs/ for the "
               "configuration keys and the files written.\n");
}

}  // namespace
}  // namespace graphdump::tools

int main(int argc, char** argv) {
  using namespace graphdump::tools;
  graphdump::RemoveTemporariesOnSignals();  // a Ctrl-C leaves only whole files
  graphdump::analysis::ReuseFreedMemory();
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    PrintUsage(argc < 2 ? stderr : stdout);
    return argc < 2 ? kExitUsage : kExitOk;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("graphdump %s\n", GRAPHDUMP_VERSION);
    return kExitOk;
  }
  for (const Command& c : kCommands) {
    if (std::strcmp(argv[1], c.name) == 0) {
      std::string name = std::string("graphdump ") + c.name;
      argv[1] = name.data();
      return c.run(argc - 1, argv + 1);
    }
  }
  std::fprintf(stderr, "graphdump: unknown command '%s'\n\n", argv[1]);
  PrintUsage(stderr);
  return kExitUsage;
}
