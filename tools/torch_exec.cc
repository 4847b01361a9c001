// `graphdump run` and `graphdump train` execute graphdump-torch, the sibling executable that
// links LibTorch, so that every other command starts without loading it (LibTorch's libraries
// take about 0.6 s to load and register their operators, more than `ls` or `convert` of a small
// dump needs in all).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "commands.h"

namespace graphdump::tools {
namespace {

constexpr char kTorchExecutable[] = "graphdump-torch";

// argv[0] is "graphdump <name>"; the rest are the command's arguments.
int ExecTorchCommand(const char* name, int argc, char** argv) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  const std::string path = (self.parent_path() / kTorchExecutable).string();
  if (error || access(path.c_str(), X_OK) != 0) {
    std::fprintf(stderr,
                 "graphdump %s: %s is missing: this graphdump was built without LibTorch; "
                 "rebuild with -DGRAPHDUMP_WITH_TORCH=ON (the default) to run models\n",
                 name, error ? kTorchExecutable : path.c_str());
    return kExitUsage;
  }
  std::vector<char*> args = {const_cast<char*>(path.c_str()), const_cast<char*>(name)};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(path.c_str(), args.data());
  std::fprintf(stderr, "graphdump %s: cannot execute %s: %s\n", name, path.c_str(),
               std::strerror(errno));
  return kExitFailure;
}

}  // namespace

int RunRun(int argc, char** argv) { return ExecTorchCommand("run", argc, argv); }
int RunTrain(int argc, char** argv) { return ExecTorchCommand("train", argc, argv); }

}  // namespace graphdump::tools
