// graphdump bisect: find a small set of kernels that must run in float32 for a bf16 or fp16 run
// to match the float32 run (docs/precision.md, "Bisect"). The search is BisectPrecision
// (src/torch/replay/bisect.cc); this file parses flags, prints each round and the result.
#include <torch/script.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "graphdump/analysis/source_json.h"
#include "graphdump/torch/bisect.h"
#include "graphdump/torch/torch_model.h"
#include "bisect_printer.h"
#include "torch_cli.h"

namespace graphdump::tools {
namespace {

constexpr char kBisectFooter[] = R"(
The float32 run is the reference (as `run --precision fp32`); the error of a run is the relative
L2 error ||y - y32|| / ||y32|| of the model's output (the largest over its tensors), or of the
outputs of the kernel --target names. Rounds: the run with nothing kept, then with every
candidate kept (floating-point kernels that ran, then the floating parameters and buffers,
kept with their float32 values; when even that misses the tolerance no set can meet it,
exit 1), then bisection (halves in candidate order, keeping a half that passes) and pruning
(dropping each candidate whose removal still passes), so removing any one member of the
result misses the tolerance. The result names each kernel and its source line, each parameter
by its dotted name, and the `graphdump run` command that reproduces it.

A script instead of a model: `graphdump bisect --precision bf16 [--steps N] -- SCRIPT ARGS` runs
the unchanged script once per round (`graphdump python --precision bf16 --keep-fp32 ...`, no
dump); the reference is its float32 run, the error that of the floating tensors its first
module returns at its last call (within N steps); candidates are the kernels that ran with
floating values, named as the eager dump names them, then the modules' floating parameters and
buffers. Kernels are matched across rounds by name: a script whose kernels change between
rounds is an error (exit 2). The result ends with the `graphdump python` command to reproduce.

examples:
  graphdump bisect model.pt --input x.npy --precision bf16
  graphdump bisect --precision bf16 -- train.py --epochs 1
  graphdump bisect --precision bf16 --steps 2 --tolerance 0.02 -- train.py
  graphdump bisect model.pt --input x.npy --precision bf16 --tolerance 0.001
  graphdump bisect model.pt --input-shape 1x3x64x64 --precision bf16 --json
  graphdump bisect model.pt --input x.npy --precision bf16 --target Default/fc-Linear/linear-op9

exit codes: 0 a set was found (or the run already matches: nothing to keep), 1 even every
candidate kept in float32 misses the tolerance, 2 usage error, 3 a kernel failed.
)";

}  // namespace

int RunTorchBisect(int argc, char** argv) {
  const std::string command = argv[0];
  CLI::App app(
      "Find a small set of kernels that must run in float32 for a bf16 or fp16 run of a "
      "TorchScript model, or of your own script (-- SCRIPT ARGS), to match its float32 run "
      "within a tolerance (docs/precision.md).",
      command);
  BisectFlags flags;
  // Script mode: `bisect [OPTIONS] -- SCRIPT ARGS` (torch_cmd_bisect_script.cc).
  int own = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      own = i;
      flags.script.assign(argv + i + 1, argv + argc);
      break;
    }
  }
  const bool script_mode = own < argc;
  auto* model_option =
      app.add_option("model", flags.model, "TorchScript archive written by torch.jit.save");
  if (!script_mode) model_option->required();
  app.add_option("--input", flags.input_files, "a model input as .npy; repeat for several inputs")
      ->check(CLI::ExistingFile);
  app.add_option("--input-shape", flags.input_shape,
                 "shape of the random input when no --input is given (default 1x3x224x224)");
  app.add_option("--seed", flags.seed, "seed for the random input (default 0)");
  app.add_option("--precision", flags.precision,
                 "the run under test: bf16 or fp16 (required; the reference is float32)");
  app.add_option("--tolerance", flags.tolerance,
                 "the largest relative L2 error that matches float32 (default 0.01)");
  app.add_option("--target", flags.target,
                 "measure the error on this kernel's outputs instead of the model's output: a "
                 "full name, or an op type or name-regex(RE) that selects one kernel");
  app.add_option("--steps", flags.steps,
                 "with -- SCRIPT: stop each run of the script after N optimizer steps (without "
                 "an optimizer: N calls of its first module)");
  app.add_flag("--json", flags.json,
               "print the result as JSON on stdout (the rounds go to stderr)");
  app.footer(kBisectFooter);
  try {
    app.parse(own, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  BisectOptions options;
  if (flags.precision == "bf16") {
    options.dtype = at::kBFloat16;
  } else if (flags.precision == "fp16") {
    options.dtype = at::kHalf;
  } else {
    return Fail(command, Status::InvalidArgument(
                             (flags.precision.empty() ? std::string("no --precision")
                                                      : "--precision " + flags.precision) +
                             ": bisect compares a lower-precision run with the float32 run; give "
                             "--precision bf16 or fp16"));
  }
  if (!std::isfinite(flags.tolerance) || flags.tolerance < 0) {
    return Fail(command, Status::InvalidArgument(
                             "--tolerance " + Number(flags.tolerance) +
                             ": a relative L2 error, a finite number >= 0 (default 0.01)"));
  }
  options.tolerance = flags.tolerance;
  options.target = flags.target;
  if (script_mode) {
    if (flags.script.empty()) {
      return Fail(command, Status::InvalidArgument("no script after --: graphdump bisect "
                                                   "--precision bf16 -- train.py ARGS"));
    }
    if (!flags.model.empty() || !flags.input_files.empty() || !flags.target.empty()) {
      return Fail(command, Status::InvalidArgument(
                               "a script is bisected on its own (-- SCRIPT ARGS): give no model, "
                               "--input or --target with it"));
    }
    if (flags.steps < 0) {
      return Fail(command, Status::InvalidArgument("--steps " + std::to_string(flags.steps) +
                                                   ": a number of steps, 1 or more"));
    }
    flags.model = flags.script[0];
    return RunScriptBisect(command, flags, options);
  }
  if (flags.steps != 0) {
    return Fail(command, Status::InvalidArgument("--steps is for a script (-- SCRIPT ARGS)"));
  }

  torch::NoGradGuard no_grad;
  torch::manual_seed(flags.seed);
  std::vector<c10::IValue> inputs;
  if (flags.input_files.empty()) {
    auto shape = ParseShape(flags.input_shape);
    if (!shape.ok()) return Fail(command, shape.status());
    inputs.push_back(at::randn(*shape));
  }
  for (const std::string& file : flags.input_files) {
    auto tensor = ReadNpy(file);
    if (!tensor.ok()) return Fail(command, tensor.status());
    inputs.push_back(*tensor);
  }
  auto model = TorchModel::Load(flags.model, nullptr);
  if (!model.ok()) return Fail(command, model.status());
  (*model)->module().eval();
  BisectPrinter printer(flags, (*model)->graph().kernels, (*model)->StateNames());
  printer.Header();
  auto result = BisectPrecision(**model, inputs, options,
                                [&](const BisectRound& round) { printer.Round(round); });
  if (!result.ok()) return Fail(command, result.status());
  if (flags.json) {
    std::printf("%s\n", printer.Json(*result).dump(2).c_str());
  } else {
    printer.Result(*result);
  }
  if (result->outcome == BisectResult::Outcome::kUnreachable) {
    std::fprintf(stderr, "%s: %s\n", command.c_str(), printer.Unreachable(*result).c_str());
    return kExitFinding;
  }
  return kExitOk;
}

}  // namespace graphdump::tools
