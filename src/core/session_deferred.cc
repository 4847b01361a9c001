// Statistic rows reduced on the session's worker thread (SessionOptions::reads_in_background,
// docs/python.md): the host's thread queues each row with what the worker needs, in batches
// kept compact (names and shapes in one buffer each), and waits for the worker only where a
// write of a queued tensor, or the end of a step, needs it done.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string_view>
#include <thread>
#include <utility>

#include "session_impl.h"

namespace graphdump::session_internal {
namespace {

// read_by_ is pruned of allocations no queued task reads when it reaches this size.
constexpr size_t kReadByPrune = 4096;

// The fields of a statistic row that are numbers, from a StatRowInfo to a queued row or back.
template <typename From, typename To>
void CopyRowNumbers(const From& from, To* to) {
  to->task_id = from.task_id;
  to->stream_id = from.stream_id;
  to->slot = from.slot;
  to->timestamp = from.timestamp;
  to->data_size = from.data_size;
  to->is_input = from.is_input;
  to->dtype = from.dtype;
}

}  // namespace

class SessionImpl::DeferredRows final : public OrderedWorker::Task {
 public:
  struct Row {
    // The reduced view (when `reduce`): its memory, kept alive by `keep_alive`, which is
    // released with the task on the host's thread.
    const void* data = nullptr;
    Handle keep_alive;
    DType view_dtype = DType::kFloat32;
    uint32_t dims = 0, shape_at = 0;  // shape, then strides when `strided`, in `ints`
    bool strided = false;
    // The row's fields (StatRowInfo); its names in `text`, its shape in `ints`.
    uint32_t op_type_at = 0, op_type_size = 0, op_name_at = 0, op_name_size = 0;
    uint32_t task_id = 0, stream_id = 0, slot = 0;
    uint64_t timestamp = 0, data_size = 0;
    bool is_input = false;
    DType dtype = DType::kFloat32;
    uint32_t row_dims = 0, row_shape_at = 0;
    StepDir* sd = nullptr;
    uint64_t seq = 0;
    std::shared_ptr<StatsCell> cell;
    bool reduce = false;
    QueuedRow before;  // when `reduce`: the previous queued row reducing the same allocation
  };

  explicit DeferredRows(SessionImpl* session) : session_(session) {
    rows.reserve(kDeferredBatchRows);
  }
  void Run() override { session_->RunDeferredRows(*this); }
  // Rebuilds row `r`'s statistic row into `row`, and its reduced view into `view` (`reduce`).
  void Unpack(const Row& r, StatRowInfo* row, TensorView* view) const;
  // Empties the batch for reuse (on the host's thread: the tensors' handles go back there),
  // keeping its buffers.
  void Clear() {
    rows.clear();
    text.clear();
    ints.clear();
    bytes = 1;
    last_text_at_ = last_text_size_ = 0;
  }

  // Appends `s` to `text` unless it ends `text` already (a kernel's rows share its names).
  std::pair<uint32_t, uint32_t> Text(const std::string& s) {
    if (s.size() <= last_text_size_ &&
        std::string_view(text).substr(last_text_at_, last_text_size_) == s) {
      return {last_text_at_, static_cast<uint32_t>(s.size())};
    }
    last_text_at_ = static_cast<uint32_t>(text.size());
    last_text_size_ = static_cast<uint32_t>(s.size());
    text += s;
    return {last_text_at_, last_text_size_};
  }
  uint32_t Ints(std::span<const int64_t> values) {
    const auto at = static_cast<uint32_t>(ints.size());
    ints.insert(ints.end(), values.begin(), values.end());
    return at;
  }

  std::vector<Row> rows;
  std::string text;
  std::vector<int64_t> ints;
  size_t bytes = 1;  // of the tensors it reads

