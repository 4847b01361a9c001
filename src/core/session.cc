// DumpSession: selection, naming and writing of a dump (docs/layout.md). See session.h for the
// hooks.
#include "graphdump/session.h"

#include <fmt/format.h>
#include <pthread.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "graphdump/ge_dialect.h"
#include "graphdump/graph_files.h"
#include "graphdump/internal/ascend_writer.h"
#include "graphdump/internal/async_writer.h"
#include "graphdump/internal/written_files.h"
#include "graphdump/internal/buffer_pool.h"
#include "graphdump/internal/json_text.h"
#include "graphdump/internal/stats_cache.h"
#include "graphdump/internal/tensor_writer.h"
#include "graphdump/layout.h"
#include "graphdump/selector.h"
#include "graphdump/stats.h"

namespace graphdump {
namespace {

// The statistic rows of one iteration directory, kept in submission order so that synchronous
// and asynchronous dumps write identical statistic.csv files.
struct StepDir {
  std::string dir;
  std::map<uint64_t, std::string> rows;  // sequence number -> row
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
  std::array<std::optional<std::string>, 3> written;
};

// For trans_flag false: the view in the order its elements are stored (dimensions sorted by
// decreasing stride), and the name of that layout.
TensorView StorageOrderView(const TensorView& view, std::string* format) {
  *format = kDefaultFormat;
  if (view.strides.empty() || view.IsContiguous()) return view;
  std::vector<size_t> perm(view.shape.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(),
                   [&](size_t a, size_t b) { return view.strides[a] > view.strides[b]; });
  TensorView out = view;
  for (size_t i = 0; i < perm.size(); ++i) {
    out.shape[i] = view.shape[perm[i]];
    out.strides[i] = view.strides[perm[i]];
  }
  const std::vector<size_t> nhwc = {0, 2, 3, 1}, ndhwc = {0, 2, 3, 4, 1};
  if (perm == nhwc) {
    *format = "NHWC";
  } else if (perm == ndhwc) {
    *format = "NDHWC";
  } else {
    *format = "Permuted";
    for (size_t p : perm) *format += fmt::format("_{}", p);
  }
  return out;
}

bool HasNonFiniteView(const TensorView& view) {
  if (!IsFloatingPoint(view.dtype) && !IsComplex(view.dtype)) return false;
  bool found = false;
  const size_t item = DTypeBits(view.dtype) / 8;
  ForEachContiguousChunk(view, size_t{1} << 20, [&](const uint8_t* p, size_t n) {
    if (!found) found = HasNonFinite(view.dtype, p, static_cast<int64_t>(n / item));
  });
  return found;
}

// rank_{r} in MindSpore's layout; {YYYYMMDDhhmmss}/{device_id} in the GE layout, whose model
// directories {net_name}/{graph_id}/{iteration} then follow exactly as in MindSpore's.
// The directory holding `path`, and `path`'s last component ("a/b/rank_0": "a/b", "rank_0").
std::string ParentOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}
std::string LastComponent(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string RootDir(const DumpConfig& config, uint32_t rank) {
  if (!config.ge_layout) return RankDir(config.path, rank);
  GeLayout layout{config.path, GeTimestampDirName(std::chrono::system_clock::now()), rank, ""};
  return fmt::format("{}/{}/{}", layout.dump_path, layout.timestamp, rank);
}

// Forks so far in this process's line: a session made before the last fork belongs to the
// parent, and in the child it dumps, writes, drains and removes nothing (its writer threads do
// not exist there). pthread_atfork's child handler counts them.
std::atomic<uint64_t> g_forks{0};

void CountForksOnce() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, [] { ++g_forks; }); });
}

class SessionImpl final : public DumpSession {
 public:
  SessionImpl(SessionOptions options, std::unique_ptr<Selector> selector)
      : options_(std::move(options)),
        config_(options_.config),
        selector_(std::move(selector)),
        fs_(options_.file_system ? options_.file_system
                                 : NewPosixFileSystem(/*fsync=*/false, config_.path)),
        root_(RootDir(config_, options_.rank)),
        buffers_(std::max<size_t>(1, options_.queue_bytes)) {
    CountForksOnce();
    if (!config_.enable) {
      async_ = std::make_unique<AsyncWriter>(std::max(1, options_.writer_threads),
                                             std::max<size_t>(1, options_.queue_bytes));
    }
  }

  ~SessionImpl() override {
    if (InChild()) {
      (void)async_.release();  // its threads live in the parent: nothing to join or drain here
      return;
    }
    (void)Close();
  }

