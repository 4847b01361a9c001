// The parts graphdump-torch's run and train share (torch_commands.cc defines them): flags,
// the dump session, model loading and --list-kernels.
#pragma once

#include <torch/script.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graphdump/ge_dialect.h"
#include "graphdump/session.h"
#include "graphdump/status.h"
#include "graphdump/torch/torch_model.h"

namespace graphdump::tools {

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

// Adds the flags run and train share to `app`, stored into `f`.
void AddCommonFlags(CLI::App& app, CommonFlags* f);

// --list-kernels: every kernel's full name, module and the source line a user recognises as
// theirs, after one forward step on `inputs` without dumping, so that kernels in a branch that
// did not run (the in-place branch of F.relu) are marked. Returns the exit code.
int ListKernels(const std::string& command, const CommonFlags& flags,
                std::vector<c10::IValue> inputs, bool train_mode);

// Loads the model with a session and the --set-dump marks. Returns an exit code on failure.
struct Loaded {
  std::unique_ptr<DumpSession> session;
  std::string dump_off;  // with no session: why
  std::unique_ptr<TorchModel> model;
};
StatusOr<Loaded> LoadModel(const CommonFlags& flags, uint32_t rank = 0);

// Closes the session and prints where the dump is. Returns the exit code.
// `failure`: why the run stopped early (empty when it did not), kept in INCOMPLETE.
int FinishSession(const std::string& command, DumpSession* session, const std::string& off_reason,
                  int code, const std::string& failure);

// Seconds since `since`.
double Seconds(std::chrono::steady_clock::time_point since);

}  // namespace graphdump::tools
