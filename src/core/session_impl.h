// Internal: the one implementation of DumpSession (session.h), whose parts live in their own
// files: hook dispatch and lifecycle, the rank directory's claim included (session.cc),
// failures (session_failures.cc), file naming and mapping.csv (session_naming.cc), writing tensor
// and Ascend .bin files, synchronously or through asynchronous copies (session_emit.cc), and
// statistic rows in their order (session_statistics.cc). Not for use outside src/core.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "graphdump/dtype.h"
#include "graphdump/internal/async_writer.h"
#include "graphdump/internal/buffer_pool.h"
#include "graphdump/internal/ordered_worker.h"
#include "graphdump/internal/stats_cache.h"
#include "graphdump/internal/tensor_writer.h"
#include "graphdump/internal/written_files.h"
#include "graphdump/layout.h"
#include "graphdump/selector.h"
#include "graphdump/session.h"
#include "graphdump/stats.h"

namespace graphdump::session_internal {

// The statistic rows of one iteration directory, kept in submission order so that synchronous
// and asynchronous dumps write identical statistic.csv files.
struct StepDir {
  std::string dir;
  std::map<uint64_t, std::string> rows;  // sequence number -> row
  // mapping.csv lines for rows whose file names are too long, written with the rows (a file
  // created on the training thread each step costs it more than the rows do).
  std::string mapping;
  uint32_t pending = 0;                  // asynchronous writes not yet finished
  bool ended = false;                    // EndStep (or Close) was called
};

struct GraphState {
  GraphInfo info;
  std::vector<uint8_t> selected;  // per kernel index
  std::vector<uint8_t> dumped;    // per kernel index: dumped at least once
  bool files_dirty = false;       // kernels were added since the graph files were written
  bool constants_written = false;
  // What the .ir, .pb and execution order files hold now: a file whose new text is the same is
  // not written again (replacing a file frees its blocks, which some mounts discard at once).
  // Touched only by the thread that writes the graph files: graph_files_ when the session has
  // it, else the host's (session_graph_files.cc).
  using WrittenFiles = std::array<std::optional<std::string>, 3>;
  WrittenFiles written;
  // Per kernel index: its names in file form, made at its first dump (DumpKernel), for the
  // full name and op type it was made from.
  struct FileNames {
    std::string full_name, op_type;  // as the kernel gave them
    std::string file_op_type, file_op_name;
  };
  std::vector<std::optional<FileNames>> file_names;
  // IterationDir of the iteration `iteration_dir_of`, made once per iteration.
  std::string iteration_dir;
  std::optional<uint64_t> iteration_dir_of;
};

// For trans_flag false: the view in the order its elements are stored (dimensions sorted by
// decreasing stride), and the name of that layout.
TensorView StorageOrderView(const TensorView& view, std::string* format);

// rank_{r} in MindSpore's layout; {YYYYMMDDhhmmss}/{device_id} in the GE layout, whose model
// directories {net_name}/{graph_id}/{iteration} then follow exactly as in MindSpore's.
std::string RootDir(const DumpConfig& config, uint32_t rank);

// Forks so far in this process's line: a session made before the last fork belongs to the
// parent, and in the child it dumps, writes, drains and removes nothing (its writer threads do
// not exist there). pthread_atfork's child handler counts them.
extern std::atomic<uint64_t> g_forks;

// Fills `row` (its buffers reused) with the statistic.csv fields `file` names for `view`.
void FillStatRow(const TensorFileName& file, const TensorView& view, StatRowInfo* row);

class SessionImpl final : public DumpSession {
 public:
  SessionImpl(SessionOptions options, std::unique_ptr<Selector> selector);
  ~SessionImpl() override;

  Status Start();
  // Start refused the dump path (another run's): the session ends without touching it.
  void Refused() { closed_ = true; }
  // Start failed with `why`: the rank directory this session made is removed; one it did not
  // make (an earlier run's, replaced with overwrite) keeps an INCOMPLETE saying why, where it can.
  // The session then ends without a word: it never dumped.
  void AbandonStart(const Status& why);

