// What graphdump-torch's run and train share (torch_run_parts.h): the dump session they open and
// close, their common flags, loading the model with its session, and --list-kernels. The
// commands themselves are torch_cmd_run.cc and torch_cmd_train.cc.
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

// A session, or null and why dumping is off.
struct OpenedSession {
  std::unique_ptr<DumpSession> session;
  std::string off_reason;
};

// The session from --config, else from GRAPHDUMP_CONFIG / MINDSPORE_DUMP_CONFIG; null when
// dumping is off or `rank` is not in support_device. The dump goes to rank_{rank}.
// With --enable-dump, the GE / TF-adapter options given as flags (docs/ascend.md) instead.
StatusOr<OpenedSession> OpenSession(const std::string& config_file, const GeDumpOptions& ge,
                                    const std::string& model_path, uint32_t rank,
                                    bool overwrite) {
  SessionOptions options;
  options.overwrite = overwrite;
  options.retry_hint =
      "remove it, dump elsewhere (--dump-path, or the configuration's path), or replace it with "
      "--overwrite";
  options.model_name = std::filesystem::path(model_path).stem().string();
  // Between steps the CLI only writes parameters and optimizer state with ATen in-place calls,
  // which bump version counters.
  options.stats_across_steps = true;
  // The executor and trainer call BeforeWrite before every in-place write: asynchronous mode
  // writes tensors without a staging copy.
  options.host_reports_writes = true;
  options.graph_files_in_background = true;
  ParsedConfig parsed;
  if (!ge.enable_dump) {
    const GeDumpOptions defaults;
    std::string given;
    for (const auto& [flag, value, unset] :
         {std::tuple{"--dump-step", ge.dump_step, defaults.dump_step},
          std::tuple{"--dump-mode", ge.dump_mode, defaults.dump_mode},
          std::tuple{"--dump-layer", ge.dump_layer, defaults.dump_layer}}) {
      if (value != unset) given += std::string(given.empty() ? "" : ", ") + flag;
    }
    if (!given.empty()) {
      return Status::InvalidArgument(given +
                                     ": the GE dialect's flags take effect only with "
                                     "--enable-dump (and --dump-path)");
    }
    if (!ge.dump_path.empty()) {
      if (const std::string problem = DumpPathProblem(ge.dump_path); !problem.empty()) {
        return Status::InvalidArgument("--dump-path: " + problem);
      }
    }
  }
  if (ge.enable_dump) {
    if (!config_file.empty()) {
      return Status::InvalidArgument(
          "--enable-dump and --config both give a dump configuration; "
          "use one of them");
    }
    GRAPHDUMP_ASSIGN_OR_RETURN(std::unique_ptr<ParsedConfig> ge_config,
                               GeOptionsToConfig(ge, "command line"));
    parsed = std::move(*ge_config);
  } else if (config_file.empty()) {
    GRAPHDUMP_ASSIGN_OR_RETURN(std::unique_ptr<ParsedConfig> from_environment,
                               LoadConfigFromEnvironment());
    if (!from_environment) {
      if (!ge.dump_path.empty()) {
        return Status::InvalidArgument(
            "--dump-path replaces the path of a configuration, and none is given (--config, "
            "GRAPHDUMP_CONFIG or MINDSPORE_DUMP_CONFIG)");
      }
      return OpenedSession{nullptr,
                           "no --config; GRAPHDUMP_CONFIG and MINDSPORE_DUMP_CONFIG unset"};
    }
    parsed = std::move(*from_environment);
  } else {
    const char* diag = std::getenv(kDiagnosticPathEnv);
    GRAPHDUMP_ASSIGN_OR_RETURN(parsed, LoadConfigFile(config_file, diag ? diag : ""));
  }
  // Without --enable-dump, --dump-path replaces the configuration's path.
  if (!ge.enable_dump && !ge.dump_path.empty()) parsed.config.path = ge.dump_path;
  for (const std::string& w : parsed.warnings) {
    std::fprintf(stderr, "graphdump: warning: %s\n", w.c_str());
  }
  OpenedSession opened{nullptr, DumpOffReason(parsed.config, rank)};
  options.config = std::move(parsed.config);
  options.rank = rank;
  StatusOr<std::unique_ptr<DumpSession>> session = DumpSession::Open(std::move(options));
  if (!session.ok() && DumpPathNotPrepared(session.status())) {
    // The dump stops, never the training: one warning, and every step runs.
    std::fprintf(stderr, "graphdump: warning: %s\n", DumpOffWarning(session.status()).c_str());
    opened.off_reason = session.status().message();
    return opened;
  }
  if (!session.ok()) return session.status();
  opened.session = std::move(*session);
  if (opened.session) opened.off_reason.clear();
  return opened;
}

