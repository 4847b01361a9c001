// Defines torch_cli.h: errors as exit codes, and the .npy inputs and outputs and input shapes of
// graphdump-torch's commands.
#include <fcntl.h>
#include <sys/stat.h>
#include <torch/script.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "commands.h"
#include "graphdump/config.h"
#include "graphdump/file_system.h"
#include "graphdump/ge_dialect.h"
#include "graphdump/launcher.h"
#include "graphdump/npy.h"
#include "graphdump/rank_environment.h"
#include "graphdump/selector.h"
#include "graphdump/session.h"
#include "graphdump/torch/distributed.h"
#include "graphdump/torch/scalar_type.h"
#include "graphdump/torch/torch_model.h"
#include "graphdump/torch/trainer.h"
#include "torch_cli.h"

namespace graphdump::tools {

int ExitFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kCorrupt:
      return kExitUsage;
    default:
      return kExitFailure;
  }
}

int Fail(const std::string& command, const Status& status) {
  std::fprintf(stderr, "%s: error: %s\n", command.c_str(), status.message().c_str());
  return ExitFor(status);
}

// Reads exactly `n` bytes at `offset` of `fd` into `out`; false on an error or a short file.
static bool ReadAt(int fd, uint64_t offset, size_t n, void* out) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = pread(fd, p, std::min<size_t>(n, size_t{1} << 30), offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

// Reads a .npy file into a tensor: the header, then the data straight into the tensor's memory
// (one read, no staging copy). Only regular files are read, and only as many bytes as the
// header promises and the file holds. Errors name the file and what is wrong with it.
StatusOr<at::Tensor> ReadNpy(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return Status::NotFound("input file " + path + " cannot be opened: " + std::strerror(errno));
  }
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return Status::InvalidArgument("input file " + path +
                                   " is not a regular file (a .npy file written by numpy.save)");
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  // The preamble gives the header's length: 2 bytes in version 1, 4 in versions 2 and 3.
  uint8_t preamble[12] = {};
  const size_t preamble_bytes = static_cast<size_t>(std::min<uint64_t>(file_size, 12));
  if (!ReadAt(fd, 0, preamble_bytes, preamble)) {
    return Status::IOError("input file " + path + " cannot be read: " + std::strerror(errno));
  }
  uint64_t header_bytes = preamble_bytes;
  if (preamble_bytes >= 10) {
    header_bytes = preamble[6] == 1
                       ? 10 + (preamble[8] | uint64_t{preamble[9]} << 8)
                       : 12 + (preamble[8] | uint64_t{preamble[9]} << 8 |
                               uint64_t{preamble[10]} << 16 | uint64_t{preamble[11]} << 24);
  }
  std::string header(static_cast<size_t>(std::min(header_bytes, file_size)), '\0');
  if (!ReadAt(fd, 0, header.size(), header.data())) {
    return Status::IOError("input file " + path + " cannot be read: " + std::strerror(errno));
  }
  GRAPHDUMP_ASSIGN_OR_RETURN(
      NpyInfo info,
      ParseNpyHeader(reinterpret_cast<const uint8_t*>(header.data()), header.size(), path));
  if (info.fortran_order) {
    return Status::InvalidArgument("input file " + path +
                                   " is in Fortran order; save it with numpy in C order");
  }
  auto type = ToScalarType(info.dtype);
  if (!type || info.descr != NpyDescr(info.dtype)) {
    return Status::InvalidArgument("input file " + path + " has dtype '" + info.descr +
                                   "', which graphdump cannot feed to a model");
  }
  if (info.data_offset + info.data_bytes > file_size) {
    return Status::Corrupt(
        "input file " + path + " is truncated: the header announces " +
        std::to_string(info.data_bytes) + " data bytes, the file has " +
        std::to_string(file_size - std::min<uint64_t>(file_size, info.data_offset)));
  }
  at::Tensor t = at::empty(info.shape, at::TensorOptions().dtype(*type));
  if (!ReadAt(fd, info.data_offset, info.data_bytes, t.data_ptr())) {
    return Status::IOError("input file " + path + " cannot be read: " + std::strerror(errno));
  }
  return t;
}

// Writes a tensor as .npy (C order). NumPy has no bfloat16: a bfloat16 tensor is written as
// float32, each value widened exactly, as the dump writes it (docs/file-format.md).
Status WriteNpyFile(const std::string& path, const at::Tensor& tensor) {
  at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
  if (t.scalar_type() == at::kBFloat16) t = t.to(at::kFloat);
  std::optional<DType> dtype;
  for (DType d : kAllDTypes) {
    if (ToScalarType(d) == t.scalar_type()) dtype = d;
  }
  if (!dtype)
    return Status::Unsupported("cannot write a tensor of dtype " +
                               std::string(c10::toString(t.scalar_type())));
  const std::string header = NpyHeader(*dtype, t.sizes().vec());
  return WriteUserFile(path, {header, {static_cast<const char*>(t.data_ptr()), t.nbytes()}});
}

// "2x3x224x224" -> {2, 3, 224, 224}.
StatusOr<std::vector<int64_t>> ParseShape(const std::string& text) {
  if (text.empty()) return Status::InvalidArgument("--input-shape is empty");
  std::vector<int64_t> shape;
  size_t start = 0;
  for (;;) {  // every part between the 'x's, the empty one after a trailing 'x' included
    const size_t end = std::min(text.find('x', start), text.size());
    const std::string part = text.substr(start, end - start);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos ||
        part.size() > 9 || std::stoll(part) == 0) {
      return Status::InvalidArgument(
          "--input-shape '" + text + "': " +
          (part.empty() ? std::string("an empty size") : "'" + part + "' is not a size") +
          "; it must be positive sizes separated by 'x', e.g. 2x3x224x224");
    }
    shape.push_back(std::stoll(part));
    if (end == text.size()) break;
    start = end + 1;
  }
  return shape;
}

}  // namespace graphdump::tools