  Status OnGraphCompiled(const GraphInfo& graph) override;
  uint32_t AddKernel(uint32_t graph_id, const KernelInfo& kernel) override;
  void UpdateKernels(uint32_t graph_id, const std::vector<KernelInfo>& kernels) override;
  void UpdateAttributes(uint32_t graph_id, uint32_t index,
                        const std::map<std::string, std::string>& attributes) override;
  void AppendHyperparameters(const std::string& lines) override;
  void BeginIteration() override;
  void EndIteration() override;
  bool IterationOpen() const override { return iteration_open_; }
  void BeginStep(uint32_t graph_id) override;
  uint64_t CurrentIteration() const override { return iteration_; }
  bool StepDumps() const override { return step_dumps_ && !failed_ && !InChild(); }
  using DumpSession::Wants;
  bool Wants(uint32_t graph_id, uint32_t index) const override;
  void OnKernelDone(const KernelInfo& kernel, const std::vector<TensorView>& inputs,
                    const std::vector<TensorView>& outputs) override;
  bool ReadsInput(const KernelInfo& kernel, const TensorView& input) override;
  bool ReadInputNow(const KernelInfo& kernel, const TensorView& input) override;
  void BeforeWrite(const void* storage) override;
  void FinishReads() override;
  bool ReadsQueued() const override;
  bool KeepsStatisticsAcrossSteps() const override;
  void DeferReads(bool defer) override;
  void ForgetStatistics(const void* storage) override;
  void ForgetAllStatistics() override { stats_cache_.Clear(); }
  void OnTensorNotDumped(const KernelInfo& kernel, bool input, uint32_t slot,
                         const std::string& why) override;
  void OnKernelFailed(const KernelInfo& kernel, const std::vector<TensorView>& inputs,
                      const std::string& error) override;
  bool WantsParameters() const override;
  void OnParameter(uint32_t graph_id, const std::string& name, const TensorView& value) override;
  void OnConstant(uint32_t graph_id, uint32_t index, const TensorView& value) override;
  void EndStep(uint32_t graph_id) override;
  void SetDump(const std::string& module_path) override;
  void OnRunFailed(const std::string& reason) override;
  Status Close() override;
  DumpSummary Summary() const override;
  const DumpConfig& config() const override { return config_; }

 private:
  // A C-order copy of a tensor in a pooled buffer, for a queued write.
  struct QueuedCopy {
    BufferPool::Buffer buffer;
    TensorView view;  // over `buffer`
  };

  // Lifecycle (session.cc).
  // The `kernels` entries that selected no kernel that was dumped: a kernel in a branch that
  // never ran (the `inplace` branch of F.relu), or that ran in no dumped iteration, does not
  // count. As MindSpore, which counts an entry when it dumps a kernel.
  std::vector<std::string> UnusedEntries() const;
  void Log(const std::string& message) const;
  // A forked child of the process that opened this session.
  bool InChild() const { return g_forks.load(std::memory_order_relaxed) != forks_at_open_; }
  void StartIteration();
  // Ends the iteration: its statistic rows, and the next iteration number.
  void FinishIteration();
  // Graph files (session_graph_files.cc): queued for graph_files_ from a copy of the graph,
  // written and compared with what the files hold there; FinishGraphFiles waits for them.
  class GraphFiles;
  void WriteGraphFiles(GraphState& state);
  void WriteGraphFilesNow(const GraphInfo& graph, GraphState::WrittenFiles& written);
  void FinishGraphFiles();
  // One run per directory. A session holds the lock `.{rank dir}.lock` beside its rank
  // directory while it runs; with it, the rank directory is made by this session (mkdir), or it
  // is an earlier run's and is refused, or (overwrite) renamed aside in one step, replaced by a
  // new one and then deleted. A rank directory whose lock another live process holds is that
  // run's: refused, overwrite or not, and left as it is.
  Status ClaimRoot();

  // Failures (session_failures.cc).
  Status FirstError();
  // The first write error stops all dumping; it is reported once and marked on disk.
  void Fail(const Status& status);
  std::string IncompletePath() const { return root_ + "/.dump_metadata/INCOMPLETE"; }

