// `graphdump run` and `graphdump train` execute graphdump-torch, the sibling executable that
// links LibTorch, so that every other command starts without loading it (LibTorch's libraries
// take about 0.6 s to load and register their operators, more than `ls` or `convert` of a small
// dump needs in all). `graphdump python` executes the Python of the environment graphdump is
// installed into (or `--python PATH`) on the Python package's runner (python -m graphdump), with
// the package found beside this executable on PYTHONPATH; `graphdump hunt` executes it on the
// package's hunt_cli.py. `graphdump run MODEL.pt2` (an exported program) executes it on the
// package's exported-program runner (python -m graphdump._exported).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
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

// The options of `graphdump python` and `graphdump hunt` that take one value. A scan of the
// options steps over each one's value, so that a value (--precision bf16) is not taken for the
// script, after which every argument is the script's own.
bool TakesValue(std::string_view arg) {
  for (std::string_view option : {"--config", "--nproc", "--python", "--precision", "--steps",
                                  "--checks", "--dump-path"}) {
    if (arg == option) return true;
  }
  return false;
}

// Where --keep-fp32's entries end, as python/graphdump/__main__.py reads them: at an option,
// or at the script (an existing .py file).
bool EndsEntries(std::string_view arg) {
  if (!arg.empty() && arg[0] == '-') return true;
  std::error_code error;
  return arg.size() > 3 && arg.substr(arg.size() - 3) == ".py" &&
         std::filesystem::is_regular_file(std::filesystem::path(arg), error);
}

// An option among those before the script (argv[1..argc)): where it is and what it says.
struct Option {
  int index = 0;  // of the option in argv; 0 when absent
  int span = 0;   // the arguments it takes up: 1 ("--flag=VALUE", or no value left), or 2
  std::optional<std::string> value;  // nullopt when the command line ends at the option
};

// The first `flag` (written "--flag VALUE" or "--flag=VALUE") among the options before the
// script, the module (-m) or `--`. Arguments after those are the script's: a script's own
// --nproc or --python is not found.
Option FindOption(int argc, char** argv, std::string_view flag) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--" || arg == "-m" || arg.empty() || arg[0] != '-') break;
    if (arg == flag) {
      if (i + 1 < argc) return {i, 2, std::string(argv[i + 1])};
      return {i, 1, std::nullopt};
    }
    if (arg.size() > flag.size() && arg.substr(0, flag.size()) == flag &&
        arg[flag.size()] == '=') {
      return {i, 1, std::string(arg.substr(flag.size() + 1))};
    }
    if (arg == "--keep-fp32") {
      while (i + 1 < argc && !EndsEntries(argv[i + 1])) ++i;
    } else if (TakesValue(arg)) {
      ++i;  // its value
    }
  }
  return {};
}

// argv[1..argc) without `option`: what is passed on, so that the option is read once.
std::vector<std::string> ArgsWithout(int argc, char** argv, const Option& option) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    if (option.span > 0 && i >= option.index && i < option.index + option.span) continue;
    args.emplace_back(argv[i]);
  }
  return args;
}

// `--nproc N` among the options before the script: N, 0 when absent, -1 when malformed.
int NprocOption(const Option& option) {
  if (option.span == 0) return 0;
  if (!option.value) return -1;
  const std::string& value = *option.value;
  if (value.empty() || value.size() > 4 || value.find_first_not_of("0123456789") != value.npos) {
    return -1;
  }
  const int n = std::stoi(value);
  return n >= 1 && n <= 1024 ? n : -1;
}

bool IsExecutableFile(const std::filesystem::path& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error) && access(path.c_str(), X_OK) == 0;
}

// The Python that runs the script: `--python PATH` when given; else the python3 (or python)
// beside this executable, which is the environment's own when graphdump is installed into a
// virtual or conda environment (pip install, or make install with that prefix), so that the
// script sees the torch and packages it was written for; else the Python this graphdump was
// built with (the build's environment: .venv for `make build`). The path beside this
// executable is kept as it is, not resolved: a virtual environment's python is a symlink to the
// base interpreter and finds its environment (pyvenv.cfg) only when run by its own path.
// nullopt after telling stderr when --python names no executable file.
std::optional<std::string> ChoosePython(const char* command, const Option& option) {
  if (option.span > 0) {
    if (option.value && IsExecutableFile(*option.value)) return *option.value;
    const std::string problem = option.value ? "'" + *option.value + "' is not an executable file"
                                             : std::string("needs the path of a Python");
    std::fprintf(stderr,
                 "graphdump %s: error: --python %s (it goes before the script: graphdump %s "
                 "--python /path/to/env/bin/python train.py)\n",
                 command, problem.c_str(), command);
    return std::nullopt;
  }
  std::error_code error;
  const std::filesystem::path self_directory = SelfDirectory(error);
  if (!error) {
    for (const char* name : {"python3", "python"}) {
      if (IsExecutableFile(self_directory / name)) return (self_directory / name).string();
    }
  }
  return std::string(GRAPHDUMP_PYTHON_EXE);
}