  Status Start() {
    GRAPHDUMP_RETURN_IF_ERROR(ClaimRoot());
    GRAPHDUMP_RETURN_IF_ERROR(fs_->CreateDirectories(root_ + "/.dump_metadata"));
    const std::string copy = root_ + "/.dump_metadata/data_dump.json";
    if (!fs_->Exists(copy)) {
      GRAPHDUMP_RETURN_IF_ERROR(fs_->WriteWholeFile(
          copy, config_.source_bytes.empty() ? ConfigToJson(config_) : config_.source_bytes));
    }
    const std::string meta = root_ + "/.dump_metadata/config.json";
    if (!fs_->Exists(meta)) {
      nlohmann::ordered_json j;
      j["device_target"] = options_.device_target;
      j["graphdump_version"] = GRAPHDUMP_VERSION;
      GRAPHDUMP_RETURN_IF_ERROR(fs_->WriteWholeFile(meta, internal::JsonText(j, 4) + "\n"));
    }
    // Written now, while the disk has room, and removed by a clean Close: whatever stops the
    // run (a kill, a full disk) leaves it in place.
    return fs_->WriteWholeFile(
        IncompletePath(),
        fmt::format("This dump is incomplete: graphdump (process {}) was still writing it, or was "
                    "stopped before it finished (killed, or the machine stopped). Every file "
                    "under its final name is complete; later tensors and statistic rows are "
                    "missing.\n",
                    ::getpid()));
  }

  // Start refused the dump path (another run's): the session ends without touching it.
  void Refused() { closed_ = true; }

  // Start failed with `why`: the rank directory this session made is removed; one it did not
  // make (an earlier run's, replaced with overwrite) keeps an INCOMPLETE saying why, where it can.
  // The session then ends without a word: it never dumped.
  void AbandonStart(const Status& why) {
    closed_ = true;
    if (created_root_ && fs_->RemoveTree(root_).ok()) return;
    if (fs_->CreateDirectories(root_ + "/.dump_metadata").ok()) {
      (void)fs_->WriteWholeFile(IncompletePath(),
                                "This dump was never started: " + why.message() + "\n");
    }
  }

  Status OnGraphCompiled(const GraphInfo& graph) override {
    if (graphs_.count(graph.graph_id)) {
      return Status::InvalidArgument(
          fmt::format("graph id {} was already registered with this session", graph.graph_id));
    }
    GraphState& state = graphs_[graph.graph_id];
    state.info = graph;
    for (uint32_t i = 0; i < state.info.kernels.size(); ++i) {
      state.info.kernels[i].index = i;
      state.info.kernels[i].graph_id = graph.graph_id;
    }
    state.selected.resize(state.info.kernels.size());
    for (const KernelInfo& k : state.info.kernels) {
      state.selected[k.index] = selector_->KernelSelected(k);
    }
    WriteGraphFiles(state);
    return Status::Ok();
  }

  KernelInfo AddKernel(uint32_t graph_id, KernelInfo kernel) override {
    GraphState& state = graphs_.at(graph_id);
    kernel.graph_id = graph_id;
    kernel.index = static_cast<uint32_t>(state.info.kernels.size());
    state.selected.push_back(selector_->KernelSelected(kernel));
    state.info.kernels.push_back(kernel);
    state.files_dirty = true;
    return kernel;
  }

  void UpdateKernels(uint32_t graph_id, const std::vector<KernelInfo>& kernels) override {
    GraphState& state = graphs_.at(graph_id);
    for (size_t i = 0; i < kernels.size() && i < state.info.kernels.size(); ++i) {
      KernelInfo& k = state.info.kernels[i];
      k.inputs = kernels[i].inputs;
      k.outputs = kernels[i].outputs;
      k.marked_for_dump = kernels[i].marked_for_dump;
      k.not_run = kernels[i].not_run;
      state.selected[i] = selector_->KernelSelected(k);
    }
    state.files_dirty = true;
  }

  void BeginIteration() override {
    if (iteration_open_ || InChild()) return;
    StartIteration();
    iteration_open_ = true;
  }

  void EndIteration() override {
    if (!iteration_open_ || InChild()) return;
    iteration_open_ = false;
    for (auto& [id, state] : graphs_) {
      if (state.files_dirty) WriteGraphFiles(state);
    }
    FinishIteration();
  }

  bool IterationOpen() const override { return iteration_open_; }

  void BeginStep(uint32_t graph_id) override {
    if (InChild()) return;
    step_graph_ = graph_id;
    if (!iteration_open_) StartIteration();
  }

  uint64_t CurrentIteration() const override { return iteration_; }
  bool StepDumps() const override { return step_dumps_ && !failed_ && !InChild(); }

  bool Wants(const KernelInfo& kernel) const override {
    if (!StepDumps() || config_.op_debug_mode == 4) return false;
    auto it = graphs_.find(kernel.graph_id);
    return it != graphs_.end() && kernel.index < it->second.selected.size() &&
           it->second.selected[kernel.index];
  }