  // Naming (session_naming.cc).
  bool EnsureDir(const std::string& dir);
  // IterationDir of `graph_id` and the current iteration, made once per graph and iteration.
  const std::string& IterationDirOf(uint32_t graph_id);
  // The file-form op type and op name of `kernel` (SanitizeName), made once per kernel.
  const GraphState::FileNames& FileNamesOf(const KernelInfo& kernel);
  // A basename longer than 255 bytes becomes "{n}{ext}" and is listed in mapping.csv.
  std::string FileNameIn(const std::string& dir, const std::string& basename, const char* ext);
  // The next free `{n}{ext}` of `dir`, for a basename too long to be a file name. With
  // `names_a_file` false (a statistic row's name: no file is written under it), the numbers
  // this session gave in `dir` are all it must skip, and the disk is not asked.
  std::string MappedName(const std::string& dir, const char* ext, bool names_a_file = true);

  // Emission (session_emit.cc).
  void DumpKernel(const KernelInfo& kernel, const std::vector<TensorView>* inputs,
                  const std::vector<TensorView>* outputs);
  // kernel_file_ set for the files of a call of `kernel` made at `timestamp`.
  TensorFileName& KernelFile(const KernelInfo& kernel, const GraphState::FileNames& names,
                             uint64_t timestamp);
  // ReadInputNow of a tensor dump: writes the file of `input`, which `kernel` is about to
  // write in place, now (under the name DumpKernel will give it; the writer threads get a copy
  // taken now), where the dump writes every call it wants as .npy files; false where the host
  // must copy it instead.
  bool WriteInputNow(const KernelInfo& kernel, const TensorView& input);
  // file_format "bin": one Ascend dump file per kernel with its inputs and outputs
  // (docs/ascend.md).
  void EmitAscendFile(const std::string& dir, const TensorFileName& file,
                      const std::string& full_name, const std::vector<TensorView>* inputs,
                      const std::vector<TensorView>* outputs);
  QueuedCopy Copy(const TensorView& view);
  // Writes (or queues) one tensor file and, with `statistics`, its statistic.csv row. Sets
  // `file`'s dtype (and, for a .npy file, its format) to `original`'s: a kernel's tensors
  // share one TensorFileName.
  void EmitTensor(const std::string& dir, TensorFileName& file, const TensorView& original,
                  bool statistics, bool allow_npy = true);
  // Writes one tensor; returns its statistics unless the write failed. `file`, when given, is
  // told whether the file was written.
  std::optional<NanPropagatingStats> WriteOne(const std::string& path, const TensorView& view,
                                              const TensorWriteOptions& options,
                                              const StatRowInfo& row, StepDir* sd, uint64_t seq,
                                              WrittenFiles::File* file = nullptr);
  // Counts the statistics of `view` as computed (DumpSummary).
  void CountStatistics(const TensorView& view) {
    ++statistics_computed_;
    statistics_bytes_ += DTypeStorageBytes(view.dtype, view.NumElements());
  }
  // Dumps a tensor whose bytes the file `source` holds (or will, once its queued write has
  // run) under the new name `path`: a second name for that file, or a copy of it where the file
  // system has no hard links. Its statistic row, if any, is made now (ReduceStatistics).
  void LinkTensor(std::shared_ptr<WrittenFiles::File> source, const std::string& path,
                  const TensorView& view, TensorWriteOptions options, const StatRowInfo& row,
                  StepDir* sd, uint64_t seq);