// Where the package lies: GRAPHDUMP_PYTHONPATH when set; else beside this executable, in the
// build directory (tools/graphdump, python/graphdump) or as installed (bin/graphdump,
// lib/python3.N/site-packages/graphdump: pip install, make install).
std::string PackageRoot(std::error_code& error) {
  if (const char* override_root = std::getenv("GRAPHDUMP_PYTHONPATH")) return override_root;
  const std::filesystem::path above = SelfDirectory(error).parent_path();
  const std::filesystem::path built = above / "python";
  if (access((built / "graphdump" / "__main__.py").c_str(), R_OK) == 0) return built.string();
  return (above / GRAPHDUMP_INSTALL_PYTHONDIR).string();
}

// Executes PYTHON -m MODULE ARGS, or PYTHON PACKAGE/FILE ARGS for a `target` ending in .py (a
// file of the package run as a script: the package, and so torch, is not imported), with the
// package on PYTHONPATH and GRAPHDUMP_BIN naming this executable (graphdump hunt runs its
// passes through it). `args` are the command's arguments without --python.
int ExecPackage(const char* command, const std::string& python, const std::string& target,
                const std::vector<std::string>& args) {
  std::error_code error;
  const std::string package_root = PackageRoot(error);
  if (error || access((package_root + "/graphdump/__main__.py").c_str(), R_OK) != 0) {
    std::fprintf(stderr,
                 "graphdump %s: the Python package is missing from %s: build it with "
                 "`make build` (it needs torch), or set GRAPHDUMP_PYTHONPATH to the directory "
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
  std::vector<char*> exec_args = {const_cast<char*>(python.c_str())};
  if (file) {
    exec_args.push_back(const_cast<char*>(file_path.c_str()));
  } else {
    exec_args.push_back(const_cast<char*>("-m"));
    exec_args.push_back(const_cast<char*>(target.c_str()));
  }
  for (const std::string& arg : args) exec_args.push_back(const_cast<char*>(arg.c_str()));
  exec_args.push_back(nullptr);
  execv(python.c_str(), exec_args.data());
  std::fprintf(stderr, "graphdump %s: cannot execute %s: %s\n", command, python.c_str(),
               std::strerror(errno));
  return kExitFailure;
}

int ExecPython(int argc, char** argv) {
  const Option nproc_option = FindOption(argc, argv, "--nproc");
  const int nproc = NprocOption(nproc_option);
  if (nproc < 0) {
    std::fprintf(stderr,
                 "graphdump python: error: --nproc takes a number of ranks from 1 to 1024, "
                 "before the script (graphdump python --nproc 2 train.py)\n");
    return kExitUsage;
  }
  const Option python_option = FindOption(argc, argv, "--python");
  // Checked here, before any rank starts, so that a wrong --python is one error, not N.
  const std::optional<std::string> python = ChoosePython("python", python_option);
  if (!python) return kExitUsage;
  if (nproc > 0) {
    // Each rank runs this command again without --nproc (with --python, if given), with
    // torchrun's variables set.
    std::vector<std::string> rank_argv = {"/proc/self/exe", "python"};
    for (std::string& a : ArgsWithout(argc, argv, nproc_option)) rank_argv.push_back(std::move(a));
    std::fprintf(stderr, "graphdump python: starting %d ranks on this machine\n", nproc);
    return LaunchRanks(nproc, rank_argv);
  }
  return ExecPackage("python", *python, "graphdump", ArgsWithout(argc, argv, python_option));
}

// Is `graphdump run`'s model an exported program: a MODEL argument (not an option's value)
// whose name ends in .pt2? Those run on the Python package (python -m graphdump._exported),
// which loads them with torch.export.load.
bool RunsExportedProgram(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--keep-fp32") {
      while (i + 1 < argc && !EndsEntries(argv[i + 1])) ++i;
      continue;
    }
    if (!arg.empty() && arg[0] == '-') {
      for (std::string_view option :
           {"--input", "--input-shape", "--save-output", "--config", "--dump-path", "--steps",
            "--seed", "--precision", "--set-dump", "--dump-step", "--dump-mode", "--dump-layer"}) {
        if (arg == option) ++i;  // its value
      }
      continue;
    }
    if (arg.size() > 4 && arg.substr(arg.size() - 4) == ".pt2") return true;
  }
  return false;
}

int ExecRun(int argc, char** argv) {
  if (!RunsExportedProgram(argc, argv)) return ExecTorchCommand("run", argc, argv);
  const std::optional<std::string> python = ChoosePython("run", Option{});
  if (!python) return kExitUsage;
  return ExecPackage("run", *python, "graphdump._exported", ArgsWithout(argc, argv, Option{}));
}

int ExecHunt(int argc, char** argv) {
  const Option python_option = FindOption(argc, argv, "--python");
  const std::optional<std::string> python = ChoosePython("hunt", python_option);
  if (!python) return kExitUsage;
  // The hunt's passes run `graphdump python --python` with the Python that runs the hunt
  // (python/graphdump/hunt.py), so --python is not passed on.
  return ExecPackage("hunt", *python, "hunt_cli.py", ArgsWithout(argc, argv, python_option));
}

}  // namespace

int RunPython(int argc, char** argv) { return ExecPython(argc, argv); }
int RunHunt(int argc, char** argv) { return ExecHunt(argc, argv); }
int RunRun(int argc, char** argv) { return ExecRun(argc, argv); }
int RunTrain(int argc, char** argv) { return ExecTorchCommand("train", argc, argv); }
int RunReplay(int argc, char** argv) { return ExecTorchCommand("replay", argc, argv); }
int RunBisect(int argc, char** argv) { return ExecTorchCommand("bisect", argc, argv); }

}  // namespace graphdump::tools
