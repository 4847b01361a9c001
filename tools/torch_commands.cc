// graphdump run / graphdump train: execute a TorchScript model with graphdump's graph executor,
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

namespace graphdump::tools {

int ExitFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kCorrupt:
      return kExitUsage;
    default:
      return kExitFailure;
  }
}

int Fail(const std::string& command, const Status& status) {
  std::fprintf(stderr, "%s: error: %s\n", command.c_str(), status.message().c_str());
  return ExitFor(status);
}

// Reads exactly `n` bytes at `offset` of `fd` into `out`; false on an error or a short file.
static bool ReadAt(int fd, uint64_t offset, size_t n, void* out) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = pread(fd, p, std::min<size_t>(n, size_t{1} << 30), offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

// Reads a .npy file into a tensor: the header, then the data straight into the tensor's memory
// (one read, no staging copy). Only regular files are read, and only as many bytes as the
// header promises and the file holds. Errors name the file and what is wrong with it.
StatusOr<at::Tensor> ReadNpy(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return Status::NotFound("input file " + path + " cannot be opened: " + std::strerror(errno));
  }
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return Status::InvalidArgument("input file " + path +
                                   " is not a regular file (a .npy file written by numpy.save)");
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  // The preamble gives the header's length: 2 bytes in version 1, 4 in versions 2 and 3.
  uint8_t preamble[12] = {};
  const size_t preamble_bytes = static_cast<size_t>(std::min<uint64_t>(file_size, 12));
  if (!ReadAt(fd, 0, preamble_bytes, preamble)) {
    return Status::IOError("input file " + path + " cannot be read: " + std::strerror(errno));
  }
  uint64_t header_bytes = preamble_bytes;
  if (preamble_bytes >= 10) {
    header_bytes = preamble[6] == 1
                       ? 10 + (preamble[8] | uint64_t{preamble[9]} << 8)
                       : 12 + (preamble[8] | uint64_t{preamble[9]} << 8 |
                               uint64_t{preamble[10]} << 16 | uint64_t{preamble[11]} << 24);
  }
  std::string header(static_cast<size_t>(std::min(header_bytes, file_size)), '\0');
  if (!ReadAt(fd, 0, header.size(), header.data())) {
    return Status::IOError("input file " + path + " cannot be read: " + std::strerror(errno));
  }
  GRAPHDUMP_ASSIGN_OR_RETURN(
      NpyInfo info,
      ParseNpyHeader(reinterpret_cast<const uint8_t*>(header.data()), header.size(), path));
  if (info.fortran_order) {
    return Status::InvalidArgument("input file " + path +
                                   " is in Fortran order; save it with numpy in C order");
  }
  auto type = ToScalarType(info.dtype);
  if (!type || info.descr != NpyDescr(info.dtype)) {
    return Status::InvalidArgument("input file " + path + " has dtype '" + info.descr +
                                   "', which graphdump cannot feed to a model");
  }
  if (info.data_offset + info.data_bytes > file_size) {
    return Status::Corrupt(
        "input file " + path + " is truncated: the header announces " +
        std::to_string(info.data_bytes) + " data bytes, the file has " +
        std::to_string(file_size - std::min<uint64_t>(file_size, info.data_offset)));
  }
  at::Tensor t = at::empty(info.shape, at::TensorOptions().dtype(*type));
  if (!ReadAt(fd, info.data_offset, info.data_bytes, t.data_ptr())) {
    return Status::IOError("input file " + path + " cannot be read: " + std::strerror(errno));
  }
  return t;
}

// Writes a tensor as .npy (C order). NumPy has no bfloat16: a bfloat16 tensor is written as
// float32, each value widened exactly, as the dump writes it (docs/file-format.md).
Status WriteNpyFile(const std::string& path, const at::Tensor& tensor) {
  at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
  if (t.scalar_type() == at::kBFloat16) t = t.to(at::kFloat);
  std::optional<DType> dtype;
  for (DType d : kAllDTypes) {
    if (ToScalarType(d) == t.scalar_type()) dtype = d;
  }
  if (!dtype)
    return Status::Unsupported("cannot write a tensor of dtype " +
                               std::string(c10::toString(t.scalar_type())));
  const std::string header = NpyHeader(*dtype, t.sizes().vec());
  return WriteUserFile(path, {header, {static_cast<const char*>(t.data_ptr()), t.nbytes()}});
}

// "2x3x224x224" -> {2, 3, 224, 224}.
StatusOr<std::vector<int64_t>> ParseShape(const std::string& text) {
  if (text.empty()) return Status::InvalidArgument("--input-shape is empty");
  std::vector<int64_t> shape;
  size_t start = 0;
  for (;;) {  // every part between the 'x's, the empty one after a trailing 'x' included
    const size_t end = std::min(text.find('x', start), text.size());
    const std::string part = text.substr(start, end - start);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos ||
        part.size() > 9 || std::stoll(part) == 0) {
      return Status::InvalidArgument(
          "--input-shape '" + text + "': " +
          (part.empty() ? std::string("an empty size") : "'" + part + "' is not a size") +
          "; it must be positive sizes separated by 'x', e.g. 2x3x224x224");
    }
    shape.push_back(std::stoll(part));
    if (end == text.size()) break;
    start = end + 1;
  }
  return shape;
}

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
  std::printf("dump: %llu tensor files, %s, %llu kernel dumps, %llu statistic rows\n",
              static_cast<unsigned long long>(s.files), SummaryBytes(s.bytes).c_str(),
              static_cast<unsigned long long>(s.kernels_dumped),
              static_cast<unsigned long long>(s.statistic_rows));
  // Unused kernel entries: the session itself reports them on stderr when it closes.
  if (!closed.ok()) {
    std::fprintf(stderr, "%s: dump incomplete: %s\n", command.c_str(), closed.message().c_str());
    return code == kExitOk ? kExitFailure : code;
  }
  return code;
}

struct CommonFlags {
  std::string model;
  std::string config;
  std::vector<std::string> set_dump;
  GeDumpOptions ge;  // the GE / TF-adapter dialect as flags
  std::string input_shape;
  int steps = 1;
  uint64_t seed = 0;
  bool list_kernels = false;
  bool overwrite = false;
  std::string precision;               // "", "bf16", "fp16" or "fp32"
  std::vector<std::string> keep_fp32;  // kernel entries run in float32
};

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

// Loads the model with a session and the --set-dump marks. Returns an exit code on failure.
struct Loaded {
  std::unique_ptr<DumpSession> session;
  std::string dump_off;  // with no session: why
  std::unique_ptr<TorchModel> model;
};
StatusOr<Loaded> LoadModel(const CommonFlags& flags, uint32_t rank = 0) {
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

--precision bf16|fp16|fp32 casts the model's floating parameters, buffers and inputs; kernel
names stay those of the float32 run, so `graphdump compare` pairs the two dumps by name.
--keep-fp32 runs the kernels it selects in float32 (inputs cast up; kept kernels pass float32 to
each other; other kernels and the model's result get the run's dtype) and keeps the parameters
and buffers it names (pos.freqs) with their float32 values: docs/precision.md.
)";

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
