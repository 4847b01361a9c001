// Helper of bench/stats_vs_numpy.py: times ComputeStats (no md5) over the float32 data of a .npy
// file, mapped into memory. Not a benchmark on its own: without an argument it prints a note and
// exits 0 (scripts/bench runs every program under build/bench).
//
//   stats_file_bench FILE.npy [REPETITIONS [all|values]]
//       all (default): the eleven statistics; values: what the default statistic_category
//       (max, min, l2norm) needs. Prints "seconds=S" (best of REPETITIONS), "kernels=K" and the
//       statistics, one "name=value" per line.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "graphdump/stats.h"

namespace graphdump {
namespace {

// Offset of the data in a little-endian float32 .npy file (format versions 1 to 3); -1 otherwise.
int64_t NpyDataOffset(const uint8_t* p, size_t size) {
  if (size < 12 || std::memcmp(p, "\x93NUMPY", 6) != 0) return -1;
  const int64_t header = p[6] == 1 ? 10 + (p[8] | p[9] << 8)
                                   : 12 + (p[8] | p[9] << 8 | p[10] << 16 | int64_t{p[11]} << 24);
  const std::string text(reinterpret_cast<const char*>(p), std::min<size_t>(header, size));
  if (text.find("'<f4'") == std::string::npos) return -1;
  return header;
}

int Run(const char* path, int repetitions, bool counts) {
  const int fd = open(path, O_RDONLY);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) {
    std::fprintf(stderr, "stats_file_bench: cannot open %s\n", path);
    return 3;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    std::fprintf(stderr, "stats_file_bench: cannot map %s\n", path);
    return 3;
  }
  const auto* bytes = static_cast<const uint8_t*>(map);
  const int64_t offset = NpyDataOffset(bytes, size);
  if (offset < 0) {
    std::fprintf(stderr, "stats_file_bench: %s is not a little-endian float32 .npy\n", path);
    return 2;
  }
  const int64_t elements = static_cast<int64_t>(size - offset) / 4;
  double best = std::numeric_limits<double>::infinity();
  NanPropagatingStats stats;
  for (int i = 0; i < repetitions; ++i) {
    const auto start = std::chrono::steady_clock::now();
    stats = ComputeStats(DType::kFloat32, bytes + offset, elements,
                         StatsRequest{.counts = counts, .md5 = false});
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count());
  }
  std::printf("seconds=%.6f\nkernels=%s\n", best, std::string(StatsKernels()).c_str());
  std::printf("count=%llu\nmax=%.17g\nmin=%.17g\navg=%.17g\nl2norm=%.17g\n",
              static_cast<unsigned long long>(stats.count), stats.max, stats.min, stats.avg,
              stats.l2norm);
  std::printf("negative_count=%llu\npositive_count=%llu\nnan_count=%llu\n",
              static_cast<unsigned long long>(stats.negative_count),
              static_cast<unsigned long long>(stats.positive_count),
              static_cast<unsigned long long>(stats.nan_count));
  std::printf("negative_inf_count=%llu\npositive_inf_count=%llu\nzero_count=%llu\n",
              static_cast<unsigned long long>(stats.negative_inf_count),
              static_cast<unsigned long long>(stats.positive_inf_count),
              static_cast<unsigned long long>(stats.zero_count));
  munmap(map, size);
  return 0;
}

}  // namespace
}  // namespace graphdump

int main(int argc, char** argv) {
  if (argc < 2) {
    std::printf("stats_file_bench: helper of bench/stats_vs_numpy.py (needs FILE.npy); skipped\n");
    return 0;
  }
  const bool counts = argc <= 3 || std::strcmp(argv[3], "values") != 0;
  return graphdump::Run(argv[1], argc > 2 ? std::atoi(argv[2]) : 5, counts);
}