  void OnKernelDone(const KernelInfo& kernel, const std::vector<TensorView>& inputs,
                    const std::vector<TensorView>& outputs) override {
    if (!Wants(kernel)) return;
    if (config_.op_debug_mode == 3) {
      if (config_.overflow_number != 0 && overflow_kernels_ >= config_.overflow_number) return;
      bool overflow = false;
      for (const TensorView& t : outputs) overflow = overflow || HasNonFiniteView(t);
      if (!overflow) return;
      ++overflow_kernels_;
    }
    DumpKernel(kernel, selector_->DumpInputs() ? &inputs : nullptr,
               selector_->DumpOutputs() ? &outputs : nullptr);
  }

  bool ReadsInput(const KernelInfo& kernel, const TensorView& input) override {
    if (!Wants(kernel) || !selector_->DumpInputs()) return false;
    if (config_.saved_data != SavedData::kStatistic || input.device != "cpu") return true;
    const StatsRequest request = StatsRequest::For(config_.statistic_category);
    return request.md5 || stats_cache_.Find(StatisticOnlyView(input), request) == nullptr;
  }

  void BeforeWrite(const void* storage) override {
    if (unwritten_count_.load() == 0 || storage == nullptr) return;
    std::unique_lock<std::mutex> lock(mu_);
    written_.wait(lock, [&] { return unwritten_.count(storage) == 0; });
  }

  void ForgetStatistics(const void* storage) override {
    stats_cache_.Forget(storage);
    written_files_.Forget(storage);
  }

  void OnKernelFailed(const KernelInfo& kernel, const std::vector<TensorView>& inputs,
                      const std::string& error) override {
    if (config_.op_debug_mode != 4 || failed_ || InChild()) return;
    Log(fmt::format("kernel {} failed; dumping its inputs: {}", kernel.full_name, error));
    DumpKernel(kernel, &inputs, nullptr);
  }

  bool WantsParameters() const override {
    return StepDumps() && config_.op_debug_mode == 0 && !config_.ge_layout;
  }

  void OnParameter(uint32_t graph_id, const std::string& name, const TensorView& value) override {
    if (!WantsParameters()) return;
    TensorFileName file;
    file.op_type = "Parameter";
    file.op_name = SanitizeName(name);
    file.timestamp = NowMicros();
    file.dtype = std::string(DTypeName(value.dtype));
    const std::string dir = IterationDir(root_, config_.net_name, graph_id, iteration_);
    EmitTensor(dir, file, value, /*statistics=*/true);
  }

  void OnConstant(uint32_t graph_id, uint32_t index, const TensorView& value) override {
    if (failed_ || InChild() || config_.saved_data == SavedData::kStatistic || config_.ge_layout) {
      return;
    }
    TensorFileName file;
    file.op_type = "Parameter";
    file.op_name = fmt::format("data-{}", index);
    file.timestamp = NowMicros();
    file.dtype = std::string(DTypeName(value.dtype));
    EmitTensor(ConstantsDir(root_, config_.net_name, graph_id), file, value, /*statistics=*/false);
  }

  void EndStep(uint32_t graph_id) override {
    if (InChild()) return;
    auto it = graphs_.find(graph_id);
    if (it != graphs_.end() && it->second.files_dirty) WriteGraphFiles(it->second);
    if (!failed_) {
      const std::string order = GlobalExecutionOrderPath(root_, graph_id);
      Status st = fs_->AppendToFile(order, fmt::format("{}\n", iteration_));
      if (!st.ok()) Fail(st);
    }
    if (!iteration_open_) FinishIteration();
  }

  void SetDump(const std::string& module_path) override {
    selector_->SetDump(module_path);
    for (auto& [id, state] : graphs_) {
      for (const KernelInfo& k : state.info.kernels) {
        state.selected[k.index] = selector_->KernelSelected(k);
      }
    }
  }

  void OnRunFailed(const std::string& reason) override {
    if (closed_ || run_failed_ || InChild()) return;
    run_failed_ = true;
    Status marker = fs_->AppendToFile(
        IncompletePath(),
        "The run stopped with an error, so the dump ends there: " + reason + "\n");
    if (!marker.ok()) Log("could not write the INCOMPLETE marker: " + marker.message());
  }

  Status Close() override {
    if (InChild()) {
      closed_ = true;  // the parent's dump: it closes it
      return Status::Ok();
    }
    if (closed_) return FirstError();
    EndIteration();
    closed_ = true;
    EndStepDirs();
    if (async_) async_->Drain();
    for (const std::string& entry : UnusedEntries()) Log("unused kernel in config: " + entry);
    if (!failed_ && !run_failed_) {
      Status removed = fs_->Remove(IncompletePath());
      if (!removed.ok()) Fail(removed);
    }
    lock_.reset();  // another run may take the directory over now (--overwrite)
    return FirstError();
  }

