// Helpers shared by the analysis commands (ls, trace, compare, watch, report).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "graphdump/analysis/compare.h"
#include "graphdump/analysis/dump_index.h"

namespace graphdump::tools {

// Parses the command line. Returns nullopt to continue, or the exit code to return now (0 after
// --help, kExitUsage after a usage error, with CLI11's message on stderr).
std::optional<int> ParseArgs(CLI::App& app, int argc, char** argv);

// Prints "graphdump <command>: error: ..." for a failed IndexDump (or ListDumpRanks) and
// returns the exit code for it: kExitUsage for a missing or non-dump directory, kExitFailure
// otherwise (a directory that cannot be read).
int OpenError(const std::string& command, const Status& status);

// Prints the index's warnings, "graphdump <command>: warning: ...".
void PrintWarnings(const std::string& command, const std::vector<std::string>& warnings);

// The rank directories of `dir` (ListDumpRanks), printing "graphdump <command>: error: ..." on
// failure with `exit_code` set as OpenError returns it.
std::optional<analysis::DumpRanks> ListRanks(const std::string& command, const std::string& dir,
                                             int* exit_code);

// Indexes `ranks` one rank at a time (ForEachRank, as many ranks at once as there are cores) and
// calls `each(position, one_rank_index)` on the thread that indexed the rank; the rank's index is
// freed when `each` returns, so memory holds what `each` keeps. The index's warnings are printed
// after the ranks. With `progress`, a progress line counts the ranks (on a terminal only).
// nullopt after printing the error of a rank that could not be read (*exit_code set as
// OpenError returns it).
std::optional<analysis::StreamedDump> StreamRanks(
    const std::string& command, analysis::DumpRanks ranks, bool progress,
    const std::function<void(size_t, analysis::DumpIndex&)>& each, int* exit_code);

// Text made rank by rank on the threads of StreamDump, printed to stdout in rank order: the text
// of position i as soon as every earlier position's is printed. Thread-safe.
class InOrderPrinter {
 public:
  explicit InOrderPrinter(size_t count) : texts_(count) {}
  void Put(size_t position, std::string text);

 private:
  std::mutex mu_;
  std::vector<std::optional<std::string>> texts_;
  size_t next_ = 0;
};

// False, after printing "<command>: error: <option> <path>: <why>", when `path` cannot be
// written (OutputPathProblem); an empty `path` (option not given) is fine. Commands call it
// before their long work, so a typo in an output path does not cost a whole comparison.
bool CheckOutputPath(const std::string& command, const std::string& option,
                     const std::string& path);

// Writes `text` as `path` (WriteUserFile: no partial file on failure). Returns kExitOk, or
// prints the error and returns kExitUsage (something other than a regular file is at `path`) or
// kExitFailure.
int WriteOutput(const std::string& command, const std::string& path, const std::string& text);

// Prints what `write_json` writes to stdout as it comes, then a newline. Returns kExitOk, or
// prints the error and returns kExitFailure (a temporary file or stdout failed).
int PrintStreamedJson(const std::string& command,
                      const std::function<Status(const std::function<Status(std::string_view)>&)>&
                          write_json);

// A file written as it comes (`write_file`) failed: prints the error and returns WriteOutput's
// exit code for it; kExitOk when `written` is ok.
int OutputError(const std::string& command, const Status& written);

// Prints the skipped files ("skipped FILE: reason") to stderr.
void PrintSkipped(const std::string& command, const std::vector<analysis::Skipped>& skipped);

// " #12": a kernel's place in the execution order, as the text reports print it after the
// iteration; "" for dumps without an execution order file (GE layout, ordered by timestamp).
std::string OrderTag(int64_t order);

// --atol and --rtol (compare, report). Their default is no number: each tensor pair is judged
// by its dtype's standard (docs/precision.md), and --help says so.
void AddToleranceOptions(CLI::App& app, analysis::CompareOptions* options);

// After parsing: sets options->user_tolerances when --atol or --rtol was given. False, after
// printing "<command>: error: ...", when either is negative or not a number.
bool ApplyToleranceOptions(const CLI::App& app, const std::string& command,
                           analysis::CompareOptions* options);

// " call 1": which call of a kernel called more than once in its iteration; "" when it ran
// once (docs/analysis.md).
std::string CallTag(uint32_t call, uint32_t calls);

// A size for the ls tables, one decimal from KiB up: "12 B", "1.5 KiB", "345.1 MiB". (The run
// summary of run/train writes SummaryBytes: "12 bytes", "345.10 MiB".)
std::string TableBytes(uint64_t bytes);

}  // namespace graphdump::tools
