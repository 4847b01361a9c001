// compare_shown.h: what `compare`'s text shows, kept rank pair by rank pair, and the --out CSV
// spilled to a temporary file and written with the contribution ranks once all are known.
#include "compare_shown.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "graphdump/analysis/precision_verdict.h"
#include "graphdump/file_system.h"

namespace graphdump::tools {
namespace {

// One part's first failure (or first kernel adding error) with its chain, when none was kept.
void KeepFirst(analysis::CompareResult& part, int64_t index,
               std::optional<analysis::KernelComparison>* kept, std::string* chain) {
  if (*kept || index < 0) return;
  analysis::KernelComparison& k = part.kernels[index];
  if (k.adds_error) {
    *chain = analysis::PrecisionChainText(part, analysis::InputChain(part, index), "  ");
  }
  *kept = analysis::KernelWithoutTensors(k);
}

constexpr size_t kNotPassedKept = 21;  // the text lists 20 and says when there are more
constexpr size_t kSourcesKept = 11;    // it lists 10 sources and graph inputs together
constexpr size_t kSpillChunk = size_t{1} << 20;

}  // namespace

CompareCollector::CompareCollector(bool csv) {
  if (!csv) return;
  // In $TMPDIR (else /tmp), as every temporary file of the analysis commands (std::tmpfile
  // ignores $TMPDIR); nameless once open, so it goes with the process however it ends.
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string dir = tmpdir && *tmpdir ? tmpdir : "/tmp";
  std::string name = dir + "/graphdump-compare-XXXXXX";
  const int fd = ::mkstemp(name.data());
  if (fd >= 0) {
    ::unlink(name.c_str());
    spill_ = ::fdopen(fd, "w+");
    if (!spill_) ::close(fd);
  }
  if (!spill_) {
    spill_status_ = Status::IOError(fmt::format(
        "cannot create a temporary file for the CSV in {} ($TMPDIR): {}", dir,
        std::strerror(errno)));
  }
}

CompareCollector::~CompareCollector() {
  if (spill_) std::fclose(spill_);
}

void CompareCollector::Add(analysis::CompareResult& part) {
  shown_.kernels += part.kernels.size();
  shown_.passed += part.passed;
  shown_.warnings += part.warnings;
  shown_.errors += part.errors;
  std::string rows;
  std::vector<size_t> rank_at;
  for (analysis::KernelComparison& k : part.kernels) {
    const bool contributor = k.role == analysis::KernelRole::kOperator && k.adds_error;
    if (contributor) {
      contributors_.push_back({analysis::ContributionKeyOf(k), analysis::KernelWithoutTensors(k)});
    }
    if (k.verdict != analysis::Verdict::kPass && shown_.not_passed.size() < kNotPassedKept) {
      shown_.not_passed.push_back(analysis::KernelWithoutTensors(k));
    }
    if (!spill_ || !spill_status_.ok()) continue;
    rank_at.clear();
    analysis::AppendCompareCsvRows(k, 0, &rows, contributor ? &rank_at : nullptr);
    for (size_t at : rank_at) {
      rank_at_.push_back({spilled_ + at, static_cast<uint32_t>(contributors_.size() - 1)});
    }
    if (rows.size() >= kSpillChunk || &k == &part.kernels.back()) {
      if (std::fwrite(rows.data(), 1, rows.size(), spill_) != rows.size()) {
        spill_status_ = Status::IOError(fmt::format(
            "cannot write the CSV's temporary file: {}", std::strerror(errno)));
      }
      spilled_ += rows.size();
      rows.clear();
    }
  }
  KeepFirst(part, part.first_failure, &shown_.first_failure, &shown_.first_failure_chain);
  KeepFirst(part, part.first_adding_error, &shown_.first_adding_error,
            &shown_.first_adding_error_chain);
  for (int64_t i : part.differing_sources) {
    if (shown_.sources.size() >= kSourcesKept) break;
    shown_.sources.push_back(analysis::KernelWithoutTensors(part.kernels[i]));
  }
  for (const auto& [i, slot] : part.differing_graph_inputs) {
    if (shown_.graph_inputs.size() >= kSourcesKept) break;
    shown_.graph_inputs.push_back({analysis::KernelWithoutTensors(part.kernels[i]), slot});
  }
  auto append = [](auto* to, auto& from) {
    std::move(from.begin(), from.end(), std::back_inserter(*to));
  };
  append(&shown_.unpaired, part.unpaired);
  append(&shown_.call_count_differences, part.call_count_differences);
  append(&shown_.skipped, part.skipped);
}

CompareShown CompareCollector::Finish(std::vector<analysis::Skipped> index_skipped) {
  // Summarize's ranking over the contributors of every part, in execution order.
  std::vector<uint32_t> order(contributors_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    const int order = analysis::CompareContribution(contributors_[x].key, contributors_[y].key);
    return order != 0 ? order < 0 : x < y;
  });
  rank_of_.assign(contributors_.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) {
    rank_of_[order[i]] = static_cast<int>(i + 1);
    contributors_[order[i]].kernel.contribution_rank = static_cast<int>(i + 1);
    shown_.contributors.push_back(std::move(contributors_[order[i]].kernel));
  }
  contributors_.clear();
  std::move(shown_.skipped.begin(), shown_.skipped.end(), std::back_inserter(index_skipped));
  shown_.skipped = std::move(index_skipped);
  return std::move(shown_);
}

Status CompareCollector::WriteCsv(const std::string& path) {
  GRAPHDUMP_RETURN_IF_ERROR(spill_status_);
  if (std::fflush(spill_) != 0 || std::fseek(spill_, 0, SEEK_SET) != 0) {
    return Status::IOError(
        fmt::format("cannot read the CSV's temporary file: {}", std::strerror(errno)));
  }
  GRAPHDUMP_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, NewUserFile(path));
  const std::string header = analysis::CompareCsvHeader();
  GRAPHDUMP_RETURN_IF_ERROR(file->Append(header.data(), header.size()));
  std::vector<char> chunk(kSpillChunk);
  std::string text;
  uint64_t position = 0;
  size_t next = 0;
  while (true) {
    const size_t n = std::fread(chunk.data(), 1, chunk.size(), spill_);
    if (n == 0) break;
    text.clear();
    size_t from = 0;
    for (; next < rank_at_.size() && rank_at_[next].first < position + n; ++next) {
      const size_t at = static_cast<size_t>(rank_at_[next].first - position);
      text.append(chunk.data() + from, at - from);
      text += std::to_string(rank_of_[rank_at_[next].second]);
      from = at;
    }
    text.append(chunk.data() + from, n - from);
    GRAPHDUMP_RETURN_IF_ERROR(file->Append(text.data(), text.size()));
    position += n;
  }
  if (std::ferror(spill_) || position != spilled_) {
    return Status::IOError("cannot read the CSV's temporary file back");
  }
  return file->Commit();
}

}  // namespace graphdump::tools
