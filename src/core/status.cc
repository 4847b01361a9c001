#include "graphdump/status.h"

#include <cstdio>

namespace graphdump {

void CheckFailed(const char* file, int line, const char* condition) {
  std::fprintf(stderr, "graphdump: internal error at %s:%d: check failed: %s\n", file, line,
               condition);
  std::abort();
}

}  // namespace graphdump
