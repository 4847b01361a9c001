// graphdump replay: re-executes one dumped kernel from its dumped inputs and says whether its
// error is its own, its conditioning's or inherited (docs/precision.md, "Replay"). The logic
// lives in src/torch/replay/replay.cc; this file parses flags and prints.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <string>

#include "commands.h"
#include "graphdump/torch/replay.h"

namespace graphdump::tools {
namespace {

constexpr char kReplayFooter[] =
    "Examples (DUMP and REF are dump directories, e.g. of `graphdump run` with and without\n"
    "--precision bf16):\n"
    "  graphdump replay bf16/ dot --reference fp32/          (a unique op type)\n"
    "  graphdump replay bf16/ Default/sub-op4 --reference fp32/ --json\n"
    "  graphdump replay dump/ conv2d --iteration 3 --rank 1   (own error only)\n"
    "KERNEL is a full name, an op type or a piece of a full name that names one kernel (a\n"
    "name that matches several is an error listing them). The kernel is rebuilt from the\n"
    "schema and arguments in graphs/*.pb and run with LibTorch from its dumped inputs: in its\n"
    "dtype (the replay must equal the dumped output), and in float64. Three numbers (relative\n"
    "L2 errors of its output) say where its error comes from:\n"
    "  own           its dtype against float64 on the same inputs: it computes inaccurately;\n"
    "  conditioning  float64 on REF's inputs against float64 on them rounded to its dtype: it\n"
    "                magnifies its inputs' rounding (e.g. a subtraction that cancels);\n"
    "  inherited     float64 on DUMP's inputs against float64 on REF's rounded: its inputs\n"
    "                already differ, through earlier kernels.\n"
    "Verdicts (the model compare and report share, docs/precision.md \"Verdicts\"): all three\n"
    "within 4 roundings of the dtype is accurate; own the largest is inaccurate; an output\n"
    "error 10 times its inputs' or more (inputs within 4 times their own rounding: nothing\n"
    "upstream is wrong) is ill-conditioned, and the chain of kernels and rounded parameters\n"
    "producing its inputs is listed to keep in float32; else it inherits, naming the kernel\n"
    "upstream that added the error. Every output is replayed: an integer or bool output\n"
    "that differs from REF's (topk's indices) is the one measured, as shares of elements that\n"
    "differ (docs/precision.md \"Discrete outputs\"). Random kernels (dropout in training, rand,\n"
    "bernoulli...), arguments computed at run time and backward kernels cannot be replayed.\n"
    "A dump is data, never code: replay runs only the ATen operator of the kernel's own op\n"
    "type, from its list of computations without side effects, with bounded arguments and\n"
    "memory (docs/reliability.md).\n"
    "Exit status: 0 replayed (whatever the verdict), 2 usage error (a missing or non-dump\n"
    "directory, a kernel name that matches none or several kernels, an iteration or rank the\n"
    "dump lacks, a reference without the kernel), 3 the kernel cannot be replayed (the\n"
    "message says why). See docs/precision.md.";

// A LibTorch kernel that divides by zero faults (SIGFPE) instead of raising. Replay checks the
// arguments it knows to be divisors first; whatever it does not know still ends this process
// with the replay's own exit status and the reason, not with a signal.
void OnArithmeticFault(int) {
  static const char kMessage[] =
      "graphdump replay: error: not replayable: the operator faulted (SIGFPE, an integer division "
      "by zero in LibTorch)\n";
  ssize_t ignored = write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  (void)ignored;
  _exit(kExitFailure);
}

}  // namespace

int RunTorchReplay(int argc, char** argv) {
  const std::string command = argv[0];
  CLI::App app(
      "Re-execute one dumped kernel from its dumped inputs with LibTorch and split its error "
      "into its own, its conditioning's and what it inherits from earlier kernels.",
      command);
  ReplayRequest request;
  int64_t iteration = -1, rank = -1, call = -1;
  bool json = false;
  app.add_option("DUMP", request.dump_dir, "dump under test (root, rank_{id} or net directory)")
      ->required();
  app.add_option("KERNEL", request.kernel, "full name, op type or a unique piece of a full name")
      ->required();
  app.add_option("--reference", request.reference_dir,
                 "reference dump of the same model (e.g. in float32): conditioning and inherited");
  app.add_option("--iteration", iteration, "iteration to replay (default: the first dumped)");
  app.add_option("--rank", rank, "rank to replay (default: the first)");
  app.add_option("--call", call,
                 "call to replay, for a kernel called more than once in the iteration "
                 "(from 0; default 0)");
  app.add_flag("--json", json, "print the result as one JSON object (keys: docs/precision.md)");
  app.footer(kReplayFooter);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  if (app.count("--iteration") > 0) {
    if (iteration < 0) {
      std::fprintf(stderr, "%s: error: --iteration %lld: iterations count from 0\n",
                   command.c_str(), static_cast<long long>(iteration));
      return kExitUsage;
    }
    request.iteration = iteration;
  }
  if (app.count("--call") > 0) {
    if (call < 0 || call > static_cast<int64_t>(UINT32_MAX)) {
      std::fprintf(stderr, "%s: error: --call %lld: calls count from 0\n", command.c_str(),
                   static_cast<long long>(call));
      return kExitUsage;
    }
    request.call = static_cast<uint32_t>(call);
  }
  if (app.count("--rank") > 0) {
    if (rank < 0 || rank > static_cast<int64_t>(UINT32_MAX)) {
      std::fprintf(stderr, "%s: error: --rank %lld: ranks count from 0\n", command.c_str(),
                   static_cast<long long>(rank));
      return kExitUsage;
    }
    request.rank = static_cast<uint32_t>(rank);
  }
  struct sigaction fault = {};
  fault.sa_handler = OnArithmeticFault;
  sigaction(SIGFPE, &fault, nullptr);
  auto result = ReplayKernel(request);
  if (!result.ok()) {
    std::fprintf(stderr, "%s: error: %s\n", command.c_str(), result.status().message().c_str());
    const StatusCode code = result.status().code();
    return code == StatusCode::kInvalidArgument || code == StatusCode::kNotFound ? kExitUsage
                                                                                 : kExitFailure;
  }
  const bool replayed = result->verdict != ReplayVerdict::kNotReplayable;
  if (json) {
    std::printf("%s\n", ReplayResultJson(*result).c_str());
  } else {
    std::fputs(ReplayResultText(*result).c_str(), stdout);
  }
  if (!replayed) {
    std::fprintf(stderr, "%s: %s: %s\n", command.c_str(), result->full_name.c_str(),
                 result->reason.c_str());
  }
  return replayed ? kExitOk : kExitFailure;
}

}  // namespace graphdump::tools
