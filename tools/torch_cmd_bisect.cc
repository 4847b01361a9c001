// graphdump bisect: find a small set of kernels that must run in float32 for a bf16 or fp16 run
// to match the float32 run (docs/precision.md, "Bisect"). The search is BisectPrecision
// (src/torch/bisect.cc); this file parses flags, prints each round and the result.
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

examples:
  graphdump bisect model.pt --input x.npy --precision bf16
  graphdump bisect model.pt --input x.npy --precision bf16 --tolerance 0.001
  graphdump bisect model.pt --input-shape 1x3x64x64 --precision bf16 --json
  graphdump bisect model.pt --input x.npy --precision bf16 --target Default/fc-Linear/linear-op9

exit codes: 0 a set was found (or the run already matches: nothing to keep), 1 even every
candidate kept in float32 misses the tolerance, 2 usage error, 3 a kernel failed.
)";

// `text` in single quotes, as one shell word.
std::string SingleQuoted(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// `text` as one shell word: unchanged when it needs no quoting, else in single quotes.
std::string ShellWord(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                              "0123456789_-./,:=+@%") == std::string::npos) {
    return text;
  }
  return SingleQuoted(text);
}

std::string Number(double value) {
  if (std::isinf(value)) return "inf";
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  return text;
}

// "file:line code" of the frame a user recognises as theirs, or "(no source)".
std::string SourceLine(const KernelInfo& k) {
  const SourceLocation* loc = UserFrame(k.source_trace);
  if (!loc) return "(no source)";
  std::string code = loc->code.substr(0, loc->code.find('\n'));
  code.erase(0, code.find_first_not_of(" \t"));
  return loc->file + ":" + std::to_string(loc->line) + "  " + code;
}

const char* PhaseName(BisectRound::Phase phase) {
  switch (phase) {
    case BisectRound::Phase::kNone:
      return "none";
    case BisectRound::Phase::kAll:
      return "all";
    case BisectRound::Phase::kBisect:
      return "bisect";
    case BisectRound::Phase::kPrune:
      return "prune";
  }
  return "";
}

const char* OutcomeName(BisectResult::Outcome outcome) {
  switch (outcome) {
    case BisectResult::Outcome::kFound:
      return "found";
    case BisectResult::Outcome::kAlreadyMatches:
      return "already_matches";
    case BisectResult::Outcome::kUnreachable:
      return "unreachable";
  }
  return "";
}

struct BisectFlags {
  std::string model;
  std::vector<std::string> input_files;
  std::string input_shape = "1x3x224x224";
  uint64_t seed = 0;
  std::string precision;
  double tolerance = 0.01;
  std::string target;
  bool json = false;
};

class BisectPrinter {
 public:
  BisectPrinter(const BisectFlags& flags, const TorchModel& model)
      : flags_(flags),
        kernels_(model.graph().kernels),
        states_(model.StateNames()),
        out_(flags.json ? stderr : stdout) {}

  // "3 kernels: A, B, C"; above 6, the first three and the last: "12 kernels: A, B, C, ... (8
  // more), L". Parameters and buffers count as kernels here ("kernels and parameters" when the
  // set holds any).
  std::string Set(const std::vector<size_t>& set) const {
    if (set.empty()) return "no kernel";
    const bool states = std::any_of(set.begin(), set.end(), [&](size_t id) { return IsState(id); });
    std::string text = std::to_string(set.size()) +
                       (states ? " kernels and parameters: "
                               : set.size() == 1 ? " kernel: " : " kernels: ");
    for (size_t i = 0; i < set.size(); ++i) {
      if (set.size() > 6 && i == 3) {
        text += ", ... (" + std::to_string(set.size() - 4) + " more)";
        i = set.size() - 1;
      }
      text += (i ? ", " : "") + Name(set[i]);
    }
    return text;
  }