// The size in the run summary ("dump: N tensor files, SIZE, ..."), as the Python package's
// summary writes it: "12 bytes", "1.45 MiB", "2.00 GiB". (The ls tables use TableBytes.)
std::string SummaryBytes(uint64_t bytes) {
  char text[64];
  if (bytes >= (uint64_t{1} << 30)) {
    std::snprintf(text, sizeof text, "%.2f GiB", bytes / double(uint64_t{1} << 30));
  } else if (bytes >= (uint64_t{1} << 20)) {
    std::snprintf(text, sizeof text, "%.2f MiB", bytes / double(uint64_t{1} << 20));
  } else {
    std::snprintf(text, sizeof text, "%llu bytes", static_cast<unsigned long long>(bytes));
  }
  return text;
}

// "bf16" -> kBFloat16; nullopt for "" (no precision run).
std::optional<at::ScalarType> PrecisionDtype(const std::string& name) {
  if (name == "bf16") return at::kBFloat16;
  if (name == "fp16") return at::kHalf;
  if (name == "fp32") return at::kFloat;
  return std::nullopt;
}

// --precision and --keep-fp32 as options of TorchModel::SetPrecision; nullopt without
// --precision. InvalidArgument for --keep-fp32 without a lower precision to keep kernels from.
StatusOr<std::optional<PrecisionOptions>> PrecisionFromFlags(const CommonFlags& flags) {
  const auto dtype = PrecisionDtype(flags.precision);
  if (!flags.keep_fp32.empty() && (!dtype || *dtype == at::kFloat)) {
    return Status::InvalidArgument(
        "--keep-fp32 runs kernels in float32 inside a lower-precision run: give --precision "
        "bf16 or fp16 with it" +
        std::string(dtype ? " (got --precision fp32)" : ""));
  }
  if (!dtype) return std::optional<PrecisionOptions>();
  PrecisionOptions options;
  options.dtype = *dtype;
  options.keep_fp32 = flags.keep_fp32;
  return std::optional<PrecisionOptions>(std::move(options));
}

}  // namespace

// Closes the session and prints where the dump is. Returns the exit code.
// `failure`: why the run stopped early (empty when it did not), kept in INCOMPLETE.
int FinishSession(const std::string& command, DumpSession* session, const std::string& off_reason,
                  int code, const std::string& failure) {
  if (!session) {
    std::printf("dump: off (%s)\n", off_reason.c_str());
    return code;
  }
  if (!failure.empty()) session->OnRunFailed(command + ": " + failure);
  Status closed = session->Close();
  const DumpSummary s = session->Summary();
  std::printf("dump: %s\n", s.root.c_str());
  // How many tensors the statistic rows were computed from (each read once), and their bytes.
  std::string computed;
  if (s.statistic_rows > 0) {
    computed = " (" + std::to_string(s.statistics_computed) + " tensors summarised, " +
               SummaryBytes(s.statistics_bytes) + " read)";
  }
  std::printf("dump: %llu tensor files, %s, %llu kernel dumps, %llu statistic rows%s\n",
              static_cast<unsigned long long>(s.files), SummaryBytes(s.bytes).c_str(),
              static_cast<unsigned long long>(s.kernels_dumped),
              static_cast<unsigned long long>(s.statistic_rows), computed.c_str());
  // Unused kernel entries: the session itself reports them on stderr when it closes.
  if (!closed.ok()) {
    std::fprintf(stderr, "%s: dump incomplete: %s\n", command.c_str(), closed.message().c_str());
    return code == kExitOk ? kExitFailure : code;
  }
  return code;
}

