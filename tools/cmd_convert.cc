// graphdump convert: Ascend dump files to .npy (docs/ascend.md).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "commands.h"
#include "fmt/format.h"
#include "graphdump/analysis/ascend_convert.h"
#include "graphdump/file_system.h"

namespace graphdump::tools {
namespace {

constexpr char kConvertFooter[] = R"(
Input files are Ascend asynchronous dump files ({op_type}.{op_name}.{task}.{stream}.{timestamp}:
an 8-byte header length, a toolkit.dumpdata.DumpData header, then the tensor bytes), as written by
MindSpore's Ascend dump, the CANN toolkit, or graphdump with file_format "bin". A directory is
searched recursively; its sub-directories are kept under OUT.

Without -f every tensor keeps its device layout: {basename}.{input|output}.{i}.npy
With -f NCHW (or ND, NCDHW) device formats (NC1HWC0, NC1HWC0_C04, FRACTAL_Z, FRACTAL_Z_3D,
FRACTAL_NZ, C1HWNCoC0, NDC1HWC0) become host layout cropped to original_shape, named
{basename}.{input|output}.{i}.{d0xd1x...}.npy. Host formats (NHWC, HWCN, ND...) are saved as
stored; other device formats too, with a warning. float16 stays float16; bfloat16 is written
as float32. Names over 255 bytes become {number}.npy, listed in mapping.csv.

Files below a directory that are named like dump files but are not regular files (a FIFO, a
device) are not read: each is listed on stderr as skipped. A .npy is written only as a new file
or over a regular file: a FIFO, device or symbolic link under its name in OUT is an error.

Exit status: 0 all converted, 2 usage error (bad option, no input found, an -o that cannot be
a directory, a FIFO, device or symbolic link where a .npy is to be written), 3 a file could not
be read or written.

Examples:
  graphdump convert dump/ -o npy/ -f NCHW
  graphdump convert Conv2D.Default_conv1.2.7.1700000000000000 -o out/
  graphdump convert a_dir b_dir -o out/ -f ND -j 8
)";

bool IsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

void DrawProgress(size_t done, size_t total) {
  constexpr int kWidth = 30;
  const int filled = total == 0 ? kWidth : static_cast<int>(kWidth * done / total);
  std::fprintf(stderr, "\rconvert [%s%s] %zu/%zu files", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '-').c_str(), done, total);
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

}  // namespace

int RunConvert(int argc, char** argv) {
  CLI::App app{"Convert Ascend dump files (device formats) to NumPy .npy files.", argv[0]};
  app.footer(kConvertFooter);
  std::vector<std::string> operands;
  std::string output_dir;
  std::string format;
  int threads = 0;
  bool quiet = false;
  app.add_option("FILE_OR_DIR", operands, "dump files, or directories searched recursively")
      ->required();
  app.add_option("-o,--output", output_dir, "output directory (created if missing)")->required();
  app.add_option("-f,--format", format,
                 "target layout: NCHW, ND or NCDHW (each means: host layout); omit to keep the "
                 "device layout");
  app.add_option("-j,--threads", threads, "files converted in parallel (default: one per core)");
  app.add_flag("-q,--quiet", quiet, "no progress bar and no warnings");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  format = Upper(format);
  if (!format.empty() && format != "NCHW" && format != "ND" && format != "NCDHW") {
    std::fprintf(stderr,
                 "graphdump convert: -f %s: unknown target format; allowed: NCHW, ND, NCDHW "
                 "(or no -f to keep device layouts)\n",
                 format.c_str());
    return kExitUsage;
  }
  std::vector<std::string> skipped;
  StatusOr<std::vector<AscendConvertJob>> jobs = CollectAscendDumpFiles(operands, &skipped);
  if (!jobs.ok()) {
    std::fprintf(stderr, "graphdump convert: %s\n", jobs.status().message().c_str());
    return kExitUsage;
  }
  for (const std::string& s : skipped) {
    std::fprintf(stderr, "graphdump convert: skipped %s\n", s.c_str());
  }
  if (jobs->empty()) {
    std::fprintf(stderr, "graphdump convert: no dump files found in %s\n",
                 fmt::format("{}", fmt::join(operands, " ")).c_str());
    return kExitUsage;
  }
  // An unusable -o fails once, before any file is read, rather than once per file.
  if (Status made = NewPosixFileSystem()->CreateDirectories(output_dir); !made.ok()) {
    std::fprintf(stderr, "graphdump convert: -o %s: %s\n", output_dir.c_str(),
                 made.message().c_str());
    return kExitUsage;
  }
  AscendConvertOptions options;
  options.output_dir = output_dir;
  options.target_format = format;
  options.threads = threads;
  const bool bar = !quiet && IsTerminal();
  if (bar) options.progress = DrawProgress;
  if (!quiet) {
    options.warn = [bar](const std::string& message) {
      std::fprintf(stderr, "%swarning: %s\n", bar ? "\r\033[K" : "", message.c_str());
    };
  }
  AscendConvertSummary summary = ConvertAscendDumps(*jobs, options);
  bool refused_output = false;  // a FIFO, device or link where a .npy was to be written
  for (const Status& error : summary.errors) {
    std::fprintf(stderr, "graphdump convert: error: %s\n", error.message().c_str());
    refused_output = refused_output || error.code() == StatusCode::kInvalidArgument;
  }
  std::printf("converted %zu of %zu files: %zu .npy files, %.1f MiB written to %s%s\n",
              summary.files, jobs->size(), summary.tensors,
              static_cast<double>(summary.bytes_written) / (1 << 20), output_dir.c_str(),
              summary.warnings ? fmt::format(" ({} warnings)", summary.warnings).c_str() : "");
  if (summary.errors.empty()) return kExitOk;
  return refused_output ? kExitUsage : kExitFailure;
}

}  // namespace graphdump::tools
