// Writing tensors through the asynchronous DumpSession against dd writing the same number of
// bytes to the same directory, side by side in one process.
//
// GRAPHDUMP_BENCH_GIB (default 2) GiB of float32 tensors of 1 to 64 MiB each are the outputs of
// one kernel each; one step runs OnKernelDone for every kernel, then Close(). The time is taken
// from BeginStep to the end of Close() (every file renamed into place). dd writes the same total
// with `bs=4M` from /dev/zero into one file, before and after the session (best of the two).
// Sync policy: neither side fsyncs (the session's default file system does not, and dd runs
// without conv=fsync), so both measure writing into the page cache with the kernel's writeback.
// GRAPHDUMP_BENCH_DIR (default /tmp) chooses the file system.
//
// Prints `bench: session_write_vs_dd ratio=X` (graphdump bytes/s / dd bytes/s; target >= 0.8).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "graphdump/config.h"
#include "graphdump/session.h"

namespace graphdump {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string Env(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

// Tensor sizes in bytes: 1 to 64 MiB each (multiples of 4), adding up to `total`.
std::vector<size_t> TensorSizes(size_t total) {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<size_t> mib(1, 64);
  std::vector<size_t> sizes;
  size_t sum = 0;
  while (sum < total) {
    size_t size = std::min(mib(rng) << 20, total - sum);
    size = std::max<size_t>(size & ~size_t{3}, 4);
    sizes.push_back(size);
    sum += size;
  }
  return sizes;
}

double TimeDd(const std::string& dir, size_t total) {
  const std::string file = dir + "/dd.bin";
  const std::string command = "dd if=/dev/zero of=" + file +
                              " bs=4M count=" + std::to_string(total >> 22) + " status=none";
  const auto start = Clock::now();
  const int rc = std::system(command.c_str());
  const double took = Seconds(start);
  std::filesystem::remove(file);
  if (rc != 0) {
    std::fprintf(stderr, "session_write_bench: `%s` failed\n", command.c_str());
    std::exit(3);
  }
  return took;
}

double TimeSession(const std::string& dir, const std::vector<std::vector<float>>& tensors) {
  const std::string json = R"({"common_dump_settings": {"dump_mode": 0, "path": ")" + dir +
                           R"(", "net_name": "Net", "iteration": "all", "input_output": 2,
      "kernels": [], "support_device": [0], "saved_data": "tensor"},
      "e2e_dump_settings": {"enable": false}})";
  StatusOr<ParsedConfig> parsed = ParseConfig(json, "session_write_bench.json", "");
  if (!parsed.ok()) {
    std::fprintf(stderr, "session_write_bench: %s\n", parsed.status().message().c_str());
    std::exit(3);
  }
  GraphInfo graph;
  graph.name = "bench";
  for (size_t i = 0; i < tensors.size(); ++i) {
    KernelInfo kernel;
    kernel.full_name = "Default/Bench-op" + std::to_string(i);
    kernel.outputs.push_back({DType::kFloat32, {static_cast<int64_t>(tensors[i].size())}});
    graph.kernels.push_back(std::move(kernel));
  }
  SessionOptions options;
  options.config = parsed->config;
  options.config.source_bytes = json;
  StatusOr<std::unique_ptr<DumpSession>> opened = DumpSession::Open(std::move(options));
  if (!opened.ok() || !*opened) {
    std::fprintf(stderr, "session_write_bench: cannot open the session\n");
    std::exit(3);
  }
  std::unique_ptr<DumpSession> session = std::move(opened).value();
  if (!session->OnGraphCompiled(graph).ok()) std::exit(3);
  const auto start = Clock::now();
  session->BeginStep(graph.graph_id);
  for (size_t i = 0; i < tensors.size(); ++i) {
    TensorView view;
    view.shape = {static_cast<int64_t>(tensors[i].size())};
    view.data = tensors[i].data();
    session->OnKernelDone(graph.kernels[i], {}, {view});
  }
  session->EndStep(graph.graph_id);
  const Status closed = session->Close();
  const double took = Seconds(start);
  if (!closed.ok()) {
    std::fprintf(stderr, "session_write_bench: %s\n", closed.message().c_str());
    std::exit(3);
  }
  const DumpSummary summary = session->Summary();
  if (summary.files != tensors.size()) {
    std::fprintf(stderr, "session_write_bench: wrote %llu files, expected %zu\n",
                 static_cast<unsigned long long>(summary.files), tensors.size());
    std::exit(3);
  }
  return took;
}

int Run() {
  const double gib = std::atof(Env("GRAPHDUMP_BENCH_GIB", "2").c_str());
  const size_t total = static_cast<size_t>(gib * (1 << 30)) & ~((size_t{1} << 22) - 1);
  const std::string dir = Env("GRAPHDUMP_BENCH_DIR", "/tmp") + "/graphdump_session_bench_" +
                          std::to_string(getpid());
  std::filesystem::create_directories(dir);

  std::vector<std::vector<float>> tensors;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (size_t size : TensorSizes(total)) {
    std::vector<float> t(size / 4);
    for (size_t i = 0; i < t.size(); i += 1024) t[i] = normal(rng);  // touch every page
    tensors.push_back(std::move(t));
  }

  const double dd_before = TimeDd(dir, total);
  const double ours = TimeSession(dir + "/dump", tensors);
  std::filesystem::remove_all(dir + "/dump");
  const double dd_after = TimeDd(dir, total);
  std::filesystem::remove_all(dir);

  const double dd = std::min(dd_before, dd_after);
  const double mib = static_cast<double>(total) / (1 << 20);
  std::printf("%zu tensors, %.0f MiB in %s (no fsync on either side): graphdump %.3fs "
              "(%.0f MiB/s), dd %.3fs / %.3fs (best %.0f MiB/s)\n",
              tensors.size(), mib, dir.c_str(), ours, mib / ours, dd_before, dd_after, mib / dd);
  std::printf("bench: session_write_vs_dd ratio=%.2f\n", dd / ours);
  return 0;
}

}  // namespace
}  // namespace graphdump

int main() { return graphdump::Run(); }
