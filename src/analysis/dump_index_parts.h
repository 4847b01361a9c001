// What the files of the dump index share (dump_index.h): directory helpers, the indexing of one
// rank directory and of a GE-layout dump, and statistic.csv rows streamed as they are parsed.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "graphdump/analysis/dump_index.h"

namespace graphdump::analysis {

// A decimal number of at most 18 digits (a directory or file-name field).
bool IsNumber(const std::string& s);

// The entries of `dir`, sorted; none when it does not exist (any more). An IOError naming `dir`
// and the system's reason ("Permission denied") when it cannot be listed, or listed but not
// searched (its entries cannot be looked at).
StatusOr<std::vector<std::filesystem::path>> SortedChildren(const std::filesystem::path& dir);

// Whether `entry` (an entry SortedChildren listed) is a directory, following a link; false when
// it is gone. An IOError naming its directory and the reason when it cannot be looked at.
StatusOr<bool> IsSubdirectory(const std::filesystem::path& entry);

// A symbolic link inside a dump is not read (docs/analysis.md): what it points to lies outside
// the dump, and the commands (and report's page) would show it as the dump's. Adds the refusal
// to `skipped` and returns true for one.
bool RefusedLink(const std::filesystem::path& path, std::vector<Skipped>* skipped);

// The text of `path`, a regular file (a FIFO is not waited on); "" and a `skipped` entry when it
// cannot be read.
std::string ReadText(const std::filesystem::path& path, std::vector<Skipped>* skipped);

// Whether `path` exists; a path that cannot be looked at (its directory is unreadable) is
// added to `skipped` and counts as absent.
bool Present(const std::filesystem::path& path, std::vector<Skipped>* skipped);

// The non-empty lines of `path` (a trailing \r dropped); none, and a `skipped` entry, when it
// cannot be read.
std::vector<std::string> ReadLines(const std::filesystem::path& path,
                                   std::vector<Skipped>* skipped);

// Drops the kernels and tensors of `it` that `filter` leaves out (calls keep their numbers).
void FilterIteration(const IndexFilter& filter, IterationEntry* it);

// The index of one rank_{id} directory (docs/layout.md), keeping what `filter` keeps (its ranks
// aside); unreadable files are added to `skipped`. An IOError naming the directory when one of
// its directories cannot be read: a directory is never taken for an empty one.
StatusOr<RankEntry> IndexRank(const std::filesystem::path& dir, uint32_t rank,
                              const IndexFilter& filter, std::vector<Skipped>* skipped);

// GE-layout dumps and `graphdump convert` output (docs/ascend.md) in the index's terms. Returns
// false when `dir` holds neither, an IOError when a directory below it cannot be read.
StatusOr<bool> IndexAscendLayout(const std::string& dir, DumpIndex* index);

// Called with each statistic.csv row and its kernel's Op Type and Op Name (views into the text,
// valid during the call).
using StatisticRowSink =
    std::function<void(std::string_view op_type, std::string_view op_name, StatisticRow row)>;

// ParseStatisticCsvText, each row handed to `each` as it is parsed instead of kept: the rows'
// statistic cells are one string shared by the rows. Errors as ParseStatisticCsvText's.
Status ParseStatisticRows(std::string_view text, const std::string& path,
                          const StatisticRowSink& each);

}  // namespace graphdump::analysis
