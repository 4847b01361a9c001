// `graphdump run` and `graphdump train` execute graphdump-torch, the sibling executable that
// links LibTorch, so that every other command starts without loading it (LibTorch's libraries
// take about 0.6 s to load and register their operators, more than `ls` or `convert` of a small
// dump needs in all). `graphdump python` executes Debian's python3 on the Python package's
// runner (python -m graphdump), with the package built beside this executable on PYTHONPATH.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "commands.h"

namespace graphdump::tools {
namespace {

constexpr char kTorchExecutable[] = "graphdump-torch";

std::filesystem::path SelfDirectory(std::error_code& error) {
  return std::filesystem::read_symlink("/proc/self/exe", error).parent_path();
}

// argv[0] is "graphdump <name>"; the rest are the command's arguments.
int ExecTorchCommand(const char* name, int argc, char** argv) {
  std::error_code error;
  const std::string path = (SelfDirectory(error) / kTorchExecutable).string();
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

// The package lies in python/ of the build directory (python/CMakeLists.txt), this executable in
// tools/; GRAPHDUMP_PYTHONPATH overrides that for an installed layout.
int ExecPython(int argc, char** argv) {
  std::error_code error;
  std::string package_root = (SelfDirectory(error).parent_path() / "python").string();
  if (const char* override_root = std::getenv("GRAPHDUMP_PYTHONPATH")) package_root = override_root;
  if (error || access((package_root + "/graphdump/__main__.py").c_str(), R_OK) != 0) {
    std::fprintf(stderr,
                 "graphdump python: the Python package is missing from %s: build it with "
                 "`make build` (it needs LibTorch), or set GRAPHDUMP_PYTHONPATH to the directory "
                 "holding graphdump/ (docs/python.md)\n",
                 package_root.c_str());
    return kExitUsage;
  }
  const char* old_path = std::getenv("PYTHONPATH");
  const std::string python_path =
      package_root + (old_path && *old_path ? std::string(":") + old_path : std::string());
  setenv("PYTHONPATH", python_path.c_str(), 1);
  std::vector<char*> args = {const_cast<char*>(GRAPHDUMP_PYTHON_EXE), const_cast<char*>("-m"),
                             const_cast<char*>("graphdump")};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(GRAPHDUMP_PYTHON_EXE, args.data());
  std::fprintf(stderr, "graphdump python: cannot execute %s: %s\n", GRAPHDUMP_PYTHON_EXE,
               std::strerror(errno));
  return kExitFailure;
}

}  // namespace

int RunPython(int argc, char** argv) { return ExecPython(argc, argv); }
int RunRun(int argc, char** argv) { return ExecTorchCommand("run", argc, argv); }
int RunTrain(int argc, char** argv) { return ExecTorchCommand("train", argc, argv); }

}  // namespace graphdump::tools
