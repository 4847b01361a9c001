// Writing a file again under its name, as a dump rewrites its graph files (graphs/*.ir, *.pb and
// the execution order) when it finds new kernels: graphdump's file layer against the plain way
// (write a temporary, rename it over the old file), side by side in one process, alternating.
//
// GRAPHDUMP_BENCH_DIR (default /tmp) chooses the file system; GRAPHDUMP_BENCH_KIB (default 173:
// the .ir of bench/lib/eager_lm_training.py's step) the file's size. Nothing is fsynced.
//
// Prints `bench: file_replace_vs_rename ratio=X`: the plain way's time over graphdump's (median
// of rounds; above 1 is faster). On ext4, renaming over a file writes the new one out at once
// (auto_da_alloc): graphdump exchanges the names instead.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "graphdump/file_system.h"

namespace graphdump {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kWrites = 40;  // a round: this many writes of the file
constexpr int kRounds = 9;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Fail(const std::string& what) {
  std::fprintf(stderr, "file_replace_bench: %s\n", what.c_str());
  std::exit(3);
}

// The plain way: the bytes under a temporary name, renamed over `path`.
void WriteAndRename(const std::string& path, const std::string& data) {
  const std::string temp = path + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
  if (fd < 0 || ::write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size()) ||
      ::close(fd) != 0 || ::rename(temp.c_str(), path.c_str()) != 0) {
    Fail("cannot write " + path);
  }
}

int Main() {
  const char* dir_env = std::getenv("GRAPHDUMP_BENCH_DIR");
  const char* kib_env = std::getenv("GRAPHDUMP_BENCH_KIB");
  const std::string base = dir_env && *dir_env ? dir_env : "/tmp";
  const size_t kib = kib_env && *kib_env ? std::strtoul(kib_env, nullptr, 10) : 173;
  const std::string dir = base + "/file_replace_bench." + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::string data(kib << 10, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 % 251);
  std::shared_ptr<FileSystem> fs = NewPosixFileSystem(/*fsync=*/false, dir);
  const std::string ours = dir + "/ours.ir", plain = dir + "/plain.ir";
  if (!fs->WriteWholeFile(ours, data).ok()) Fail("cannot write " + ours);
  WriteAndRename(plain, data);
  std::vector<double> ratios;
  for (int round = 0; round < kRounds; ++round) {
    ::sync();
    auto start = Clock::now();
    for (int i = 0; i < kWrites; ++i) {
      const Status written = fs->WriteWholeFile(ours, data);
      if (!written.ok()) Fail(written.message());
    }
    const double graphdump = std::chrono::duration<double>(Clock::now() - start).count();
    ::sync();
    start = Clock::now();
    for (int i = 0; i < kWrites; ++i) WriteAndRename(plain, data);
    const double renamed = std::chrono::duration<double>(Clock::now() - start).count();
    ratios.push_back(renamed / graphdump);
    std::printf("round %d: %d writes of %zu KiB: graphdump %.3f ms each, write and rename %.3f ms\n",
                round + 1, kWrites, kib, graphdump / kWrites * 1e3, renamed / kWrites * 1e3);
  }
  std::filesystem::remove_all(dir);
  std::printf("bench: file_replace_vs_rename ratio=%.3f\n", Median(ratios));
  return 0;
}

}  // namespace
}  // namespace graphdump

int main() { return graphdump::Main(); }
