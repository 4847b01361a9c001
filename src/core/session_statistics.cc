// A DumpSession's statistic.csv rows (docs/file-format.md): reduced from memory (or found
// again in the statistics cache), kept per iteration directory in submission order so that
// synchronous and asynchronous dumps write identical files, and written when the step ends and
// its last queued tensor is written.
#include <mutex>

#include "session_impl.h"

namespace graphdump::session_internal {

void FillStatRow(const TensorFileName& file, const TensorView& view, StatRowInfo* row) {
  row->op_type.assign(file.op_type);
  row->op_name.assign(file.op_name);
  row->task_id = file.task_id;
  row->stream_id = file.stream_id;
  row->timestamp = file.timestamp;
  row->is_input = file.is_input;
  row->slot = file.slot;
  row->data_size = view.ContiguousBytes();
  row->dtype = view.dtype;
  row->shape.assign(view.shape.begin(), view.shape.end());
}

StepDir* SessionImpl::StepDirFor(const std::string& dir) {
  // A step's rows go to one directory after another: the last one is found without the lock
  // and the map (it lives until EndStepDirs, which forgets it; its `dir` never changes).
  if (last_step_dir_ && last_step_dir_->dir == dir) return last_step_dir_;
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<StepDir>& sd = step_dirs_[dir];
  if (!sd) {
    sd = std::make_unique<StepDir>();
    sd->dir = dir;
  }
  last_step_dir_ = sd.get();
  return sd.get();
}

void SessionImpl::EmitStatisticRow(const std::string& dir, const TensorFileName& file,
                                   const TensorView& original, const TensorWriteOptions& options) {
  // As EmitTensor's file would be: the row shows the view the file would hold (trans_flag
  // false: storage order), and its name (for mapping.csv) has that layout's format. Statistics
  // other than md5 do not depend on element order: they read the bytes in storage order, which
  // is plain memory when the layout is dense (a transposed weight), instead of gathering them
  // element by element. A view already in storage order is used as it is, not copied.
  const bool ordered = original.strides.empty() || original.IsContiguous();
  TensorView reordered;
  const TensorFileName* named = &file;
  TensorFileName reformatted;
  if (!ordered && (!config_.trans_flag || !options.stats->md5)) {
    std::string format;
    reordered = StorageOrderView(original, &format);
    if (!config_.trans_flag) {
      reformatted = file;
      reformatted.format = std::move(format);
      named = &reformatted;
    }
  }
  const TensorView& shown = ordered || config_.trans_flag ? original : reordered;
  const TensorView& reduced = ordered || options.stats->md5 ? shown : reordered;

  // The path and the row are built in buffers reused from row to row: this runs for every
  // tensor of every kernel, and is done with both before it returns.
  std::string& path = statistic_path_;
  path.assign(dir).push_back('/');
  const size_t basename_at = path.size();
  named->AppendBasename(&path);
  StepDir* sd = StepDirFor(dir);
  if (path.size() - basename_at > kMaxBasenameBytes) {
    // Listed in mapping.csv when the step's statistic.csv is written (FlushStatistics).
    const std::string mapped = MappedName(dir, ".npy", /*names_a_file=*/false);
    sd->mapping.append(mapped).push_back(',');
    sd->mapping.append(path, basename_at).push_back('\n');
    path.resize(basename_at);
    path += mapped;
  }
  StatRowInfo& row = statistic_row_;
  FillStatRow(file, shown, &row);
  // Reduced here even in asynchronous mode: reading it once costs no more than the copy a
  // queued write needs, and skips allocating and filling that copy (a statistic dump of every
  // kernel otherwise copied the whole step's tensors). Bytes already reduced in this step (the
  // previous kernel's output) are not read again.
  ReduceStatistics(path, reduced, options, row, sd, next_seq_++, /*may_defer=*/true);
}

TensorView SessionImpl::StatisticOnlyView(const TensorView& original) {
  std::string unused_format;
  return StorageOrderView(original, &unused_format);
}

bool SessionImpl::ReduceStatistics(const std::string& path, const TensorView& view,
                                   const TensorWriteOptions& options, const StatRowInfo& row,
                                   StepDir* sd, uint64_t seq, bool may_defer) {
  StatsCache::Probe probe(view, *options.stats);  // its key is made once
  if (may_defer && Defers(view)) {
    // The row goes to the worker, after the task that fills its cell when that is queued too.
    // Bytes the cache cannot record are read all the same, into a cell of their own.
    bool reduce = false;
    std::shared_ptr<StatsCell> cell = stats_cache_.FindOrAddCell(std::move(probe), &reduce);
    if (cell == nullptr) {
      cell = std::make_shared<StatsCell>();
      reduce = true;
    }
    DeferRow(view, row, sd, seq, std::move(cell), reduce);
    return !failed_;
  }
  std::shared_ptr<StatsCell> known = stats_cache_.FindCell(probe);
  if (known && !known->ready()) FinishReads();  // queued
  if (known && known->ready()) {
    AddStatisticRow(row, known->stats, sd, seq);
    return true;
  }
  std::optional<NanPropagatingStats> stats = WriteOne(path, view, options, row, sd, seq);
  if (stats) stats_cache_.Insert(std::move(probe), *stats);
  return stats.has_value();
}

void SessionImpl::AddStatisticRow(const StatRowInfo& row, const NanPropagatingStats& stats,
                                  StepDir* sd, uint64_t seq) {
  std::string line = StatisticCsvRow(row, stats, config_.statistic_category);
  std::lock_guard<std::mutex> lock(mu_);
  sd->rows.emplace(seq, std::move(line));
}

void SessionImpl::FinishPending(StepDir* sd) {
  std::unique_ptr<StepDir> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (--sd->pending == 0 && sd->ended) done = TakeStepDir(sd->dir);
  }
  if (done) FlushStatistics(*done);
}