  // Statistic rows (session_statistics.cc).
  // EmitTensor of a statistic-only tensor (no .npy): its row, reduced at once.
  void EmitStatisticRow(const std::string& dir, const TensorFileName& file,
                        const TensorView& original, const TensorWriteOptions& options);
  StepDir* StepDirFor(const std::string& dir);
  // What a statistic-only row without md5 reduces: the bytes in storage order. Whatever
  // trans_flag made of the file's view, its storage order is the original's (StorageOrderView
  // of a storage-ordered view is that view).
  static TensorView StatisticOnlyView(const TensorView& original);
  // The bytes a statistic-only row of `input` reduces (no md5): `input` itself when it is in
  // storage order, else its StatisticOnlyView, made in `reordered`.
  static const TensorView& StatisticBytes(const TensorView& input, TensorView* reordered);
  // The statistic row of a tensor (`options` without the .npy), reduced from memory unless the
  // same bytes were reduced already in this step. False when the dump has stopped.
  // With `may_defer`, a view the worker can read (Defers) is queued instead.
  bool ReduceStatistics(const std::string& path, const TensorView& view,
                        const TensorWriteOptions& options, const StatRowInfo& row, StepDir* sd,
                        uint64_t seq, bool may_defer = false);
  void AddStatisticRow(const StatRowInfo& row, const NanPropagatingStats& stats, StepDir* sd,
                       uint64_t seq);
  // Deferred rows (session_deferred.cc; SessionOptions::reads_in_background): a row whose
  // bytes were not reduced yet reduces them into its StatsCell; one found in the cache waits
  // for its cell in the queue.
  class DeferredRows;  // an OrderedWorker task: the rows of one or more kernels
  // A row of the batch that is worker task `task` (0: none). The batch lives while `task` has
  // not run, and until the host's thread next submits, waits or releases after that.
  struct QueuedRow {
    uint64_t task = 0;
    DeferredRows* batch = nullptr;
    uint32_t row = 0;
  };
  // A batch is handed to the worker once it reads this many bytes or holds this many rows (or
  // when a write, FinishReads or the step's end needs it run): small, so that the tensors it
  // holds go back to the allocator while their memory is still in cache.
  static constexpr size_t kDeferredBatchBytes = size_t{256} << 10;
  static constexpr size_t kDeferredBatchRows = 16;
  // Does this process reduce statistics on the worker (reads_in_background)? A forked child
  // (a DataLoader worker) has no worker thread: what was queued is the parent's.
  bool ReadsOnWorker() const { return reads_ && !InChild(); }
  // Can `view`'s statistics be reduced on the worker? It must stay alive (keep_alive) and be
  // known by its allocation (BeforeWrite).
  bool Defers(const TensorView& view) const {
    return ReadsOnWorker() && defer_reads_ && view.keep_alive && view.origin.storage;
  }
  // Queues the row `row` of `view` into the batch: reduced into `cell` when `reduce`, else
  // made from `cell` once an earlier row has filled it.
  void DeferRow(const TensorView& view, const StatRowInfo& row, StepDir* sd, uint64_t seq,
                std::shared_ptr<StatsCell> cell, bool reduce);
  // The worker, which hands the batches that have run back to spare_batches_.
  std::unique_ptr<OrderedWorker> MakeReadWorker();
  static constexpr size_t kSpareBatches = 64;
  // Hands the batch to the worker (with `when_full`, only once it is as large as a batch gets).
  void SubmitDeferredRows(bool when_full = false);
  // On the worker.
  void RunDeferredRows(DeferredRows& batch);
  // Reduces the queued rows that read the allocation whose last one is `last`, on this (the
  // host's) thread, except those the worker has taken, which it waits for.
  void TakeQueuedRows(QueuedRow last);
  // Reduces row `index` of `batch` (taken by this thread) into its cell and statistic row,
  // through this thread's `row` and `view`.
  void ReduceDeferredRow(const DeferredRows& batch, size_t index, StatRowInfo& row,
                         TensorView& view);
  // Has the worker write the statistic.csv files of `dirs`, iteration directories of a step
  // that has ended, once the rows queued before are in.
  class StepFiles;
  void QueueStepFiles(std::vector<std::unique_ptr<StepDir>> dirs);
  void FinishPending(StepDir* sd);
  // REQUIRES: mu_ held.
  std::unique_ptr<StepDir> TakeStepDir(const std::string& dir);
  // Marks every open iteration directory ended; those with no pending writes are flushed now
  // (by the worker, after the rows queued, when reads are in the background), the others by
  // the writer thread that finishes their last tensor.
  void EndStepDirs();
  // Also after a failure: the rows are those of tensors written (or reduced) before it.
  void FlushStatistics(const StepDir& sd);

  const SessionOptions options_;
  const DumpConfig& config_;
  const StatsRequest statistic_request_;  // what statistic_category needs (StatsRequest::For)
  std::unique_ptr<Selector> selector_;
  std::shared_ptr<FileSystem> fs_;
  const std::string root_;
  BufferPool buffers_;  // before async_: its queued jobs hold buffers until they have run
  std::unique_ptr<AsyncWriter> async_;

