// run and train when graphdump is built without LibTorch (-DGRAPHDUMP_WITH_TORCH=OFF).
#include <cstdio>

#include "commands.h"

namespace graphdump::tools {

static int NoTorch(const char* name) {
  std::fprintf(stderr,
               "graphdump %s: this graphdump was built without LibTorch; rebuild with "
               "-DGRAPHDUMP_WITH_TORCH=ON (the default) to run models\n",
               name);
  return kExitUsage;
}

int RunRun(int, char**) { return NoTorch("run"); }
int RunTrain(int, char**) { return NoTorch("train"); }

}  // namespace graphdump::tools
