// The graphdump subcommands. Each parses its own flags (CLI11) and returns the process exit
// code: 0 success, 1 a finding (a watchpoint hit, a failed comparison), 2 usage or configuration
// error, 3 runtime failure.
#pragma once

#include <optional>
#include <string>

namespace graphdump::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFinding = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitFailure = 3;

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);  // argv[0] is "graphdump <name>"
};

int RunCheckConfig(int argc, char** argv);
int RunConvert(int argc, char** argv);
int RunDemoSynthetic(int argc, char** argv);
int RunRun(int argc, char** argv);         // torch_exec.cc: executes graphdump-torch run
int RunTrain(int argc, char** argv);       // torch_exec.cc: executes graphdump-torch train
int RunPython(int argc, char** argv);      // torch_exec.cc: executes PYTHON -m graphdump
int RunHunt(int argc, char** argv);        // torch_exec.cc: executes PYTHON graphdump/hunt_cli.py
int RunTorchRun(int argc, char** argv);    // torch_cmd_run.cc, in graphdump-torch
int RunTorchTrain(int argc, char** argv);  // torch_cmd_train.cc, in graphdump-torch
int RunReplay(int argc, char** argv);       // torch_exec.cc: executes graphdump-torch replay
int RunTorchReplay(int argc, char** argv);  // torch_replay.cc, in graphdump-torch
int RunBisect(int argc, char** argv);       // torch_exec.cc: executes graphdump-torch bisect
int RunTorchBisect(int argc, char** argv);  // torch_cmd_bisect.cc, in graphdump-torch
int RunTorchAllGather(int argc, char** argv);  // torch_cmd_allgather.cc, in graphdump-torch
// The graphdump-torch executable beside this one, or nullopt after telling stderr (as
// "graphdump NAME: ...") that this graphdump was built without LibTorch.
std::optional<std::string> TorchExecutable(const char* name);
int RunLs(int argc, char** argv);
int RunTrace(int argc, char** argv);
int RunCompare(int argc, char** argv);
int RunWatch(int argc, char** argv);
int RunReport(int argc, char** argv);

}  // namespace graphdump::tools
