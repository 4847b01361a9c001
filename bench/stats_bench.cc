// Throughput of the writer's per-tensor work: the fused statistics pass (with and without md5),
// and WriteTensor for contiguous and transposed tensors. Besides Google Benchmark's table it
// prints `bench: NAME ratio=X` lines:
//   stats_f32_vs_memcpy     time of the statistics pass / time of memcpy of the same bytes
//   naive_vs_stats_f32      time of a straightforward per-element loop / the fused pass
//   stats_md5_vs_stats      statistics with md5 / without
//   write_transposed_vs_contiguous   WriteTensor of a transposed view / of a contiguous one
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "graphdump/file_system.h"
#include "graphdump/internal/tensor_writer.h"
#include "graphdump/stats.h"

namespace graphdump {
namespace {

constexpr int64_t kElements = 1 << 22;  // 16 MiB of float32

const std::vector<float>& Data() {
  static const std::vector<float> data = [] {
    std::vector<float> v(kElements);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 10.0f);
    for (float& x : v) x = normal(rng);
    return v;
  }();
  return data;
}

// The obvious implementation: one switch-free loop with every check per element.
NanPropagatingStats NaiveStats(const float* p, int64_t n) {
  NanPropagatingStats s;
  double sum = 0, squares = 0;
  s.max = -std::numeric_limits<double>::infinity();
  s.min = std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    const double x = p[i];
    if (std::isnan(x)) {
      ++s.nan_count;
      continue;
    }
    if (std::isinf(x)) ++(x > 0 ? s.positive_inf_count : s.negative_inf_count);
    if (x < 0) ++s.negative_count;
    if (x > 0) ++s.positive_count;
    if (x == 0) ++s.zero_count;
    s.max = std::max(s.max, x);
    s.min = std::min(s.min, x);
    sum += x;
    squares += x * x;
  }
  s.count = static_cast<uint64_t>(n);
  s.avg = sum / static_cast<double>(n);
  s.l2norm = std::sqrt(squares);
  return s;
}

std::string BenchDir() {
  const char* shm = "/dev/shm";
  std::string base = access(shm, W_OK) == 0 ? shm : "/tmp";
  static const std::string dir = base + "/graphdump_bench_" + std::to_string(getpid());
  static const bool made = NewPosixFileSystem()->CreateDirectories(dir).ok();
  (void)made;
  return dir;
}

TensorView ContiguousView() {
  TensorView view;
  view.dtype = DType::kFloat32;
  view.shape = {2048, 2048};
  view.data = Data().data();
  return view;
}

TensorView TransposedView() {
  TensorView view = ContiguousView();
  view.strides = {1, 2048};
  return view;
}

void WriteOnce(const TensorView& view, const std::string& name) {
  auto fs = NewPosixFileSystem();
  TensorWriteOptions options;
  options.stats = StatsRequest{};
  const std::string path = BenchDir() + "/" + name + ".npy";
  auto result = WriteTensor(*fs, path, view, options);
  if (!result.ok()) std::fprintf(stderr, "%s\n", result.status().message().c_str());
  std::remove(path.c_str());
}

void BM_StatsFloat32(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        ComputeStats(DType::kFloat32, Data().data(), kElements, state.range(0)));
  }
  state.SetBytesProcessed(state.iterations() * kElements * 4);
}
BENCHMARK(BM_StatsFloat32)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// The float32 data as bfloat16 (truncated) or float16 (rounded by the compiler's _Float16).
const std::vector<uint16_t>& HalfData(DType dtype) {
  static const auto make = [](bool bf16) {
    std::vector<uint16_t> v(kElements);
    for (int64_t i = 0; i < kElements; ++i) {
      const float x = Data()[i];
      if (bf16) {
        v[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(x) >> 16);
      } else {
        v[i] = std::bit_cast<uint16_t>(static_cast<_Float16>(x));
      }
    }
    return v;
  };
  static const std::vector<uint16_t> bf16 = make(true), f16 = make(false);
  return dtype == DType::kBFloat16 ? bf16 : f16;
}

void BM_StatsHalfTypes(benchmark::State& state) {
  const DType dtype = state.range(0) ? DType::kBFloat16 : DType::kFloat16;
  const std::vector<uint16_t>& data = HalfData(dtype);
  for (auto _ : state) {
    benchmark::DoNotOptimize(ComputeStats(dtype, data.data(), kElements, false));
  }
  state.SetBytesProcessed(state.iterations() * kElements * 2);
}
BENCHMARK(BM_StatsHalfTypes)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_NaiveStats(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(NaiveStats(Data().data(), kElements));
  state.SetBytesProcessed(state.iterations() * kElements * 4);
}
BENCHMARK(BM_NaiveStats)->Unit(benchmark::kMillisecond);

void BM_WriteTensor(benchmark::State& state) {
  const TensorView view = state.range(0) ? TransposedView() : ContiguousView();
  for (auto _ : state) WriteOnce(view, "w");
  state.SetBytesProcessed(state.iterations() * kElements * 4);
}
BENCHMARK(BM_WriteTensor)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Best of `runs` wall-clock seconds of `f`.
double BestSeconds(const std::function<void()>& f, int runs = 7) {
  double best = 1e300;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

void PrintRatios() {
  std::vector<float> copy(kElements);
  const double memcpy_s = BestSeconds([&] {
    std::memcpy(copy.data(), Data().data(), kElements * 4);
    benchmark::DoNotOptimize(copy.data());
  });
  const double stats_s = BestSeconds([] {
    benchmark::DoNotOptimize(ComputeStats(DType::kFloat32, Data().data(), kElements, false));
  });
  const double md5_s = BestSeconds([] {
    benchmark::DoNotOptimize(ComputeStats(DType::kFloat32, Data().data(), kElements, true));
  });
  const double naive_s =
      BestSeconds([] { benchmark::DoNotOptimize(NaiveStats(Data().data(), kElements)); });
  const double contiguous_s = BestSeconds([] { WriteOnce(ContiguousView(), "c"); });
  const double transposed_s = BestSeconds([] { WriteOnce(TransposedView(), "t"); });
  std::printf("bench: stats_f32_vs_memcpy ratio=%.2f\n", stats_s / memcpy_s);
  std::printf("bench: naive_vs_stats_f32 ratio=%.2f\n", naive_s / stats_s);
  std::printf("bench: stats_md5_vs_stats ratio=%.2f\n", md5_s / stats_s);
  std::printf("bench: write_transposed_vs_contiguous ratio=%.2f\n", transposed_s / contiguous_s);
}

}  // namespace
}  // namespace graphdump

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  graphdump::PrintRatios();
  rmdir(graphdump::BenchDir().c_str());
  return 0;
}