 private:
  SessionImpl* const session_;
  uint32_t last_text_at_ = 0, last_text_size_ = 0;
};

// The statistic.csv (and mapping.csv) files of a step that has ended, queued on the worker
// after the step's rows. The worker hands them to a thread of their own (step_files_): creating
// a directory and files may take longer than the next step's reads, which the host waits for
// before it writes a tensor still queued.
class SessionImpl::StepFiles final : public OrderedWorker::Task {
 public:
  StepFiles(SessionImpl* session, std::vector<std::unique_ptr<StepDir>> dirs, bool hand_over)
      : session_(session), dirs_(std::move(dirs)), hand_over_(hand_over) {}
  void Run() override {
    if (hand_over_) {
      session_->step_files_->Submit(
          std::make_unique<StepFiles>(session_, std::move(dirs_), /*hand_over=*/false), 1);
      return;
    }
    for (const auto& sd : dirs_) {
      if (sd->rows.empty()) continue;
      Status made = session_->fs_->CreateDirectories(sd->dir);
      if (!made.ok()) {
        session_->Fail(made);
        continue;
      }
      session_->FlushStatistics(*sd);
    }
    dirs_.clear();  // their rows are freed here, not on the host's thread
    session_->step_files_queued_.fetch_sub(1, std::memory_order_release);
  }

 private:
  SessionImpl* const session_;
  std::vector<std::unique_ptr<StepDir>> dirs_;
  const bool hand_over_;
};

void SessionImpl::QueueStepFiles(std::vector<std::unique_ptr<StepDir>> dirs) {
  if (dirs.empty()) return;
  step_files_queued_.fetch_add(1, std::memory_order_relaxed);
  reads_->Submit(std::make_unique<StepFiles>(this, std::move(dirs), /*hand_over=*/true), 1);
}

std::unique_ptr<OrderedWorker> SessionImpl::MakeReadWorker() {
  // Batches that have run come back emptied, for the next rows (a few are kept).
  auto recycle = [this](std::unique_ptr<OrderedWorker::Task> task) {
    auto* rows = dynamic_cast<DeferredRows*>(task.get());
    if (rows == nullptr || spare_batches_.size() >= kSpareBatches) return;
    rows->Clear();
    spare_batches_.push_back(std::move(task));
  };
  return std::make_unique<OrderedWorker>(std::max<size_t>(1, options_.queue_bytes), recycle);
}

void SessionImpl::DeferRow(const TensorView& view, const StatRowInfo& row, StepDir* sd,
                           uint64_t seq, std::shared_ptr<StatsCell> cell, bool reduce) {
  if (!batch_ && !spare_batches_.empty()) {
    batch_ = std::move(spare_batches_.back());
    spare_batches_.pop_back();
  }
  if (!batch_) batch_ = std::make_unique<DeferredRows>(this);
  DeferredRows& b = static_cast<DeferredRows&>(*batch_);
  DeferredRows::Row& r = b.rows.emplace_back();
  if (reduce) {
    r.data = view.data;
    r.keep_alive = view.keep_alive;
    r.view_dtype = view.dtype;
    r.dims = static_cast<uint32_t>(view.shape.size());
    r.shape_at = b.Ints(view.shape);
    r.strided = !view.strides.empty();
    if (r.strided) b.Ints(view.strides);
    b.bytes += view.ContiguousBytes();
    // BeforeWrite of this allocation reduces this row unless the worker has taken it.
    QueuedRow& last = read_by_[view.origin.storage.get()];
    r.before = last;
    last = {reads_->Next(), &b, static_cast<uint32_t>(b.rows.size() - 1)};
  }
  std::tie(r.op_type_at, r.op_type_size) = b.Text(row.op_type);
  std::tie(r.op_name_at, r.op_name_size) = b.Text(row.op_name);
  CopyRowNumbers(row, &r);
  r.row_dims = static_cast<uint32_t>(row.shape.size());
  r.row_shape_at = b.Ints(row.shape);
  r.sd = sd;
  r.seq = seq;
  r.cell = std::move(cell);
  r.reduce = reduce;
}

void SessionImpl::SubmitDeferredRows(bool when_full) {
  if (!batch_) return;
  const DeferredRows& b = static_cast<DeferredRows&>(*batch_);
  const size_t bytes = b.bytes;
  if (when_full && bytes < kDeferredBatchBytes && b.rows.size() < kDeferredBatchRows) return;
  reads_->Submit(std::move(batch_), bytes);
  // Forget the allocations whose readers have all run (a step's tensors, mostly).
  if (read_by_.size() >= kReadByPrune) {
    const uint64_t done = reads_->Done();
    std::erase_if(read_by_, [done](const auto& entry) { return entry.second.task <= done; });
  }
}

void SessionImpl::DeferredRows::Unpack(const Row& r, StatRowInfo* row, TensorView* view) const {
  row->op_type.assign(text, r.op_type_at, r.op_type_size);
  row->op_name.assign(text, r.op_name_at, r.op_name_size);
  CopyRowNumbers(r, row);
  const int64_t* at = ints.data();
  row->shape.assign(at + r.row_shape_at, at + r.row_shape_at + r.row_dims);
  if (!r.reduce) return;
  view->data = r.data;
  view->dtype = r.view_dtype;
  view->shape.assign(at + r.shape_at, at + r.shape_at + r.dims);
  if (r.strided) {
    view->strides.assign(at + r.shape_at + r.dims, at + r.shape_at + 2 * r.dims);
  } else {
    view->strides.clear();
  }
}

void SessionImpl::ReduceDeferredRow(const DeferredRows& batch, size_t index, StatRowInfo& row,
                                    TensorView& view) {
  const DeferredRows::Row& r = batch.rows[index];
  batch.Unpack(r, &row, &view);
  TensorWriteOptions options;
  options.write_npy = false;
  options.stats = statistic_request_;
  // The path only names the tensor in an error: its row's op name does.
  std::optional<NanPropagatingStats> stats =
      WriteOne(row.op_name, view, options, row, r.sd, r.seq);
  // Without stats the dump has stopped: rows that find this cell are left out.
  if (stats) r.cell->stats = std::move(*stats);
  r.cell->Finish(stats.has_value());
}

void SessionImpl::RunDeferredRows(DeferredRows& batch) {
  if (options_.deferred_read_delay_us > 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(options_.deferred_read_delay_us));
  }
  for (size_t i = 0; i < batch.rows.size(); ++i) {
    const DeferredRows::Row& r = batch.rows[i];
    if (r.reduce) {
      if (r.cell->Take()) {
        ReduceDeferredRow(batch, i, worker_row_, worker_view_);
      } else {
        // The host's thread has taken it (TakeQueuedRows) and may still be adding its row to
        // the step's directory: the batch ends, and the step's files (which free that
        // directory's rows) are written, only once it has.
        r.cell->WaitReady();
      }
      continue;
    }
    // An earlier row fills the cell, perhaps on the host's thread at this moment.
    if (!r.cell->WaitReady()) continue;  // its reduction failed: the dump has stopped
    batch.Unpack(r, &worker_row_, nullptr);
    AddStatisticRow(worker_row_, r.cell->stats, r.sd, r.seq);
  }
}