std::unique_ptr<StepDir> SessionImpl::TakeStepDir(const std::string& dir) {
  auto it = step_dirs_.find(dir);
  std::unique_ptr<StepDir> sd = std::move(it->second);
  step_dirs_.erase(it);
  return sd;
}

void SessionImpl::EndStepDirs() {
  // With reads on the worker (statistic dumps: no row waits for a writer thread), the step's
  // files are written by the worker after the step's rows, and the host's thread goes on.
  // Otherwise a step's rows are complete when it ends.
  const bool on_worker = ReadsOnWorker();
  if (on_worker) {
    SubmitDeferredRows();
  } else {
    FinishReads();
  }
  last_step_dir_ = nullptr;  // the thread that finishes it may free it from now on
  std::vector<std::unique_ptr<StepDir>> ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> dirs;
    for (auto& [dir, sd] : step_dirs_) {
      sd->ended = true;
      if (sd->pending == 0) dirs.push_back(dir);
    }
    for (const std::string& dir : dirs) ready.push_back(TakeStepDir(dir));
  }
  if (on_worker) return QueueStepFiles(std::move(ready));
  for (const auto& sd : ready) FlushStatistics(*sd);
}

void SessionImpl::FlushStatistics(const StepDir& sd) {
  if (sd.rows.empty()) return;
  if (!sd.mapping.empty()) {
    Status st = fs_->AppendToFile(sd.dir + "/mapping.csv", sd.mapping);
    if (!st.ok()) {
      Fail(st);
      return;
    }
  }
  const std::string csv = sd.dir + "/statistic.csv";
  const bool exists = fs_->Exists(csv);
  std::string text = exists ? "" : StatisticCsvHeader(config_.statistic_category);
  for (const auto& [seq, line] : sd.rows) text += line;
  // A new file appears whole under its name (temporary, then rename), so even a kill cannot
  // leave half a row; rows for an existing file are appended all or nothing.
  Status st = exists ? fs_->AppendToFile(csv, text) : fs_->WriteWholeFile(csv, text);
  if (!st.ok()) {
    Fail(st);
    return;
  }
  statistic_rows_ += sd.rows.size();
}

}  // namespace graphdump::session_internal
