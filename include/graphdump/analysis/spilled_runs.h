// Sorted runs of text records spilled to an unnamed temporary file and read back merged: how
// the analysis commands write an output that can be larger than memory (every hit of `watch
// --json`, every kernel of `compare --json`) while holding only a buffer per run
// (docs/scale.md, "Memory and speed at scale").
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graphdump/status.h"

namespace graphdump::analysis {

// Records of a fixed number of 64-bit key words and a text, in runs (one per rank or rank pair).
// The file lies in $TMPDIR (else /tmp) and has no name from the start: it is gone when the
// process ends, however it ends.
class SpilledRuns {
 public:
  SpilledRuns(size_t runs, size_t key_words);
  ~SpilledRuns();
  SpilledRuns(const SpilledRuns&) = delete;
  SpilledRuns& operator=(const SpilledRuns&) = delete;

  // Appends a record to `*chunk` (Append writes chunks).
  void Encode(const uint64_t* key, std::string_view text, std::string* chunk) const;
  // Appends a chunk of whole records (Encode's) to run `run`, after its earlier chunks. Any
  // thread; one writer per run at a time. Clears `*chunk`.
  Status Append(size_t run, std::string* chunk);

  // Adds an empty run after the others and returns its number (for runs counted as they come).
  size_t AddRun();

  // Records written to run `run`.
  size_t count(size_t run) const { return runs_[run].count; }

  // Every record of every run, in the order of their keys (word by word, unsigned), records of
  // equal keys by run, then in the order they were appended: a stable sort of the runs' records
  // one after the other, when each run was appended in key order. Reads a buffer per run.
  Status Merge(const std::function<Status(std::string_view text)>& each) const;
  // The records of run `run` in the order they were appended.
  Status Read(size_t run, const std::function<Status(std::string_view text)>& each) const;

 private:
  struct Run {
    std::vector<std::pair<uint64_t, uint64_t>> chunks;  // offset and size in the file
    size_t count = 0;
  };
  class Reader;
  int fd_ = -1;
  Status status_;
  size_t key_words_;
  std::mutex mutex_;
  uint64_t size_ = 0;
  std::vector<Run> runs_;
};

// Spreads a signed number over an unsigned word in the same order (for SpilledRuns' keys).
inline uint64_t OrderedWord(int64_t v) { return static_cast<uint64_t>(v) ^ (uint64_t{1} << 63); }

// `text` (a JSON value printed at indent 2 from the left margin) indented by `by` spaces, as
// nlohmann::json prints it nested that deep: every line but the first is shifted (a newline in
// a JSON string is written \n, so every newline of `text` starts a line).
void AppendIndented(std::string_view text, size_t by, std::string* out);

// The array value of a key of a JSON object printed at indent 2, its `count` elements (each as
// the array's element: indented by 4, AppendIndented) given by `read` to the function it takes:
// "[]", or one element a line and "  ]", appended to `out`, which goes to `write` (and is
// cleared) whenever it holds 1 MiB.
using TextSink = std::function<Status(std::string_view text)>;
Status AppendJsonArray(size_t count, const std::function<Status(const TextSink&)>& read,
                       const TextSink& write, std::string* out);

// `text` (a JSON object printed at indent 2) cut around the value of its key `key`, an empty
// string put there as a placeholder for an array AppendJsonArray writes: what comes before the
// value and what comes after it.
std::pair<std::string, std::string> SplitJsonAt(const std::string& text, const std::string& key);

}  // namespace graphdump::analysis
