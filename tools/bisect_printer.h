// `graphdump bisect`'s output: each round as it runs, the result, its JSON and the command that
// reproduces it, for a TorchScript model (torch_cmd_bisect.cc) and for a script
// (torch_cmd_bisect_script.cc).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graphdump/analysis/source_json.h"
#include "graphdump/graph.h"
#include "graphdump/torch/bisect.h"

namespace graphdump::tools {

// `text` in single quotes, as one shell word.
inline std::string SingleQuoted(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// `text` as one shell word: unchanged when it needs no quoting, else in single quotes.
inline std::string ShellWord(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                              "0123456789_-./,:=+@%") == std::string::npos) {
    return text;
  }
  return SingleQuoted(text);
}

inline std::string Number(double value) {
  if (std::isinf(value)) return "inf";
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  return text;
}

// "file:line code" of the frame a user recognises as theirs, or "(no source)".
inline std::string SourceLine(const KernelInfo& k) {
  const SourceLocation* loc = UserFrame(k.source_trace);
  if (!loc) return "(no source)";
  std::string code = loc->code.substr(0, loc->code.find('\n'));
  code.erase(0, code.find_first_not_of(" \t"));
  return loc->file + ":" + std::to_string(loc->line) + "  " + code;
}

inline const char* PhaseName(BisectRound::Phase phase) {
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

inline const char* OutcomeName(BisectResult::Outcome outcome) {
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
  std::string model;  // the .pt file, or the script (script mode)
  // Script mode (bisect -- SCRIPT ARGS): the script and its arguments; --steps.
  std::vector<std::string> script;
  int steps = 0;  // 0: the whole script
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
  BisectPrinter(const BisectFlags& flags, const std::vector<KernelInfo>& kernels,
                const std::vector<std::string>& states)
      : flags_(flags), kernels_(kernels), states_(states), out_(flags.json ? stderr : stdout) {}

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
                 !flags_.script.empty() ? "the script's output (its first module's last call)"
                 : flags_.target.empty() ? "the model's output"
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
    if (!flags_.script.empty()) {
      std::string command = "graphdump python --precision " + flags_.precision;
      if (flags_.steps > 0) command += " --steps " + std::to_string(flags_.steps);
      command += " --keep-fp32";
      for (size_t k : keep) command += " " + SingleQuoted(Name(k));
      command += " --";
      for (const std::string& arg : flags_.script) command += " " + ShellWord(arg);
      return command;
    }
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

// `graphdump bisect [OPTIONS] -- SCRIPT ARGS` (torch_cmd_bisect_script.cc): `flags` parsed and
// checked, `options` the precision and tolerance. Returns the exit code.
int RunScriptBisect(const std::string& command, const BisectFlags& flags,
                    const BisectOptions& options);

}  // namespace graphdump::tools
