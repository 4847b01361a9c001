// The graphdump CLI's allocator settings, built only where it links mimalloc (tools/CMakeLists.txt).
// Each rank pair of an analysis allocates and frees hundreds of megabytes: kept for two seconds
// after it is freed (mimalloc's default is 0.1 s), that memory is reused by the next rank pair
// instead of being given back to the kernel and faulted in again; on 2 MiB pages (transparent
// huge pages, where the kernel allows them), the index's entries cost fewer TLB misses. On 64
// ranks of 100,000 rows, compare A A: 10.8 -> 7.8 s, system time 3.5 -> 0.7 s (docs/scale.md).
// A MIMALLOC_* environment variable still sets its option.
#include <mimalloc.h>

#include <cstdlib>

namespace {

// Sets `option` unless the environment names it (mimalloc has read its options by now).
void SetUnlessGiven(mi_option_t option, const char* variable, long value) {
  if (std::getenv(variable) == nullptr) mi_option_set(option, value);
}

struct Tuning {
  Tuning() {
    SetUnlessGiven(mi_option_decommit_delay, "MIMALLOC_DECOMMIT_DELAY", 2000);  // milliseconds
    SetUnlessGiven(mi_option_large_os_pages, "MIMALLOC_LARGE_OS_PAGES", 1);
  }
};
const Tuning tuning;

}  // namespace