void SessionImpl::TakeQueuedRows(QueuedRow last) {
  // Rows of tasks that have run are done, and so are all the rows before them. The batches of
  // the others stay alive meanwhile: only this thread disposes of them.
  for (QueuedRow at = last; at.task > reads_->Done(); at = at.batch->rows[at.row].before) {
    const DeferredRows::Row& r = at.batch->rows[at.row];
    if (r.cell->Take()) {
      if (options_.host_take_delay_us > 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(options_.host_take_delay_us));
      }
      ReduceDeferredRow(*at.batch, at.row, host_row_, host_view_);
    } else {
      r.cell->WaitReady();  // the worker is reducing it
    }
  }
}

void SessionImpl::FinishReads() {
  if (!ReadsOnWorker()) return;
  SubmitDeferredRows();
  reads_->Wait();
  step_files_->Wait();  // what reads_ handed over is queued there by now
  read_by_.clear();
}

bool SessionImpl::ReadsQueued() const {
  return ReadsOnWorker() && (batch_ || reads_->Done() < reads_->Next() - 1 ||
                             step_files_queued_.load(std::memory_order_acquire) > 0);
}

void SessionImpl::DeferReads(bool defer) {
  if (!defer) FinishReads();
  defer_reads_ = defer;
}

}  // namespace graphdump::session_internal
