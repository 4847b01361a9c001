// `graphdump run` and `graphdump train` execute graphdump-torch, the sibling executable that
// links LibTorch, so that every other command starts without loading it (LibTorch's libraries
// take about 0.6 s to load and register their operators, more than `ls` or `convert` of a small
// dump needs in all). `graphdump python` executes Debian's python3 on the Python package's
// runner (python -m graphdump), with the package built beside this executable on PYTHONPATH;
// `graphdump hunt` executes it on the package's hunt_cli.py.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "commands.h"
#include "graphdump/launcher.h"

namespace graphdump::tools {
namespace {

constexpr char kTorchExecutable[] = "graphdump-torch";

std::filesystem::path SelfDirectory(std::error_code& error) {
  return std::filesystem::read_symlink("/proc/self/exe", error).parent_path();
}

}  // namespace

std::optional<std::string> TorchExecutable(const char* name) {
  std::error_code error;
  const std::string path = (SelfDirectory(error) / kTorchExecutable).string();
  if (error || access(path.c_str(), X_OK) != 0) {
    std::fprintf(stderr,
                 "graphdump %s: %s is missing: this graphdump was built without LibTorch; "
                 "rebuild with -DGRAPHDUMP_WITH_TORCH=ON (the default) to run models\n",
                 name, error ? kTorchExecutable : path.c_str());
    return std::nullopt;
  }
  return path;
}

namespace {

// argv[0] is "graphdump <name>"; the rest are the command's arguments.
int ExecTorchCommand(const char* name, int argc, char** argv) {
  const std::optional<std::string> found = TorchExecutable(name);
  if (!found) return kExitUsage;
  const std::string& path = *found;
  std::vector<char*> args = {const_cast<char*>(path.c_str()), const_cast<char*>(name)};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(path.c_str(), args.data());
  std::fprintf(stderr, "graphdump %s: cannot execute %s: %s\n", name, path.c_str(),
               std::strerror(errno));
  return kExitFailure;
}

// `--nproc N` among the options before the script: N, 0 when absent, -1 when malformed.
int NprocOption(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string value;
    if (arg == "--nproc" && i + 1 < argc) {
      value = argv[i + 1];
    } else if (arg.rfind("--nproc=", 0) == 0) {
      value = arg.substr(8);
    } else if (arg == "--nproc") {
      return -1;
    } else if (arg == "--config") {
      ++i;  // its value
      continue;
    } else if (arg == "-m" || arg.empty() || arg[0] != '-') {
      return 0;  // the script (or module) and its own arguments follow
    } else {
      continue;
    }
    if (value.empty() || value.size() > 4 || value.find_first_not_of("0123456789") != value.npos) {
      return -1;
    }
    const int n = std::stoi(value);
    return n >= 1 && n <= 1024 ? n : -1;
  }
  return 0;
}

// Where the package lies: GRAPHDUMP_PYTHONPATH when set; else beside this executable, in the
// build directory (tools/graphdump, python/graphdump) or as installed (bin/graphdump,
// lib/python3.N/dist-packages/graphdump; `make install`).
std::string PackageRoot(std::error_code& error) {
  if (const char* override_root = std::getenv("GRAPHDUMP_PYTHONPATH")) return override_root;
  const std::filesystem::path above = SelfDirectory(error).parent_path();
  const std::filesystem::path built = above / "python";
  if (access((built / "graphdump" / "__main__.py").c_str(), R_OK) == 0) return built.string();
  return (above / GRAPHDUMP_INSTALL_PYTHONDIR).string();
}

// Executes python3 -m MODULE ARGS (argv[1:]), or python3 PACKAGE/FILE ARGS for a `target`
// ending in .py (a file of the package run as a script: the package, and so torch, is not
// imported), with the package on PYTHONPATH and GRAPHDUMP_BIN naming this executable (graphdump
// hunt runs its passes through it).
int ExecPackage(const char* command, const std::string& target, int argc, char** argv) {
  std::error_code error;
  const std::string package_root = PackageRoot(error);
  if (error || access((package_root + "/graphdump/__main__.py").c_str(), R_OK) != 0) {
    std::fprintf(stderr,
                 "graphdump %s: the Python package is missing from %s: build it with "
                 "`make build` (it needs LibTorch), or set GRAPHDUMP_PYTHONPATH to the directory "
                 "holding graphdump/ (docs/python.md)\n",
                 command, package_root.c_str());
    return kExitUsage;
  }
  const char* old_path = std::getenv("PYTHONPATH");
  const std::string python_path =
      package_root + (old_path && *old_path ? std::string(":") + old_path : std::string());
  setenv("PYTHONPATH", python_path.c_str(), 1);
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) setenv("GRAPHDUMP_BIN", self.c_str(), 1);
  const bool file = target.size() > 3 && target.compare(target.size() - 3, 3, ".py") == 0;
  const std::string file_path = package_root + "/graphdump/" + target;
  std::vector<char*> args = {const_cast<char*>(GRAPHDUMP_PYTHON_EXE)};
  if (file) {
    args.push_back(const_cast<char*>(file_path.c_str()));
  } else {
    args.push_back(const_cast<char*>("-m"));
    args.push_back(const_cast<char*>(target.c_str()));
  }
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(GRAPHDUMP_PYTHON_EXE, args.data());
  std::fprintf(stderr, "graphdump %s: cannot execute %s: %s\n", command, GRAPHDUMP_PYTHON_EXE,
               std::strerror(errno));
  return kExitFailure;
}

int ExecPython(int argc, char** argv) {
  if (const int nproc = NprocOption(argc, argv); nproc != 0) {
    if (nproc < 0) {
      std::fprintf(stderr,
                   "graphdump python: error: --nproc takes a number of ranks from 1 to 1024, "
                   "before the script (graphdump python --nproc 2 train.py)\n");
      return kExitUsage;
    }
    // Each rank runs this command again without --nproc, with torchrun's variables set.
    std::vector<std::string> args(argv + 1, argv + argc);
    std::vector<std::string> rank_argv = {"/proc/self/exe", "python"};
    for (std::string& a : ArgsWithoutOption(args, "--nproc")) rank_argv.push_back(std::move(a));
    std::fprintf(stderr, "graphdump python: starting %d ranks on this machine\n", nproc);
    return LaunchRanks(nproc, rank_argv);
  }
  return ExecPackage("python", "graphdump", argc, argv);
}

}  // namespace

int RunPython(int argc, char** argv) { return ExecPython(argc, argv); }
int RunHunt(int argc, char** argv) {
  return ExecPackage("hunt", "hunt_cli.py", argc, argv);
}
int RunRun(int argc, char** argv) { return ExecTorchCommand("run", argc, argv); }
int RunTrain(int argc, char** argv) { return ExecTorchCommand("train", argc, argv); }
int RunReplay(int argc, char** argv) { return ExecTorchCommand("replay", argc, argv); }
int RunBisect(int argc, char** argv) { return ExecTorchCommand("bisect", argc, argv); }

}  // namespace graphdump::tools
