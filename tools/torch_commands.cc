// Placeholder until the executor lands (issue: graph-mode executor on LibTorch).
#include <cstdio>

#include "commands.h"

namespace graphdump::tools {

int RunRun(int, char**) {
  std::fprintf(stderr, "graphdump run: not available yet\n");
  return kExitFailure;
}
int RunTrain(int, char**) {
  std::fprintf(stderr, "graphdump train: not available yet\n");
  return kExitFailure;
}

}  // namespace graphdump::tools
