// graphdump train: train a TorchScript model with graphdump's graph executor, dumping forward,
// backward and optimizer kernels, on one rank or several (--nproc). Logic lives in src/torch;
// this file parses flags, prepares data and prints progress and the summary.
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

constexpr char kTrainFooter[] = R"(
Trains with cross-entropy loss. Data comes from --data/--labels .npy files (the whole file is
one batch, used every step) or is synthetic: torch.randn(--input-shape) and
torch.randint(--classes) with --seed. Backward kernels are dumped as
Gradients/<forward scope>/<BackwardNode>-op{N}, optimizer updates as
Default/optimizer-<Name>/<parameter>/<Update>-op{N}, parameters as Parameter.* files.

examples:
  graphdump train alexnet.pt --steps 3 --input-shape 2x3x64x64 --classes 10 \
      --config examples/data_dump.json
  graphdump train model.pt --data x.npy --labels y.npy --optimizer adam --lr 0.001 --steps 10
  graphdump train model.pt --steps 2 --input-shape 4x12 --classes 3 --save-model trained.pt
  graphdump train model.pt --steps 3 --data x.npy --labels y.npy --precision bf16 --keep-fp32 softmax

multi-rank (data parallel, docs/distributed.md): --nproc N starts N ranks on this machine; each
trains on rows [r*B/N, (r+1)*B/N) of the batch, gradients are averaged across ranks by
AllReduce kernels, and rank r dumps into rank_{r} when support_device lists it. Without --nproc,
RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (torchrun's variables) make this process one rank.
  graphdump train model.pt --steps 3 --data x.npy --labels y.npy --config dump.json --nproc 2
  RANK=1 WORLD_SIZE=2 MASTER_ADDR=host0 MASTER_PORT=29500 graphdump train model.pt ...
)";

// Runs this `graphdump train` command line as `nproc` ranks (without --nproc).
int LaunchTrainRanks(int nproc, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> rank_argv = {"/proc/self/exe", "train"};
  for (std::string& a : ArgsWithoutOption(args, "--nproc")) rank_argv.push_back(std::move(a));
  std::printf("graphdump train: starting %d ranks on this machine\n", nproc);
  std::fflush(stdout);
  return LaunchRanks(nproc, rank_argv);
}

}  // namespace