void AddCommonFlags(CLI::App& app, CommonFlags* f) {
  app.add_option("model", f->model, "TorchScript archive written by torch.jit.save")->required();
  app.add_option("--config", f->config,
                 "data_dump.json (default: $GRAPHDUMP_CONFIG or $MINDSPORE_DUMP_CONFIG; "
                 "neither set: no dump)");
  app.add_flag("--enable-dump", f->ge.enable_dump,
               "GE / TF-adapter dialect (docs/ascend.md): dump in the GE layout to --dump-path");
  app.add_option("--dump-path", f->ge.dump_path,
                 "the dump root, replacing the configuration's path (absolute, [A-Za-z0-9_/-]); "
                 "with --enable-dump, the GE dialect's dump root");
  app.add_flag("--overwrite", f->overwrite,
               "replace an earlier dump in the dump path (the rank_{id} directory), in one step; "
               "without it a path that holds one is an error: one run per directory. A directory "
               "a live run is dumping into is never replaced (docs/layout.md)");
  app.add_option("--dump-step", f->ge.dump_step,
                 "GE dialect: steps, e.g. \"0|5|10\" (default all)");
  app.add_option("--dump-mode", f->ge.dump_mode, "GE dialect: input, output (default) or all");
  app.add_option("--dump-layer", f->ge.dump_layer,
                 "GE dialect: space-separated kernel names (default every kernel)");
  app.add_option("--set-dump", f->set_dump,
                 "mark a module path (e.g. features.0) for dump_mode 2; repeatable");
  app.add_option("--steps", f->steps, "number of steps")->check(CLI::Range(1, 1000000));
  app.add_option("--seed", f->seed, "seed for random inputs (default 0)");
  app.add_option("--precision", f->precision,
                 "run in this precision: cast the model's floating parameters, buffers and "
                 "inputs to bf16, fp16 or fp32; kernel names stay those of the float32 run "
                 "(docs/precision.md)")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
  app.add_option("--keep-fp32", f->keep_fp32,
                 "with --precision bf16|fp16: run these kernels in float32 (entries as in the "
                 "configuration's kernels: full name, op type, name-regex(RE)) and keep these "
                 "parameters and buffers in float32 (dotted names: pos.freqs); put them after "
                 "MODEL");
  app.add_flag("--list-kernels", f->list_kernels,
               "print every kernel's full name, module and source line (after one forward step "
               "without dumping; kernels that did not run are marked), then exit");
}

// --list-kernels: every kernel's full name, module and the source line a user recognises as
// theirs, after one forward step on `inputs` without dumping, so that kernels in a branch that
// did not run (the in-place branch of F.relu) are marked. Returns the exit code.
int ListKernels(const std::string& command, const CommonFlags& flags,
                std::vector<c10::IValue> inputs, bool train_mode) {
  auto precision = PrecisionFromFlags(flags);
  if (!precision.ok()) return Fail(command, precision.status());
  auto model = TorchModel::Load(flags.model, nullptr);
  if (!model.ok()) return Fail(command, model.status());
  if (*precision) {
    if (Status st = (*model)->SetPrecision(**precision); !st.ok()) return Fail(command, st);
  }
  torch::NoGradGuard no_grad;
  (*model)->module().train(train_mode);
  auto out = (*model)->Forward(std::move(inputs));
  if (!out.ok()) {
    std::fprintf(stderr, "%s: warning: the forward step failed, so kernels after the failure are "
                         "listed as not run: %s\n",
                 command.c_str(), out.status().message().c_str());
  }
  const auto& kernels = (*model)->graph().kernels;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const KernelInfo& k = kernels[i];
    std::string where = "(no source)";
    if (const SourceLocation* loc = UserFrame(k.source_trace)) {
      std::string code = loc->code.substr(0, loc->code.find('\n'));
      code.erase(0, code.find_first_not_of(" \t"));
      where = loc->file + ":" + std::to_string(loc->line) + " " + code;
    }
    std::printf("%s\t%s\t%s%s\n", k.full_name.c_str(),
                k.module_path.empty() ? "-" : k.module_path.c_str(), where.c_str(),
                (*model)->KernelRan(i) ? "" : "\t(not run: a branch not taken)");
  }
  return kExitOk;
}

StatusOr<Loaded> LoadModel(const CommonFlags& flags, uint32_t rank) {
  Loaded loaded;
  // Flags first: a bad one must not leave a dump directory behind (one run per directory).
  GRAPHDUMP_ASSIGN_OR_RETURN(std::optional<PrecisionOptions> precision,
                             PrecisionFromFlags(flags));
  GRAPHDUMP_ASSIGN_OR_RETURN(OpenedSession opened,
                             OpenSession(flags.config, flags.ge, flags.model, rank, flags.overwrite));
  loaded.session = std::move(opened.session);
  loaded.dump_off = std::move(opened.off_reason);
  GRAPHDUMP_ASSIGN_OR_RETURN(loaded.model, TorchModel::Load(flags.model, loaded.session.get()));
  for (const std::string& path : flags.set_dump) {
    GRAPHDUMP_RETURN_IF_ERROR(loaded.model->SetDump(path));
  }
  if (precision) GRAPHDUMP_RETURN_IF_ERROR(loaded.model->SetPrecision(*precision));
  if (!flags.set_dump.empty() && (!loaded.session || loaded.session->config().dump_mode != 2)) {
    std::fprintf(
        stderr,
        "graphdump: warning: --set-dump has no effect: %s (it selects kernels only "
        "with dump_mode 2)\n",
        loaded.session
            ? ("dump_mode is " + std::to_string(loaded.session->config().dump_mode)).c_str()
            : ("dump is off: " + loaded.dump_off).c_str());
  }
  return loaded;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace graphdump::tools
