// Helpers for graphdump's tests: temporary directories, files, and NumPy checks run with
// the project's Python (the environment users read dumps with).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graphdump/tensor_view.h"

namespace graphdump::testing {

// A fresh directory under $TMPDIR, removed (files made writable first) when destroyed in the
// process that made it (a forked child leaves it to its parent).
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
  int pid_;
};

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& content);
// Every regular file below `dir`, as paths relative to it, sorted.
std::vector<std::string> ListFilesRecursive(const std::string& dir);

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
// Runs `command` through /bin/sh and captures its output.
CommandResult RunCommand(const std::string& command);

// The Python of the project's environment: $GRAPHDUMP_PYTHON (CMake sets it for the tests that
// need it), else `python3` on PATH.
std::string Python();

// Runs a Python snippet with Python(); `args` become sys.argv[1:]. The script should print what
// the test then checks.
CommandResult RunPython(const std::string& code, const std::vector<std::string>& args = {});

// A host TensorView of `data` (strides in elements; empty means C-contiguous).
TensorView MakeView(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides,
                    const void* data, std::string device = "cpu");

// The project's source directory ($GRAPHDUMP_SOURCE_DIR).
std::string SourceDir();

}  // namespace graphdump::testing