  // Executor-thread state.
  std::map<uint32_t, GraphState> graphs_;
  std::unordered_set<std::string> created_dirs_;
  std::map<std::string, uint64_t> mapping_counters_;
  // For kernels and graphs that graphs_ does not hold (IterationDirOf, FileNamesOf).
  std::string unregistered_dir_;
  GraphState::FileNames unregistered_names_;
  uint64_t steps_completed_ = 0;
  uint64_t iteration_ = 0;
  uint32_t step_graph_ = 0;
  bool step_dumps_ = false;
  bool iteration_open_ = false;  // BeginIteration without EndIteration yet
  bool step_open_ = false;       // StartIteration without FinishIteration yet
  uint32_t overflow_kernels_ = 0;
  uint64_t next_seq_ = 0;
  bool closed_ = false;
  const uint64_t forks_at_open_ = g_forks.load();
  bool created_root_ = false;       // ClaimRoot made the rank directory
  std::unique_ptr<FileLock> lock_;  // held from ClaimRoot until the session ends
  bool run_failed_ = false;         // OnRunFailed: INCOMPLETE stays
  StatsCache stats_cache_;          // statistic-only tensors reduced in this step (and the last)
  // Allocations reported written since the last step ended (BeforeWrite), while stats_cache_
  // holds that step's statistics: forgotten when the next step begins.
  std::unordered_set<const void*> written_between_steps_;
  WrittenFiles written_files_;      // tensor files of this step, by the bytes they hold
  // Tensors said not to be dumped (OnTensorNotDumped): (graph, kernel index, input, slot).
  std::set<std::tuple<uint32_t, uint32_t, bool, uint32_t>> not_dumped_said_;
  // EmitStatisticRow's path and row, reused from row to row (their buffers stay allocated).
  std::string statistic_path_;
  StatRowInfo statistic_row_;
  TensorFileName kernel_file_;  // DumpKernel's
  // Calls whose inputs had their files written before the call wrote them in place
  // (WriteInputNow), by (graph, kernel index): the call's timestamp and those inputs' slots,
  // which DumpKernel then leaves out. A call that never ends (it failed) is forgotten with the
  // step.
  struct EarlyInputs {
    uint64_t timestamp = 0;
    std::vector<int32_t> slots;
  };
  std::map<std::pair<uint32_t, uint32_t>, EarlyInputs> early_inputs_;
  // The StepDir StepDirFor gave last; reset by EndStepDirs, after which it may be freed.
  StepDir* last_step_dir_ = nullptr;

  // Deferred reads (reads_in_background): the kernel's rows not handed to the worker yet,
  // whether rows may be deferred now (DeferReads), and by allocation the last queued row that
  // reduces its bytes (BeforeWrite reduces those the worker has not taken yet).
  std::unique_ptr<OrderedWorker::Task> batch_;  // a DeferredRows
  std::vector<std::unique_ptr<OrderedWorker::Task>> spare_batches_;  // emptied DeferredRows
  bool defer_reads_ = true;
  std::unordered_map<const void*, QueuedRow> read_by_;
  // The view and row a deferred row is rebuilt into (their buffers reused): the worker's, and
  // the host thread's for the rows it takes (BeforeWrite).
  TensorView worker_view_, host_view_;
  StatRowInfo worker_row_, host_row_;

  // Shared with writer threads.
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<StepDir>> step_dirs_;
  // Tensors queued without a copy (host_reports_writes), by allocation: BeforeWrite waits for
  // them. unwritten_count_ lets BeforeWrite skip the lock when nothing is queued.
  std::unordered_map<const void*, uint32_t> unwritten_;
  std::atomic<uint64_t> unwritten_count_{0};
  std::condition_variable written_;
  std::atomic<bool> failed_{false};
  Status first_error_;
  std::atomic<uint64_t> files_{0}, bytes_{0}, kernels_dumped_{0}, statistic_rows_{0};
  std::atomic<uint64_t> statistics_computed_{0}, statistics_bytes_{0};  // DumpSummary's
  // Writes the files of ended steps that reads_ hands over (StepFiles); joined after reads_.
  // step_files_queued_ counts the steps queued (on either) and not yet written.
  std::atomic<uint32_t> step_files_queued_{0};
  std::unique_ptr<OrderedWorker> step_files_;
  // Writes the graph files (GraphFiles tasks); graph_dirs_made_: their directories exist.
  std::unique_ptr<OrderedWorker> graph_files_;
  bool graph_dirs_made_ = false;
  // Last: its tasks use the members above, so it is joined first.
  std::unique_ptr<OrderedWorker> reads_;
};

}  // namespace graphdump::session_internal
