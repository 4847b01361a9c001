// Calls: which files and statistic.csv rows of a kernel make one call (docs/analysis.md).
#include <algorithm>
#include <map>
#include <utility>

#include "graphdump/analysis/dump_index.h"

namespace graphdump::analysis {
namespace {

using Slot = std::pair<bool, uint32_t>;  // (is_input, slot)

// DTypeFromName, remembering the last name: a statistic.csv names a few dtypes, row after row.
std::optional<DType> RowDType(std::string_view name) {
  thread_local std::string last_name;
  thread_local std::optional<DType> last = DTypeFromName("");
  if (name != last_name) {
    last_name = name;
    last = DTypeFromName(name);
  }
  return last;
}

TensorEntry StatisticOnly(StatisticRow row) {
  TensorEntry t;
  t.is_input = row.is_input;
  t.slot = row.slot;
  t.dtype_name = row.dtype;
  t.dtype = RowDType(row.dtype);
  t.timestamp = row.timestamp;
  t.stats = std::move(row);
  return t;
}

// Attaches `rows` (one io and slot, in file order) to `tensors` (the same io and slot): by
// timestamp first, then in order to the tensors left without a row; the rest become
// statistic-only tensors.
void AttachRows(std::vector<StatisticRow>& rows, std::vector<TensorEntry>* tensors) {
  // The tensors without a row by (timestamp, position), and per timestamp how many of them are
  // taken (kept at the timestamp's first entry): a row finds its tensor by a binary search, not
  // by a scan (a kernel called 100,000 times in a step would make that quadratic).
  std::vector<std::pair<uint64_t, size_t>> free;
  for (size_t i = 0; i < tensors->size(); ++i) {
    if (!(*tensors)[i].stats) free.emplace_back((*tensors)[i].timestamp, i);
  }
  std::sort(free.begin(), free.end());
  std::vector<size_t> taken(free.size());
  std::vector<bool> used(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].timestamp == 0) continue;
    const auto first = std::lower_bound(free.begin(), free.end(),
                                        std::make_pair(rows[r].timestamp, size_t{0}));
    if (first == free.end() || first->first != rows[r].timestamp) continue;
    const size_t group = static_cast<size_t>(first - free.begin());
    const size_t k = group + taken[group];
    if (k == free.size() || free[k].first != rows[r].timestamp) continue;  // all taken
    ++taken[group];
    (*tensors)[free[k].second].stats = std::move(rows[r]);
    used[r] = true;
  }
  size_t next = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (used[r]) continue;
    while (next < tensors->size() && (*tensors)[next].stats) ++next;
    if (next < tensors->size()) {
      (*tensors)[next].stats = std::move(rows[r]);
    } else {
      tensors->push_back(StatisticOnly(std::move(rows[r])));
    }
  }
}

}  // namespace

std::vector<KernelEntry> SplitCalls(KernelEntry kernel, std::vector<StatisticRow> rows) {
  std::vector<KernelEntry> out;
  SplitCalls(std::move(kernel), std::span<StatisticRow>(rows), &out);
  return out;
}

void SplitCalls(KernelEntry kernel, std::span<StatisticRow> rows,
                std::vector<KernelEntry>* calls_out) {
  // A statistic-only kernel with one row per io and slot (a statistics dump): one call, as the
  // general case below makes it, without its maps.
  if (kernel.tensors.empty() && rows.size() <= 16) {
    auto by_slot = [](const StatisticRow& a, const StatisticRow& b) {
      return std::make_pair(!a.is_input, a.slot) < std::make_pair(!b.is_input, b.slot);
    };
    if (!std::is_sorted(rows.begin(), rows.end(), by_slot)) {
      std::stable_sort(rows.begin(), rows.end(), by_slot);  // a slot's rows stay in file order
    }
    bool unique = true;
    for (size_t r = 1; r < rows.size() && unique; ++r) {
      unique = rows[r].is_input != rows[r - 1].is_input || rows[r].slot != rows[r - 1].slot;
    }
    if (unique) {
      kernel.tensors.reserve(rows.size());
      kernel.first_timestamp = UINT64_MAX;
      for (StatisticRow& row : rows) {
        if (row.timestamp) kernel.first_timestamp = std::min(kernel.first_timestamp, row.timestamp);
        kernel.tensors.push_back(StatisticOnly(std::move(row)));
      }
      kernel.call = 0;
      kernel.calls = 1;
      calls_out->push_back(std::move(kernel));
      return;
    }
  }
  std::map<Slot, std::vector<TensorEntry>> by_slot;
  for (TensorEntry& t : kernel.tensors) by_slot[{t.is_input, t.slot}].push_back(std::move(t));
  for (auto& [slot, tensors] : by_slot) {
    std::stable_sort(tensors.begin(), tensors.end(),
                     [](const TensorEntry& a, const TensorEntry& b) {
                       return std::tie(a.timestamp, a.path) < std::tie(b.timestamp, b.path);
                     });
  }
  std::map<Slot, std::vector<StatisticRow>> rows_by_slot;
  for (StatisticRow& row : rows) rows_by_slot[{row.is_input, row.slot}].push_back(std::move(row));
  for (auto& [slot, slot_rows] : rows_by_slot) {
    std::vector<TensorEntry>& tensors = by_slot[slot];
    AttachRows(slot_rows, &tensors);
    // A statistic-only tensor takes its place among the files by its row's timestamp; one
    // without a timestamp comes after them, in file order.
    auto when = [](const TensorEntry& t) { return t.timestamp ? t.timestamp : UINT64_MAX; };
    std::stable_sort(tensors.begin(), tensors.end(),
                     [&](const TensorEntry& a, const TensorEntry& b) { return when(a) < when(b); });
  }
  size_t calls = 1;
  for (const auto& [slot, tensors] : by_slot) calls = std::max(calls, tensors.size());
  kernel.tensors.clear();
  std::vector<KernelEntry> out(calls, kernel);
  for (size_t c = 0; c < calls; ++c) {
    out[c].call = static_cast<uint32_t>(c);
    out[c].calls = static_cast<uint32_t>(calls);
  }
  for (auto& [slot, tensors] : by_slot) {  // (io, slot) order: inputs first, then by slot
    for (size_t c = 0; c < tensors.size(); ++c) out[c].tensors.push_back(std::move(tensors[c]));
  }
  for (KernelEntry& k : out) {
    std::sort(k.tensors.begin(), k.tensors.end(), [](const TensorEntry& a, const TensorEntry& b) {
      return std::make_pair(!a.is_input, a.slot) < std::make_pair(!b.is_input, b.slot);
    });
    k.first_timestamp = UINT64_MAX;
    for (const TensorEntry& t : k.tensors) {
      if (t.timestamp) k.first_timestamp = std::min(k.first_timestamp, t.timestamp);
    }
    calls_out->push_back(std::move(k));
  }
}

}  // namespace graphdump::analysis
