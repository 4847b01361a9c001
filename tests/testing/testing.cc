#include "testing/testing.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace graphdump::testing {
namespace fs = std::filesystem;

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/graphdump_test_XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
  pid_ = ::getpid();
}

TempDir::~TempDir() {
  if (::getpid() != pid_) return;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    ::chmod(it->path().c_str(), it->is_directory() ? 0700 : 0600);
  }
  fs::remove_all(path_, ec);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

std::vector<std::string> ListFilesRecursive(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_regular_file()) files.push_back(fs::relative(it->path(), dir).string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

TensorView MakeView(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides,
                    const void* data, std::string device) {
  TensorView view;
  view.dtype = dtype;
  view.shape = std::move(shape);
  view.strides = std::move(strides);
  view.data = data;
  view.device = std::move(device);
  return view;
}

std::string SourceDir() {
  const char* dir = std::getenv("GRAPHDUMP_SOURCE_DIR");
  return dir ? dir : ".";
}

std::string Python() {
  const char* python = std::getenv("GRAPHDUMP_PYTHON");
  return python && *python ? python : "python3";
}

CommandResult RunPython(const std::string& code, const std::vector<std::string>& args) {
  TempDir dir;
  std::string script = dir.Sub("check.py");
  WriteFile(script, code);
  std::string command = Python() + " " + script;
  for (const std::string& a : args) command += " '" + a + "'";
  return RunCommand(command);
}

}  // namespace graphdump::testing
