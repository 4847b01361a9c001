// Executor overhead: graphdump's node-by-node executor with dumping off against
// torch::jit::Module::forward (TorchScript's own interpreter), scripted resnet18, batch 8, in
// the same process. Rounds alternate between the two so that machine noise hits both alike;
// the ratio is of the median round times.
//   bench: executor_vs_forward ratio=X      (target <= 1.03)
// Environment: GRAPHDUMP_BENCH_IMAGE (default 224), GRAPHDUMP_BENCH_ROUNDS (default 7),
// GRAPHDUMP_BUILD_DIR / GRAPHDUMP_SOURCE_DIR (where the model is made), GRAPHDUMP_PYTHON (the
// Python that makes it, default python3).
#include <torch/script.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "graphdump/torch/torch_model.h"

namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

std::string Env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

template <typename F>
double Seconds(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  const std::string build = Env("GRAPHDUMP_BUILD_DIR", "build");
  const std::string source = Env("GRAPHDUMP_SOURCE_DIR", ".");
  const std::string dir = build + "/bench_models";
  const std::string path = dir + "/resnet18.pt";
  // The Python of the project's environment (scripts/venv), the one with torch.
  const std::string python = Env("GRAPHDUMP_PYTHON", "python3");
  if (std::system(("test -f " + path + " || " + python + " " + source +
                   "/examples/make_models.py " + dir + " resnet18 >/dev/null")
                      .c_str()) != 0) {
    std::fprintf(stderr, "executor_bench: could not make %s\n", path.c_str());
    return 1;
  }
  const int image = EnvInt("GRAPHDUMP_BENCH_IMAGE", 224);
  const int rounds = EnvInt("GRAPHDUMP_BENCH_ROUNDS", 7);
  torch::NoGradGuard no_grad;
  auto model = graphdump::TorchModel::Load(path, nullptr);
  if (!model.ok()) {
    std::fprintf(stderr, "executor_bench: %s\n", model.status().message().c_str());
    return 1;
  }
  torch::jit::Module& module = (*model)->module();
  module.eval();
  torch::manual_seed(0);
  at::Tensor x = at::randn({8, 3, image, image});
  std::vector<double> ours, stock;
  bool same = true;
  for (int r = -2; r < rounds; ++r) {  // two warm-up rounds
    at::Tensor a, b;
    const double t_stock = Seconds([&] { b = module.forward({x}).toTensor(); });
    const double t_ours = Seconds([&] {
      auto out = (*model)->Forward({x});
      if (out.ok()) a = out->toTensor();
    });
    same = same && a.defined() && at::equal(a, b);
    if (r < 0) continue;
    ours.push_back(t_ours);
    stock.push_back(t_stock);
  }
  std::printf(
      "executor_bench: resnet18 batch 8 %dx%d, %d rounds: forward %.4f s, executor "
      "%.4f s (median), outputs %s\n",
      image, image, rounds, Median(stock), Median(ours), same ? "identical" : "DIFFER");
  std::printf("bench: executor_vs_forward ratio=%.3f\n", Median(ours) / Median(stock));
  return same ? 0 : 1;
}