  void Header() const {
    std::fprintf(out_,
                 "graphdump bisect: %s in %s against float32; the relative L2 error of %s, "
                 "tolerance %s\n",
                 flags_.model.c_str(), flags_.precision.c_str(),
                 flags_.target.empty() ? "the model's output"
                                       : ("the outputs of --target " + flags_.target).c_str(),
                 Number(flags_.tolerance).c_str());
    std::fflush(out_);
  }

  void Round(const BisectRound& round) const {
    std::string what;
    switch (round.phase) {
      case BisectRound::Phase::kNone:
        what = "none kept";
        break;
      case BisectRound::Phase::kAll:
        what = "all candidates kept (" + Set(round.kept) + ")";
        break;
      case BisectRound::Phase::kBisect:
        what = "keep " + Set(round.kept);
        break;
      case BisectRound::Phase::kPrune:
        what = "without " + Name(*round.removed) + ": keep " + Set(round.kept);
        break;
    }
    std::fprintf(out_, "round %2d  %-6s  error %-9s %s  %s\n", round.number, PhaseName(round.phase),
                 Number(round.error).c_str(), round.pass ? "pass" : "FAIL", what.c_str());
    std::fflush(out_);
  }

  // The `graphdump run` command line that runs the model in the precision with `keep` kept.
  std::string Command(const std::vector<size_t>& keep) const {
    std::string command = "graphdump run " + ShellWord(flags_.model);
    for (const std::string& file : flags_.input_files) command += " --input " + ShellWord(file);
    if (flags_.input_files.empty()) {
      command += " --input-shape " + ShellWord(flags_.input_shape) + " --seed " +
                 std::to_string(flags_.seed);
    }
    command += " --precision " + flags_.precision + " --keep-fp32";
    for (size_t k : keep) command += " " + SingleQuoted(Name(k));
    return command;
  }

  void Result(const BisectResult& r) const {
    switch (r.outcome) {
      case BisectResult::Outcome::kAlreadyMatches:
        std::printf(
            "result: the %s run already matches the float32 run: error %s <= %s with no kernel "
            "kept; nothing needs float32\n",
            flags_.precision.c_str(), Number(r.error_none).c_str(),
            Number(flags_.tolerance).c_str());
        return;
      case BisectResult::Outcome::kUnreachable:
        return;  // an error message (Unreachable)
      case BisectResult::Outcome::kFound:
        break;
    }
    const size_t kept_states = static_cast<size_t>(
        std::count_if(r.keep.begin(), r.keep.end(), [&](size_t id) { return IsState(id); }));
    const size_t kept_kernels = r.keep.size() - kept_states;
    std::string what = std::to_string(kept_kernels) + (kept_kernels == 1 ? " kernel" : " kernels");
    if (kept_states > 0) {
      what += " and " + std::to_string(kept_states) +
              (kept_states == 1 ? " parameter or buffer" : " parameters or buffers");
    }
    std::printf("result: %s must %s in float32: error %s <= %s (%s alone: %s; all %zu "
                "candidates kept: %s)\n",
                what.c_str(), kept_states > 0 ? "stay" : "run", Number(r.error).c_str(),
                Number(flags_.tolerance).c_str(), flags_.precision.c_str(),
                Number(r.error_none).c_str(), r.candidates.size(), Number(r.error_all).c_str());
    for (size_t k : r.keep) {
      if (IsState(k)) {
        std::printf("  %s (parameter or buffer, float32 values)\n", Name(k).c_str());
      } else {
        std::printf("  %s (%s)  %s\n", Name(k).c_str(), kernels_[k].op_type.c_str(),
                    SourceLine(kernels_[k]).c_str());
      }
    }
    std::printf("without any one of them the error exceeds %s (pruning tried each)\n",
                Number(flags_.tolerance).c_str());
    std::printf("reproduce: %s\n", Command(r.keep).c_str());
  }