int RunTorchTrain(int argc, char** argv) {
  const std::string command = argv[0];
  CLI::App app(
      "Train a TorchScript model with graphdump's executor, dumping forward, backward "
      "and optimizer kernels.",
      command);
  CommonFlags flags;
  AddCommonFlags(app, &flags);
  std::string data_file, labels_file, optimizer = "sgd", save_model;
  int64_t classes = 10;
  TrainerOptions options;
  flags.input_shape = "2x3x224x224";
  app.add_option("--data", data_file, "training inputs as .npy (one batch)")
      ->check(CLI::ExistingFile);
  app.add_option("--labels", labels_file, "int64 class indices as .npy")->check(CLI::ExistingFile);
  app.add_option("--input-shape", flags.input_shape,
                 "shape of synthetic inputs (default 2x3x224x224)");
  app.add_option("--classes", classes, "number of classes of synthetic labels (default 10)")
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("--optimizer", optimizer, "sgd, momentum or adam (default sgd)")
      ->check(CLI::IsMember({"sgd", "momentum", "adam"}));
  app.add_option("--lr", options.lr, "learning rate (default 0.01)")
      ->check(CLI::Validator(
          [](const std::string& text) {
            double lr = 0;
            return CLI::detail::lexical_cast(text, lr) && lr > 0
                       ? std::string()
                       : "'" + text + "' is not a positive number";
          },
          "POSITIVE"));
  app.add_option("--momentum", options.momentum, "momentum of --optimizer momentum (0.9)");
  app.add_option("--save-model", save_model,
                 "save the trained module (torch.jit.save format; rank 0 only; a new path or a "
                 "regular file)");
  int nproc = 0;
  app.add_option("--nproc", nproc, "start this many ranks on this machine (data parallel, gloo)")
      ->check(CLI::Range(1, 1024));
  app.footer(kTrainFooter);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  if (flags.model.ends_with(".pt2")) {
    return Fail(command, Status::InvalidArgument(
                             flags.model + " is an exported program (torch.export.save): train "
                             "takes TorchScript files; `graphdump run` runs exported programs, "
                             "and a training script runs under `graphdump python` "
                             "(docs/cli-run-train.md, \"Exported programs\")"));
  }
  if (data_file.empty() != labels_file.empty()) {
    return Fail(command, Status::InvalidArgument("--data and --labels go together"));
  }
  if (const std::string problem = OutputPathProblem(save_model);
      !save_model.empty() && !problem.empty()) {
    return Fail(command, Status::InvalidArgument("--save-model " + save_model + ": " + problem));
  }
  StatusOr<RankEnvironment> env = RankEnvironmentFromEnv();
  if (!env.ok()) return Fail(command, env.status());
  if (nproc > 0 && !env->distributed()) return LaunchTrainRanks(nproc, argc, argv);
  options.optimizer = optimizer == "adam"       ? OptimizerKind::kAdam
                      : optimizer == "momentum" ? OptimizerKind::kMomentum
                                                : OptimizerKind::kSgd;
  torch::manual_seed(flags.seed);
  at::Tensor data, labels;
  if (data_file.empty()) {
    auto shape = ParseShape(flags.input_shape);
    if (!shape.ok()) return Fail(command, shape.status());
    data = at::randn(*shape);
    labels = at::randint(classes, {(*shape)[0]}, at::TensorOptions().dtype(at::kLong));
  } else {
    auto d = ReadNpy(data_file);
    if (!d.ok()) return Fail(command, d.status());
    auto l = ReadNpy(labels_file);
    if (!l.ok()) return Fail(command, l.status());
    data = *d;
    labels = *l;
    if (labels.scalar_type() != at::kLong) {
      return Fail(command, Status::InvalidArgument("--labels " + labels_file +
                                                   " must hold int64 class indices"));
    }
  }
  if (flags.list_kernels) return ListKernels(command, flags, {data}, /*train_mode=*/true);
  auto loaded = LoadModel(flags, env->rank);
  if (!loaded.ok()) return Fail(command, loaded.status());
  TorchModel& model = *loaded->model;
  std::unique_ptr<DataParallelJob> job;
  if (env->distributed()) {
    const int64_t batch = data.dim() > 0 ? data.size(0) : 0;
    auto joined = JoinDataParallel(*env, &model, &options, &data, &labels);
    if (!joined.ok()) return Fail(command, joined.status());
    job = std::move(*joined);
    std::printf("rank %u/%u: training on rows [%lld, %lld) of the batch of %lld\n", env->rank,
                env->world_size, static_cast<long long>(job->first_row),
                static_cast<long long>(job->last_row), static_cast<long long>(batch));
  }
  auto trainer = Trainer::Create(&model, options);
  if (!trainer.ok()) return Fail(command, trainer.status());
  int code = kExitOk;
  std::string failure;
  bool warned_loss = false;  // once, at the first step whose loss is NaN or infinite
  for (int step = 0; step < flags.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    auto loss = (*trainer)->Step(data, labels);
    if (!loss.ok()) {
      failure = "step " + std::to_string(step + 1) + ": " + loss.status().message();
      std::fprintf(stderr, "%s: error: %s\n", command.c_str(), failure.c_str());
      code = ExitFor(loss.status()) == kExitUsage ? kExitUsage : kExitFailure;
      break;
    }
    const DumpSession* s = loaded->session.get();
    std::printf("step %d/%d: loss %.6f (%.3f s)%s\n", step + 1, flags.steps, *loss, Seconds(start),
                s ? (" iteration " + std::to_string(s->CurrentIteration())).c_str() : "");
    std::fflush(stdout);
    if (!std::isfinite(*loss) && !warned_loss) {
      warned_loss = true;
      const std::string where =
          s ? "graphdump watch " + s->Summary().root + " --check nan,inf" +
                  " names the first kernel that made a NaN or Inf"
            : "run again with a configuration (--config) and `graphdump watch DUMP --check "
              "nan,inf` to find the first kernel that made it (docs/analysis.md)";
      std::fprintf(stderr, "%s: warning: the loss is %s at step %d%s: %s\n", command.c_str(),
                   std::isnan(*loss) ? "NaN" : "infinite", step + 1,
                   s ? (" (iteration " + std::to_string(s->CurrentIteration()) + ")").c_str() : "",
                   where.c_str());
    }
  }
  if (code == kExitOk && !save_model.empty() && env->rank == 0) {
    // Saved into memory, then written as a user file: whole or not at all, and only as a new
    // path or over a regular file.
    std::ostringstream archive;
    Status saved = Status::Ok();
    try {
      model.module().save(archive);
    } catch (const std::exception& e) {
      saved = Status::IOError("cannot save the model to " + save_model + ": " + e.what());
    }
    if (saved.ok()) saved = WriteUserFile(save_model, {archive.view()});
    if (!saved.ok()) code = Fail(command, saved);
  }
  return FinishSession(command, loaded->session.get(), loaded->dump_off, code, failure);
}

}  // namespace graphdump::tools