  DumpSummary Summary() const override {
    DumpSummary s;
    s.root = root_;
    s.files = files_;
    s.bytes = bytes_;
    s.kernels_dumped = kernels_dumped_;
    s.statistic_rows = statistic_rows_;
    s.unused_kernel_entries = UnusedEntries();
    return s;
  }

  const DumpConfig& config() const override { return config_; }

 private:
  // The `kernels` entries that selected no kernel that was dumped: a kernel in a branch that
  // never ran (the `inplace` branch of F.relu), or that ran in no dumped iteration, does not
  // count. As MindSpore, which counts an entry when it dumps a kernel.
  std::vector<std::string> UnusedEntries() const {
    Selector dumped(config_);
    for (const auto& [id, state] : graphs_) {
      for (const KernelInfo& k : state.info.kernels) {
        if (k.index < state.dumped.size() && state.dumped[k.index]) dumped.KernelSelected(k);
      }
    }
    return dumped.UnusedEntries();
  }

  void Log(const std::string& message) const {
    if (options_.log) {
      options_.log(message);
    } else {
      std::fprintf(stderr, "graphdump: %s\n", message.c_str());
    }
  }

  Status FirstError() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_error_;
  }

  // The first write error stops all dumping; it is reported once and marked on disk.
  // A forked child of the process that opened this session.
  bool InChild() const { return g_forks.load(std::memory_order_relaxed) != forks_at_open_; }

  void Fail(const Status& status) {
    if (InChild()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (failed_) return;
      failed_ = true;
      first_error_ = status;
    }
    Log(
        fmt::format("dumping stopped: {}. Files written before this error are complete; "
                    "nothing more is dumped in this run (see {}/.dump_metadata/INCOMPLETE).",
                    status.message(), root_));
    // Appended to the marker Start wrote: its last block has room for a few lines, so this
    // needs no new space on a full disk.
    const std::string text = fmt::format(
        "graphdump stopped dumping (the run was at iteration {}).\nerror: {}\nEvery file under "
        "its final name is complete; tensors after this error were not written.\n",
        iteration_, status.message());
    Status marker = fs_->AppendToFile(IncompletePath(), text);
    if (!marker.ok()) Log("could not write the INCOMPLETE marker: " + marker.message());
  }

  void StartIteration() {
    iteration_ = config_.initial_iteration + steps_completed_;
    step_dumps_ = !failed_ && selector_->IterationDumps(iteration_);
  }

  // Ends the iteration: its statistic rows, and the next iteration number.
  void FinishIteration() {
    EndStepDirs();
    stats_cache_.EndStep(options_.stats_across_steps);
    written_files_.Clear();
    ++steps_completed_;
    step_dumps_ = false;
  }

  std::string IncompletePath() const { return root_ + "/.dump_metadata/INCOMPLETE"; }

  // One run per directory. A session holds the lock `.{rank dir}.lock` beside its rank
  // directory while it runs; with it, the rank directory is made by this session (mkdir), or it
  // is an earlier run's and is refused, or (overwrite) renamed aside in one step, replaced by a
  // new one and then deleted. A rank directory whose lock another live process holds is that
  // run's: refused, overwrite or not, and left as it is.
  Status ClaimRoot() {
    const std::string parent = ParentOf(root_), base = LastComponent(root_);
    GRAPHDUMP_RETURN_IF_ERROR(fs_->CreateDirectories(parent));
    std::string holder;
    GRAPHDUMP_ASSIGN_OR_RETURN(lock_, fs_->TryLock(parent + "/." + base + ".lock", &holder));
    if (!lock_) {
      return Status::InvalidArgument(fmt::format(
          "{} is being written by another run now ({}): graphdump writes one run per directory "
          "and replaces no dump that a live run holds, --overwrite or not; wait for that run to "
          "end, or dump elsewhere (docs/layout.md)",
          root_, holder.empty() ? "its process id is not recorded" : holder));
    }
    GRAPHDUMP_ASSIGN_OR_RETURN(bool created, fs_->CreateDirectoryIfAbsent(root_));
    if (!created && options_.overwrite) {
      // Renamed aside first: the path holds the whole earlier dump or the new run's, never a
      // half-deleted one.
      std::string aside;
      Status renamed;
      for (int n = 0; n < 100; ++n) {  // a name a crashed run of the same pid left is skipped
        aside = fmt::format("{}/.{}.replaced.{}.{}", parent, base, ::getpid(), n);
        renamed = fs_->Rename(root_, aside);
        if (renamed.ok() || !fs_->Exists(aside)) break;
      }
      GRAPHDUMP_RETURN_IF_ERROR(renamed);
      GRAPHDUMP_ASSIGN_OR_RETURN(created, fs_->CreateDirectoryIfAbsent(root_));
      if (Status removed = fs_->RemoveTree(aside); !removed.ok()) {
        Log("warning: the replaced dump could not be deleted: " + removed.message());
      }
    }
    created_root_ = created;
    if (created) return Status::Ok();
    // A symbolic link in its place is named as such (and never followed).
    GRAPHDUMP_RETURN_IF_ERROR(fs_->CreateDirectories(root_));
    return Status::InvalidArgument(fmt::format(
        "{} already exists: an earlier run dumped there (or another run is dumping there now). "
        "graphdump writes one run per directory so that runs never mix; {} (docs/layout.md)",
        root_,
        options_.retry_hint.empty()
            ? std::string("remove it, or dump elsewhere (the configuration's path)")
            : options_.retry_hint));
  }

  void WriteGraphFiles(GraphState& state) {
    state.files_dirty = false;
    if (failed_ || InChild()) return;
    const GraphInfo& g = state.info;
    Status st = fs_->CreateDirectories(root_ + "/graphs");
    if (st.ok()) st = fs_->CreateDirectories(root_ + "/execution_order");
    auto write = [&](size_t slot, const std::string& path, std::string text) {
      if (!st.ok() || state.written[slot] == text) return;
      st = fs_->WriteWholeFile(path, text);
      if (st.ok()) state.written[slot] = std::move(text);
    };
    write(0, GraphFilePath(root_, g.graph_id, "ir"),
          g.ir_text.empty() ? GenerateIrText(g) : g.ir_text);
    write(1, GraphFilePath(root_, g.graph_id, "pb"), SerializeGraphProto(g));
    write(2, ExecutionOrderPath(root_, g.graph_id), ExecutionOrderCsv(g));
    if (!st.ok()) Fail(st);
  }

  bool EnsureDir(const std::string& dir) {
    if (created_dirs_.count(dir)) return true;
    Status st = fs_->CreateDirectories(dir);
    if (!st.ok()) {
      Fail(st);
      return false;
    }
    created_dirs_.insert(dir);
    return true;
  }

  // A basename longer than 255 bytes becomes "{n}{ext}" and is listed in mapping.csv.
  std::string FileNameIn(const std::string& dir, const std::string& basename, const char* ext) {
    if (basename.size() <= kMaxBasenameBytes) return basename;
    uint64_t& counter = mapping_counters_[dir];
    std::string mapped;
    do {
      mapped = fmt::format("{}{}", counter++, ext);
    } while (fs_->Exists(dir + "/" + mapped));
    Status st = fs_->AppendToFile(dir + "/mapping.csv", mapped + "," + basename + "\n");
    if (!st.ok()) Fail(st);
    return mapped;
  }

  void DumpKernel(const KernelInfo& kernel, const std::vector<TensorView>* inputs,
                  const std::vector<TensorView>* outputs) {
    const std::string dir = IterationDir(root_, config_.net_name, kernel.graph_id, iteration_);
    TensorFileName file;
    file.op_type = SanitizeName(kernel.op_type.empty() ? OpTypeFromFullName(kernel.full_name)
                                                       : kernel.op_type);
    if (config_.ge_layout && GeSkipsOpType(file.op_type)) return;
    if (auto graph = graphs_.find(kernel.graph_id); graph != graphs_.end()) {
      std::vector<uint8_t>& dumped = graph->second.dumped;
      if (kernel.index >= dumped.size()) dumped.resize(kernel.index + 1);
      dumped[kernel.index] = 1;
    }
    file.op_name = SanitizeName(kernel.full_name);
    file.stream_id = kernel.stream_id;
    file.timestamp = NowMicros();
    ++kernels_dumped_;
    const bool bin = config_.file_format == "bin";
    if (bin && config_.saved_data != SavedData::kStatistic) {
      EmitAscendFile(dir, file, kernel.full_name, inputs, outputs);
    }
    for (int io = 0; io < 2; ++io) {
      const std::vector<TensorView>* list = io == 0 ? inputs : outputs;
      if (list == nullptr) continue;
      file.is_input = io == 0;
      for (uint32_t i = 0; i < list->size(); ++i) {
        const TensorView& view = (*list)[i];
        file.slot = view.slot >= 0 ? static_cast<uint32_t>(view.slot) : i;
        EmitTensor(dir, file, view, /*statistics=*/true, /*allow_npy=*/!bin);
      }
    }
    if (config_.save_kernel_args && !failed_ && EnsureDir(dir)) {
      nlohmann::ordered_json args = nlohmann::ordered_json::object();
      for (const auto& [name, value] : kernel.attributes) args[name] = value;
      const std::string name =
          FileNameIn(dir, fmt::format("{}.{}.json", file.op_type, file.op_name), ".json");
      Status st = fs_->WriteWholeFile(dir + "/" + name, internal::JsonText(args, 4) + "\n");
      if (!st.ok()) Fail(st);
    }
  }

  // file_format "bin": one Ascend dump file per kernel with its inputs and outputs
  // (docs/ascend.md).
  void EmitAscendFile(const std::string& dir, const TensorFileName& file,
                      const std::string& full_name, const std::vector<TensorView>* inputs,
                      const std::vector<TensorView>* outputs) {
    if (failed_ || !EnsureDir(dir)) return;
    const std::string base = fmt::format("{}.{}.{}.{}.{}", file.op_type, file.op_name, file.task_id,
                                         file.stream_id, file.timestamp);
    const std::string path = dir + "/" + FileNameIn(dir, base, "");
    const uint64_t time = file.timestamp;
    std::vector<TensorView> in = inputs ? *inputs : std::vector<TensorView>();
    std::vector<TensorView> out = outputs ? *outputs : std::vector<TensorView>();
    auto write = [this, path, full_name, time](const std::vector<TensorView>& i,
                                               const std::vector<TensorView>& o) {
      if (failed_) return;
      StatusOr<uint64_t> written = WriteAscendDumpFile(*fs_, path, full_name, time, i, o);
      if (!written.ok()) return Fail(written.status());
      ++files_;
      bytes_ += *written;
    };
    if (!async_) return write(in, out);
    // Asynchronous: copy now, as for .npy files.
    auto copies = std::make_shared<std::vector<QueuedCopy>>();
    size_t bytes = 1;
    for (std::vector<TensorView>* list : {&in, &out}) {
      for (TensorView& v : *list) {
        copies->push_back(Copy(v));
        v = copies->back().view;
        bytes += v.ContiguousBytes();
      }
    }
    async_->Submit(bytes, [copies, in, out, write] { write(in, out); });
  }

  // A C-order copy of a tensor in a pooled buffer, for a queued write.
  struct QueuedCopy {
    BufferPool::Buffer buffer;
    TensorView view;  // over `buffer`
  };

  QueuedCopy Copy(const TensorView& view) {
    QueuedCopy copy{buffers_.Take(view.ContiguousBytes()), TensorView{}};
    CopyContiguousTo(view, copy.buffer.data());
    copy.view.dtype = view.dtype;
    copy.view.shape = view.shape;
    copy.view.slot = view.slot;
    copy.view.data = copy.buffer.data();
    return copy;
  }

  StepDir* StepDirFor(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<StepDir>& sd = step_dirs_[dir];
    if (!sd) {
      sd = std::make_unique<StepDir>();
      sd->dir = dir;
    }
    return sd.get();
  }

  // What a statistic-only row without md5 reduces: the bytes in storage order. Whatever
  // trans_flag made of the file's view, its storage order is the original's (StorageOrderView
  // of a storage-ordered view is that view).
  static TensorView StatisticOnlyView(const TensorView& original) {
    std::string unused_format;
    return StorageOrderView(original, &unused_format);
  }

  // Writes (or queues) one tensor file and, with `statistics`, its statistic.csv row.
  void EmitTensor(const std::string& dir, TensorFileName file, const TensorView& original,
                  bool statistics, bool allow_npy = true) {
    if (failed_ || !EnsureDir(dir)) return;
    if (original.device != "cpu") {
      Log(fmt::format("skipping {}: tensor is on device '{}'; hand graphdump host tensors",
                      file.Basename(), original.device));
      return;
    }
    file.dtype = std::string(DTypeName(original.dtype));
    TensorView view = original;
    if (!config_.trans_flag) view = StorageOrderView(original, &file.format);
    const bool want_stats = statistics && config_.saved_data != SavedData::kTensor;
    TensorWriteOptions options;
    options.write_npy = allow_npy && (config_.saved_data != SavedData::kStatistic || !statistics);
    if (want_stats) options.stats = StatsRequest::For(config_.statistic_category);
    options.max_elements = config_.sample_mode == 1 ? static_cast<int64_t>(config_.sample_num) : 0;
    if (!options.write_npy && !want_stats) return;

    StatRowInfo row;
    row.op_type = file.op_type;
    row.op_name = file.op_name;
    row.task_id = file.task_id;
    row.stream_id = file.stream_id;
    row.timestamp = file.timestamp;
    row.is_input = file.is_input;
    row.slot = file.slot;
    row.data_size = view.ContiguousBytes();
    row.dtype = view.dtype;
    row.shape = view.shape;
    // Statistics other than md5 do not depend on element order: a statistic-only write of a
    // transposed or channels-last tensor reads it in storage order, which is plain memory when
    // the layout is dense (a transposed weight), instead of gathering it element by element.
    if (!options.write_npy && !options.stats->md5) view = StatisticOnlyView(original);

    const std::string path = dir + "/" + FileNameIn(dir, file.Basename(), ".npy");
    StepDir* sd = want_stats ? StepDirFor(dir) : nullptr;
    const uint64_t seq = next_seq_++;
    // A statistic-only tensor is reduced here even in asynchronous mode: reading it once costs
    // no more than the copy a queued write needs, and skips allocating and filling that copy
    // (a statistic dump of every kernel otherwise copied the whole step's tensors). Bytes
    // already reduced in this step (the previous kernel's output) are not read again.
    if (!options.write_npy) {
      ReduceStatistics(path, view, options, row, sd, seq);
      return;
    }
    // The same bytes already went to a file in this step (this is the previous kernel's output,
    // or a parameter read again): the new name is a second name for that file.
    if (std::shared_ptr<WrittenFiles::File> source =
            written_files_.Find(view, options.max_elements)) {
      return LinkTensor(std::move(source), path, view, options, row, sd, seq);
    }
    auto written = std::make_shared<WrittenFiles::File>(path);
    written_files_.Insert(view, options.max_elements, written);
    if (!async_) {
      WriteOne(path, view, options, row, sd, seq, written.get());
      return;
    }
    if (sd) {
      std::lock_guard<std::mutex> lock(mu_);
      ++sd->pending;
    }
    // Asynchronous. When the host reports its in-place writes (BeforeWrite), the tensor is
    // written from its own memory, which the view keeps alive and BeforeWrite keeps unchanged
    // until then. Otherwise it is copied now, so later in-place writes cannot change the file.
    if (options_.host_reports_writes && view.origin.storage && view.keep_alive) {
      const void* storage = view.origin.storage.get();
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++unwritten_[storage];
        unwritten_count_.fetch_add(1);
      }
      async_->Submit(view.ContiguousBytes() + 1, [=, this] {
        WriteOne(path, view, options, row, sd, seq, written.get());
        if (sd) FinishPending(sd);
        std::lock_guard<std::mutex> lock(mu_);
        if (--unwritten_[storage] == 0) unwritten_.erase(storage);
        unwritten_count_.fetch_sub(1);
        written_.notify_all();
      });
      return;
    }
    auto copy = std::make_shared<QueuedCopy>(Copy(view));
    async_->Submit(copy->view.ContiguousBytes() + 1, [=, this] {
      WriteOne(path, copy->view, options, row, sd, seq, written.get());
      if (sd) FinishPending(sd);
    });
  }

  // Writes one tensor; returns its statistics unless the write failed. `file`, when given, is
  // told whether the file was written.
  std::optional<NanPropagatingStats> WriteOne(const std::string& path, const TensorView& view,
                                              const TensorWriteOptions& options,
                                              const StatRowInfo& row, StepDir* sd, uint64_t seq,
                                              WrittenFiles::File* file = nullptr) {
    if (failed_) {
      if (file) file->Finish(std::nullopt);
      return std::nullopt;
    }
    StatusOr<TensorWriteResult> result = WriteTensor(*fs_, path, view, options);
    if (file) file->Finish(result.ok() ? std::optional(result->file_bytes) : std::nullopt);
    if (!result.ok()) {
      Fail(result.status());
      return std::nullopt;
    }
    if (result->file_bytes > 0) {
      ++files_;
      bytes_ += result->file_bytes;
    }
    if (sd) AddStatisticRow(row, result->stats, sd, seq);
    return std::move(result->stats);
  }

  // The statistic row of a tensor (`options` without the .npy), reduced from memory unless the
  // same bytes were reduced already in this step. False when the dump has stopped.
  bool ReduceStatistics(const std::string& path, const TensorView& view,
                        const TensorWriteOptions& options, const StatRowInfo& row, StepDir* sd,
                        uint64_t seq) {
    if (const NanPropagatingStats* known = stats_cache_.Find(view, *options.stats)) {
      AddStatisticRow(row, *known, sd, seq);
      return true;
    }
    std::optional<NanPropagatingStats> stats = WriteOne(path, view, options, row, sd, seq);
    if (stats) stats_cache_.Insert(view, *options.stats, *stats);
    return stats.has_value();
  }

  // Dumps a tensor whose bytes the file `source` holds (or will, once its queued write has
  // run) under the new name `path`: a second name for that file, or a copy of it where the file
  // system has no hard links. Its statistic row, if any, is made now (ReduceStatistics).
  void LinkTensor(std::shared_ptr<WrittenFiles::File> source, const std::string& path,
                  const TensorView& view, TensorWriteOptions options, const StatRowInfo& row,
                  StepDir* sd, uint64_t seq) {
    if (options.stats) {
      options.write_npy = false;
      if (!ReduceStatistics(path, view, options, row, sd, seq)) return;
    }
    auto link = [this, source, path] {
      const std::optional<uint64_t> bytes = source->Wait();
      if (!bytes || failed_) return;  // the source's own failure stopped the dump
      Status linked = fs_->LinkOrCopy(source->path(), path);
      if (!linked.ok()) return Fail(linked);
      ++files_;
      bytes_ += *bytes;
    };
    if (!async_) return link();
    async_->Submit(1, std::move(link));
  }

  void AddStatisticRow(const StatRowInfo& row, const NanPropagatingStats& stats, StepDir* sd,
                       uint64_t seq) {
    std::string line = StatisticCsvRow(row, stats, config_.statistic_category);
    std::lock_guard<std::mutex> lock(mu_);
    sd->rows.emplace(seq, std::move(line));
  }

  void FinishPending(StepDir* sd) {
    std::unique_ptr<StepDir> done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--sd->pending == 0 && sd->ended) done = TakeStepDir(sd->dir);
    }
    if (done) FlushStatistics(*done);
  }

  // REQUIRES: mu_ held.
  std::unique_ptr<StepDir> TakeStepDir(const std::string& dir) {
    auto it = step_dirs_.find(dir);
    std::unique_ptr<StepDir> sd = std::move(it->second);
    step_dirs_.erase(it);
    return sd;
  }

  // Marks every open iteration directory ended; those with no pending writes are flushed now,
  // the others by the writer thread that finishes their last tensor.
  void EndStepDirs() {
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
    for (const auto& sd : ready) FlushStatistics(*sd);
  }

  // Also after a failure: the rows are those of tensors written (or reduced) before it.
  void FlushStatistics(const StepDir& sd) {
    if (sd.rows.empty()) return;
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

  const SessionOptions options_;
  const DumpConfig& config_;
  std::unique_ptr<Selector> selector_;
  std::shared_ptr<FileSystem> fs_;
  const std::string root_;
  BufferPool buffers_;  // before async_: its queued jobs hold buffers until they have run
  std::unique_ptr<AsyncWriter> async_;

  // Executor-thread state.
  std::map<uint32_t, GraphState> graphs_;
  std::unordered_set<std::string> created_dirs_;
  std::map<std::string, uint64_t> mapping_counters_;
  uint64_t steps_completed_ = 0;
  uint64_t iteration_ = 0;
  uint32_t step_graph_ = 0;
  bool step_dumps_ = false;
  bool iteration_open_ = false;  // BeginIteration without EndIteration yet
  uint32_t overflow_kernels_ = 0;
  uint64_t next_seq_ = 0;
  bool closed_ = false;
  const uint64_t forks_at_open_ = g_forks.load();
  bool created_root_ = false;  // ClaimRoot made the rank directory
  std::unique_ptr<FileLock> lock_;  // held from ClaimRoot until the session ends
  bool run_failed_ = false;    // OnRunFailed: INCOMPLETE stays
  StatsCache stats_cache_;     // statistic-only tensors reduced in this step (and the last)
  WrittenFiles written_files_;  // tensor files of this step, by the bytes they hold

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
};

}  // namespace