  std::string Unreachable(const BisectResult& r) const {
    return "even with all " + std::to_string(r.candidates.size()) +
           " candidate kernels, parameters and buffers in float32 the error is " +
           Number(r.error_all) + ", above the tolerance " + Number(flags_.tolerance) +
           ": no set of kernels can meet it. What is left is the rounding of the inputs and the "
           "model's result to " +
           flags_.precision + " (kept kernels compute on those values); give a --tolerance above " +
           Number(r.error_all) + " (docs/precision.md)";
  }

  nlohmann::json Json(const BisectResult& r) const {
    using nlohmann::json;
    auto names = [&](const std::vector<size_t>& set) {
      json list = json::array();
      for (size_t k : set) list.push_back(Name(k));
      return list;
    };
    auto number = [](double v) { return std::isinf(v) ? json(nullptr) : json(v); };
    json keep = json::array();
    for (size_t k : r.keep) {
      if (IsState(k)) {
        keep.push_back({{"full_name", Name(k)},
                        {"op_type", "parameter"},
                        {"module_path", ""},
                        {"source_line", ""},
                        {"code", ""},
                        {"source_trace", json::array()}});
        continue;
      }
      const KernelInfo& kernel = kernels_[k];
      const SourceLocation* loc = UserFrame(kernel.source_trace);
      keep.push_back({{"full_name", kernel.full_name},
                      {"op_type", kernel.op_type},
                      {"module_path", kernel.module_path},
                      {"source_line", loc ? loc->file + ":" + std::to_string(loc->line) : ""},
                      {"code", loc ? loc->code.substr(0, loc->code.find('\n')) : ""},
                      {"source_trace", analysis::SourceTraceJson<json>(kernel.source_trace)}});
    }
    json rounds = json::array();
    for (const BisectRound& round : r.rounds) {
      rounds.push_back({{"round", round.number},
                        {"phase", PhaseName(round.phase)},
                        {"kept", names(round.kept)},
                        {"removed", round.removed ? json(Name(*round.removed)) : json(nullptr)},
                        {"error", number(round.error)},
                        {"pass", round.pass}});
    }
    const bool all_ran = r.outcome != BisectResult::Outcome::kAlreadyMatches;
    return {{"model", flags_.model},
            {"precision", flags_.precision},
            {"metric", "relative_l2"},
            {"tolerance", flags_.tolerance},
            {"target", r.target ? json(Name(*r.target)) : json(nullptr)},
            {"outcome", OutcomeName(r.outcome)},
            {"candidates", r.candidates.size()},
            {"error_none", number(r.error_none)},
            {"error_all", all_ran ? number(r.error_all) : json(nullptr)},
            {"error", number(r.error)},
            {"keep", keep},
            {"rounds", rounds},
            {"command",
             r.outcome == BisectResult::Outcome::kFound ? json(Command(r.keep)) : json(nullptr)}};
  }

 private:
  // A candidate id (BisectResult): a kernel below kernels_.size(), else a parameter or buffer.
  bool IsState(size_t id) const { return id >= kernels_.size(); }
  const std::string& Name(size_t id) const {
    return IsState(id) ? states_[id - kernels_.size()] : kernels_[id].full_name;
  }

  const BisectFlags& flags_;
  const std::vector<KernelInfo>& kernels_;
  const std::vector<std::string>& states_;
  FILE* out_;  // rounds: stderr with --json, which owns stdout
};

}  // namespace

int RunTorchBisect(int argc, char** argv) {
  const std::string command = argv[0];
  CLI::App app(
      "Find a small set of kernels that must run in float32 for a bf16 or fp16 run of a "
      "TorchScript model to match its float32 run within a tolerance (docs/precision.md).",
      command);
  BisectFlags flags;
  app.add_option("model", flags.model, "TorchScript archive written by torch.jit.save")->required();
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
  app.add_flag("--json", flags.json,
               "print the result as JSON on stdout (the rounds go to stderr)");
  app.footer(kBisectFooter);
  try {
    app.parse(argc, argv);
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
  BisectPrinter printer(flags, **model);
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
