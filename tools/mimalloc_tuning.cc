// The graphdump CLI's allocator setting, built only where it links mimalloc (tools/CMakeLists.txt).
// Each rank pair of an analysis allocates and frees hundreds of megabytes: kept for two seconds
// after it is freed (mimalloc's default is 25 ms), that memory is reused by the next rank pair
// instead of being given back to the kernel and faulted in again (on 64 ranks of 100,000 rows,
// compare A A took 8.6 s with the default, 7.2 s with this). docs/scale.md tells users; the
// environment variable MIMALLOC_DECOMMIT_DELAY still sets it.
#include <mimalloc.h>

#include <cstdlib>

namespace {

struct Tuning {
  Tuning() {
    // mimalloc has read its options by now: a variable the user set is kept.
    if (std::getenv("MIMALLOC_DECOMMIT_DELAY") == nullptr) {
      mi_option_set(mi_option_decommit_delay, 2000);  // milliseconds
    }
  }
};
const Tuning tuning;

}  // namespace