StatusOr<std::unique_ptr<DumpSession>> DumpSession::Open(SessionOptions options) {
  if (options.config.net_name.empty()) {
    options.config.net_name =
        options.model_name.empty() ? std::string("graph") : SanitizeName(options.model_name);
  }
  auto selector = std::make_unique<Selector>(options.config);
  if (!selector->RankDumps(options.rank)) return std::unique_ptr<DumpSession>();
  auto session = std::make_unique<SessionImpl>(std::move(options), std::move(selector));
  Status started = session->Start();
  if (started.code() == StatusCode::kInvalidArgument) {  // e.g. an earlier run's directory
    session->Refused();
    return started;
  }
  if (!started.ok()) {
    session->AbandonStart(started);
    return Status::IOError(started.message());
  }
  return std::unique_ptr<DumpSession>(std::move(session));
}

bool DumpPathNotPrepared(const Status& open_error) {
  return open_error.code() == StatusCode::kIOError;
}

std::string DumpOffWarning(const Status& open_error) {
  return "dumping is off for this run: " + open_error.message() +
         ". The training runs every step without it (docs/reliability.md)";
}

StatusOr<std::unique_ptr<DumpSession>> DumpSession::FromEnvironment(uint32_t rank,
                                                                    SessionOptions options) {
  GRAPHDUMP_ASSIGN_OR_RETURN(std::unique_ptr<ParsedConfig> parsed, LoadConfigFromEnvironment());
  if (!parsed) return std::unique_ptr<DumpSession>();
  for (const std::string& w : parsed->warnings)
    std::fprintf(stderr, "graphdump: warning: %s\n", w.c_str());
  options.config = std::move(parsed->config);
  options.rank = rank;
  return Open(std::move(options));
}

}  // namespace graphdump
