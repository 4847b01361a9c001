// graphdump run: execute a TorchScript model's forward graph with graphdump's graph executor,
// dumping the kernels the configuration selects. Logic lives in src/torch; this file parses
// flags, prepares inputs and prints progress and the summary.
#include <fcntl.h>
#include <sys/stat.h>
#include <torch/script.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "commands.h"
#include "graphdump/config.h"
#include "graphdump/file_system.h"
#include "graphdump/ge_dialect.h"
#include "graphdump/launcher.h"
#include "graphdump/npy.h"
#include "graphdump/rank_environment.h"
#include "graphdump/selector.h"
#include "graphdump/session.h"
#include "graphdump/torch/distributed.h"
#include "graphdump/torch/scalar_type.h"
#include "graphdump/torch/torch_model.h"
#include "graphdump/torch/trainer.h"
#include "torch_cli.h"
#include "torch_run_parts.h"

namespace graphdump::tools {
namespace {

std::string Describe(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    std::ostringstream s;
    s << "tensor " << t.sizes() << " " << c10::toString(t.scalar_type());
    return s.str();
  }
  return v.tagKind();
}

constexpr char kRunFooter[] = R"(
Inputs come from --input files (one per model input, in order) or, without them, from
torch.randn with --input-shape and --seed (the same as torch.manual_seed(seed); torch.randn(...)
in Python). Each step runs the model's forward graph kernel by kernel; what is dumped follows
the configuration (docs/configuration.md, docs/cli-run-train.md).

examples:
  graphdump run alexnet.pt --input-shape 1x3x224x224 --config data_dump.json
  GRAPHDUMP_CONFIG=$PWD/data_dump.json graphdump run resnet18.pt --input x.npy --steps 3
  graphdump run model.pt --list-kernels            # full names, modules and source lines
  graphdump run model.pt --config dump.json --set-dump features.0 --input-shape 1x3x64x64
  graphdump run model.pt --input x.npy --precision bf16 --config dump.json   # float32 x is cast
  graphdump run model.pt --input x.npy --precision bf16 --keep-fp32 dot 'name-regex(.*/sub-op[0-9]+)'

A MODEL whose name ends in .pt2 is an exported program (torch.export.save): it runs node by
node, each ATen node a kernel named by its module, with --input, --input-shape, --steps, --seed,
--config, --dump-path, --overwrite and --save-output (docs/cli-run-train.md, "Exported
programs"; `graphdump run MODEL.pt2 --help`).

--precision bf16|fp16|fp32 casts the model's floating parameters, buffers and inputs; kernel
names stay those of the float32 run, so `graphdump compare` pairs the two dumps by name.
--keep-fp32 runs the kernels it selects in float32 (inputs cast up; kept kernels pass float32 to
each other; other kernels and the model's result get the run's dtype) and keeps the parameters
and buffers it names (pos.freqs) with their float32 values: docs/precision.md.
)";

}  // namespace

int RunTorchRun(int argc, char** argv) {
  const std::string command = argv[0];
  CLI::App app(
      "Run a TorchScript model's forward graph kernel by kernel, dumping the kernels "
      "the configuration selects.",
      command);
  CommonFlags flags;
  AddCommonFlags(app, &flags);
  std::vector<std::string> input_files;
  std::string save_output;
  flags.input_shape = "1x3x224x224";
  app.add_option("--input", input_files, "a model input as .npy; repeat for several inputs")
      ->check(CLI::ExistingFile);
  app.add_option("--input-shape", flags.input_shape,
                 "shape of the random input when no --input is given (default 1x3x224x224)");
  app.add_option("--save-output", save_output,
                 "write the last step's output tensor as .npy (a new path or a regular file)");
  app.footer(kRunFooter);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  if (const std::string problem = OutputPathProblem(save_output);
      !save_output.empty() && !problem.empty()) {
    std::fprintf(stderr, "%s: error: --save-output %s: %s\n", command.c_str(), save_output.c_str(),
                 problem.c_str());
    return kExitUsage;
  }
  torch::NoGradGuard no_grad;
  torch::manual_seed(flags.seed);
  std::vector<c10::IValue> inputs;
  if (input_files.empty()) {
    auto shape = ParseShape(flags.input_shape);
    if (!shape.ok()) return Fail(command, shape.status());
    inputs.push_back(at::randn(*shape));
  }
  for (const std::string& file : input_files) {
    auto tensor = ReadNpy(file);
    if (!tensor.ok()) return Fail(command, tensor.status());
    inputs.push_back(*tensor);
  }
  if (flags.list_kernels) return ListKernels(command, flags, inputs, /*train_mode=*/false);
  auto loaded = LoadModel(flags);
  if (!loaded.ok()) return Fail(command, loaded.status());
  TorchModel& model = *loaded->model;
  model.module().eval();
  int code = kExitOk;
  std::string failure;
  c10::IValue last;
  for (int step = 0; step < flags.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    auto out = model.Forward(inputs);
    if (!out.ok()) {
      failure = "step " + std::to_string(step + 1) + ": " + out.status().message();
      std::fprintf(stderr, "%s: error: %s\n", command.c_str(), failure.c_str());
      code = ExitFor(out.status()) == kExitUsage ? kExitUsage : kExitFailure;
      break;
    }
    last = *out;
    std::printf("step %d/%d: %s (%.3f s)\n", step + 1, flags.steps, Describe(last).c_str(),
                Seconds(start));
    std::fflush(stdout);
  }
  if (code == kExitOk && !save_output.empty()) {
    Status st = last.isTensor()
                    ? WriteNpyFile(save_output, last.toTensor())
                    : Status::InvalidArgument("--save-output " + save_output +
                                              ": the model's output is a " + Describe(last) +
                                              ", not a tensor; nothing was written");
    if (!st.ok()) code = Fail(command, st);
  }
  return FinishSession(command, loaded->session.get(), loaded->dump_off, code, failure);
}

}  // namespace graphdump::tools
