#include "graphdump/internal/cpu.h"

#include <cstdlib>
#include <string_view>

namespace graphdump {
namespace {

std::string_view SimdCap() {
  const char* cap = std::getenv("GRAPHDUMP_SIMD");
  return cap == nullptr ? std::string_view() : std::string_view(cap);
}

}  // namespace

bool UseAvx2() {
  static const bool use = [] {
#if defined(__x86_64__)
    return SimdCap() != "sse2" && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("fma");
#else
    return false;
#endif
  }();
  return use;
}

bool UseAvx512Bw() {
  static const bool use = [] {
#if defined(__x86_64__)
    return UseAvx2() && SimdCap() != "avx2" && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw");
#else
    return false;
#endif
  }();
  return use;
}

}  // namespace graphdump
