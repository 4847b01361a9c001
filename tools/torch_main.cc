// graphdump-torch: the commands that need LibTorch. `graphdump run|train|replay|bisect ARGS`
// executes `graphdump-torch run|train|replay|bisect ARGS`; the ranks of `train --nproc` execute
// it again. `allgather` is the collective the processes of a distributed `graphdump watch` or
// `compare --ranks` exchange their summaries through (torch_cmd_allgather.cc).
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.h"
#include "graphdump/file_system.h"

int main(int argc, char** argv) {
  using namespace graphdump::tools;
  graphdump::RemoveTemporariesOnSignals();  // a Ctrl-C leaves only whole files
  const struct {
    const char* name;
    int (*run)(int, char**);
  } commands[] = {{"run", RunTorchRun},
                  {"train", RunTorchTrain},
                  {"replay", RunTorchReplay},
                  {"bisect", RunTorchBisect},
                  {"allgather", RunTorchAllGather}};
  for (const auto& c : commands) {
    if (argc >= 2 && std::strcmp(argv[1], c.name) == 0) {
      std::string name = std::string("graphdump ") + c.name;  // what the user typed
      argv[1] = name.data();
      return c.run(argc - 1, argv + 1);
    }
  }
  std::fprintf(stderr,
               "graphdump-torch: the LibTorch half of graphdump; use `graphdump run` or "
               "`graphdump train` (graphdump --help)\n");
  return kExitUsage;
}
