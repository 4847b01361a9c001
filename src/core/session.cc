// DumpSession's hooks and lifecycle (session.h): opening a session on its rank directory,
// dispatching the executor's hooks (graphs, iterations and steps, kernels, parameters,
// constants) to the writers, and closing it. The parts it calls live in session_impl.h's files.
#include "graphdump/session.h"

#include <fmt/format.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>

#include "graphdump/graph_files.h"
#include "graphdump/internal/helper_threads.h"
#include "graphdump/internal/json_text.h"
#include "graphdump/layout.h"
#include "graphdump/selector.h"
#include "graphdump/stats.h"
#include "session_impl.h"

namespace graphdump {
namespace session_internal {
namespace {

// Ended steps whose files may wait to be written before the worker that hands them over waits.
constexpr size_t kQueuedStepFiles = 16;
// Graph files queued for their thread, in bytes of the copies they are made from.
constexpr size_t kQueuedGraphBytes = size_t{64} << 20;

bool HasNonFiniteView(const TensorView& view) {
  if (!IsFloatingPoint(view.dtype) && !IsComplex(view.dtype)) return false;
  bool found = false;
  const size_t item = DTypeBits(view.dtype) / 8;
  ForEachContiguousChunk(view, size_t{1} << 20, [&](const uint8_t* p, size_t n) {
    if (!found) found = HasNonFinite(view.dtype, p, static_cast<int64_t>(n / item));
  });
  return found;
}

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

// `text` (read from a file anyone could have written) with every byte outside printable ASCII
// as \xNN, so that printing it sends no escape sequence to a terminal.
std::string Printable(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

void CountForksOnce() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, [] { ++g_forks; }); });
}

}  // namespace

std::atomic<uint64_t> g_forks{0};

SessionImpl::SessionImpl(SessionOptions options, std::unique_ptr<Selector> selector)
    : options_(std::move(options)),
      config_(options_.config),
      statistic_request_(StatsRequest::For(config_.statistic_category)),
      selector_(std::move(selector)),
      fs_(options_.file_system ? options_.file_system
                               : NewPosixFileSystem(/*fsync=*/false, config_.path)),
      root_(RootDir(config_, options_.rank)),
      buffers_(std::max<size_t>(1, options_.queue_bytes)) {
  CountForksOnce();
  if (options_.reads_in_background && config_.saved_data == SavedData::kStatistic) {
    step_files_ = std::make_unique<OrderedWorker>(kQueuedStepFiles);
    reads_ = MakeReadWorker();
  }
  if (options_.graph_files_in_background && HelperThreadCount() > 1) {
    graph_files_ = std::make_unique<OrderedWorker>(kQueuedGraphBytes);
  }
  if (!config_.enable) {
    async_ = std::make_unique<AsyncWriter>(std::max(1, options_.writer_threads),
                                           std::max<size_t>(1, options_.queue_bytes));
  }
}

SessionImpl::~SessionImpl() {
  if (InChild()) {
    // Their threads live in the parent: nothing to join or drain here.
    (void)async_.release();
    (void)reads_.release();
    (void)step_files_.release();
    (void)graph_files_.release();
    (void)batch_.release();
    return;
  }
  (void)Close();
}

Status SessionImpl::Start() {
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

Status SessionImpl::ClaimRoot() {
  const std::string parent = ParentOf(root_), base = LastComponent(root_);
  GRAPHDUMP_RETURN_IF_ERROR(fs_->CreateDirectories(parent));
  std::string holder;
  GRAPHDUMP_ASSIGN_OR_RETURN(lock_, fs_->TryLock(parent + "/." + base + ".lock", &holder));
  if (!lock_) {
    return Status::InvalidArgument(fmt::format(
        "{} is being written by another run now ({}): graphdump writes one run per directory "
        "and replaces no dump that a live run holds, --overwrite or not; wait for that run to "
        "end, or dump elsewhere (docs/layout.md)",
        root_, holder.empty() ? "its process id is not recorded" : Printable(holder)));
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

Status SessionImpl::OnGraphCompiled(const GraphInfo& graph) {
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

uint32_t SessionImpl::AddKernel(uint32_t graph_id, const KernelInfo& kernel) {
  GraphState& state = graphs_.at(graph_id);
  KernelInfo& added = state.info.kernels.emplace_back(kernel);
  added.graph_id = graph_id;
  added.index = static_cast<uint32_t>(state.info.kernels.size() - 1);
  state.selected.push_back(selector_->KernelSelected(added));
  state.files_dirty = true;
  return added.index;
}

void SessionImpl::UpdateKernels(uint32_t graph_id, const std::vector<KernelInfo>& kernels) {
  auto found = graphs_.find(graph_id);
  if (found == graphs_.end()) return;  // registered later, with the host's kernels as they are
  GraphState& state = found->second;
  for (size_t i = 0; i < kernels.size() && i < state.info.kernels.size(); ++i) {
    KernelInfo& k = state.info.kernels[i];
    // Attributes are added to (an update kernel's hyperparameters come from the host that runs
    // it, not from the graph that holds it).
    for (const auto& [name, value] : kernels[i].attributes) k.attributes[name] = value;
    k.inputs = kernels[i].inputs;
    k.outputs = kernels[i].outputs;
    k.marked_for_dump = kernels[i].marked_for_dump;
    k.not_run = kernels[i].not_run;
    k.uninitialized_inputs = kernels[i].uninitialized_inputs;
    k.uninitialized_outputs = kernels[i].uninitialized_outputs;
    state.selected[i] = selector_->KernelSelected(k);
  }
  state.files_dirty = true;
}

void SessionImpl::UpdateAttributes(uint32_t graph_id, uint32_t index,
                                   const std::map<std::string, std::string>& attributes) {
  auto found = graphs_.find(graph_id);
  if (found == graphs_.end() || index >= found->second.info.kernels.size()) return;
  GraphState& state = found->second;
  KernelInfo& k = state.info.kernels[index];
  for (const auto& [name, value] : attributes) k.attributes[name] = value;
  state.selected[index] = selector_->KernelSelected(k);
  state.files_dirty = true;
}

void SessionImpl::AppendHyperparameters(const std::string& lines) {
  if (failed_ || InChild() || lines.empty()) return;
  Status st = fs_->CreateDirectories(root_ + "/graphs");
  if (st.ok()) st = fs_->AppendToFile(HyperparametersPath(root_), lines);
  if (!st.ok()) Fail(st);
}

void SessionImpl::BeginIteration() {
  if (iteration_open_ || InChild()) return;
  StartIteration();
  iteration_open_ = true;
}

void SessionImpl::EndIteration() {
  if (!iteration_open_ || InChild()) return;
  iteration_open_ = false;
  for (auto& [id, state] : graphs_) {
    if (state.files_dirty) WriteGraphFiles(state);
  }
  FinishIteration();
}

void SessionImpl::BeginStep(uint32_t graph_id) {
  if (InChild()) return;
  step_graph_ = graph_id;
  if (!iteration_open_) StartIteration();
}

bool SessionImpl::Wants(uint32_t graph_id, uint32_t index) const {
  if (!StepDumps() || config_.op_debug_mode == 4) return false;
  auto it = graphs_.find(graph_id);
  return it != graphs_.end() && index < it->second.selected.size() && it->second.selected[index];
}

void SessionImpl::OnKernelDone(const KernelInfo& kernel, const std::vector<TensorView>& inputs,
                               const std::vector<TensorView>& outputs) {
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

bool SessionImpl::ReadsInput(const KernelInfo& kernel, const TensorView& input) {
  if (!Wants(kernel) || !selector_->DumpInputs()) return false;
  if (input.device != "cpu") return true;
  if (config_.saved_data == SavedData::kTensor) {
    // A tensor dump (no statistics) whose file of these very bytes was written in this step
    // (a parameter, the previous kernel's output) only links that file under the input's name
    // (EmitTensor): the bytes are not read again, so no copy of them is needed.
    if (config_.file_format == "bin") return true;
    TensorView view = input;
    std::string format;
    if (!config_.trans_flag) view = StorageOrderView(input, &format);
    const int64_t max_elements =
        config_.sample_mode == 1 ? static_cast<int64_t>(config_.sample_num) : 0;
    return written_files_.Find(view, max_elements) == nullptr;
  }
  if (config_.saved_data != SavedData::kStatistic) return true;
  if (statistic_request_.md5) return true;
  TensorView reordered;
  return stats_cache_.Find(StatsCache::Probe(StatisticBytes(input, &reordered),
                                             statistic_request_)) == nullptr;
}

const TensorView& SessionImpl::StatisticBytes(const TensorView& input, TensorView* reordered) {
  // A view in storage order is its own StatisticOnlyView: used as it is, not copied.
  if (input.strides.empty() || input.IsContiguous()) return input;
  *reordered = StatisticOnlyView(input);
  return *reordered;
}

bool SessionImpl::ReadInputNow(const KernelInfo& kernel, const TensorView& input) {
  if (config_.saved_data == SavedData::kTensor) return WriteInputNow(kernel, input);
  if (config_.saved_data != SavedData::kStatistic || input.device != "cpu" ||
      !input.origin.storage) {
    return false;
  }
  if (statistic_request_.md5) return false;
  // What EmitStatisticRow reduces, and finds again by the same key after the write.
  TensorView reordered;
  const TensorView& reduced = StatisticBytes(input, &reordered);
  StatsCache::Probe probe(reduced, statistic_request_);
  if (stats_cache_.Find(probe)) return true;
  TensorWriteOptions options;
  options.write_npy = false;
  options.stats = statistic_request_;
  StatusOr<TensorWriteResult> result = WriteTensor(*fs_, kernel.full_name, reduced, options);
  if (result.ok()) CountStatistics(reduced);
  // A full cache keeps nothing new: the copy is needed after all.
  return result.ok() && stats_cache_.Insert(std::move(probe), result->stats);
}

void SessionImpl::BeforeWrite(const void* storage) {
  if (storage != nullptr && KeepsStatisticsAcrossSteps()) written_between_steps_.insert(storage);
  if (!read_by_.empty() && storage != nullptr && !InChild()) {
    auto it = read_by_.find(storage);
    if (it != read_by_.end()) {
      TakeQueuedRows(it->second);
      read_by_.erase(it);
    }
  }
  if (unwritten_count_.load() == 0 || storage == nullptr) return;
  std::unique_lock<std::mutex> lock(mu_);
  written_.wait(lock, [&] { return unwritten_.count(storage) == 0; });
}

void SessionImpl::ForgetStatistics(const void* storage) {
  stats_cache_.Forget(storage);
  written_files_.Forget(storage);
}

void SessionImpl::OnTensorNotDumped(const KernelInfo& kernel, bool input, uint32_t slot,
                                    const std::string& why) {
  if (!Wants(kernel) || !(input ? selector_->DumpInputs() : selector_->DumpOutputs())) return;
  if (!not_dumped_said_.emplace(kernel.graph_id, kernel.index, input, slot).second) return;
  Log(fmt::format("warning: {} {} {} is {}: not dumped (its slot stays empty; "
                  "docs/file-format.md)",
                  kernel.full_name, input ? "input" : "output", slot, why));
}

void SessionImpl::OnKernelFailed(const KernelInfo& kernel, const std::vector<TensorView>& inputs,
                                 const std::string& error) {
  if (config_.op_debug_mode != 4 || failed_ || InChild()) return;
  Log(fmt::format("kernel {} failed; dumping its inputs: {}", kernel.full_name, error));
  DumpKernel(kernel, &inputs, nullptr);
}

bool SessionImpl::WantsParameters() const {
  return StepDumps() && config_.op_debug_mode == 0 && !config_.ge_layout;
}

void SessionImpl::OnParameter(uint32_t graph_id, const std::string& name, const TensorView& value) {
  if (!WantsParameters()) return;
  TensorFileName file;
  file.op_type = "Parameter";
  file.op_name = SanitizeName(name);
  file.timestamp = NowMicros();
  file.dtype = std::string(DTypeName(value.dtype));
  EmitTensor(IterationDirOf(graph_id), file, value, /*statistics=*/true);
}

void SessionImpl::OnConstant(uint32_t graph_id, uint32_t index, const TensorView& value) {
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

void SessionImpl::EndStep(uint32_t graph_id) {
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

void SessionImpl::SetDump(const std::string& module_path) {
  selector_->SetDump(module_path);
  for (auto& [id, state] : graphs_) {
    for (const KernelInfo& k : state.info.kernels) {
      state.selected[k.index] = selector_->KernelSelected(k);
    }
  }
}

Status SessionImpl::Close() {
  if (InChild()) {
    closed_ = true;  // the parent's dump: it closes it
    return Status::Ok();
  }
  if (closed_) return FirstError();
  EndIteration();
  closed_ = true;
  EndStepDirs();
  FinishReads();  // the last step's statistic.csv files, written by the worker
  FinishGraphFiles();
  if (async_) async_->Drain();
  for (const std::string& entry : UnusedEntries()) Log("unused kernel in config: " + entry);
  if (!failed_ && !run_failed_) {
    Status removed = fs_->Remove(IncompletePath());
    if (!removed.ok()) Fail(removed);
  }
  lock_.reset();  // another run may take the directory over now (--overwrite)
  return FirstError();
}

DumpSummary SessionImpl::Summary() const {
  DumpSummary s;
  s.root = root_;
  s.files = files_;
  s.bytes = bytes_;
  s.kernels_dumped = kernels_dumped_;
  s.statistic_rows = statistic_rows_;
  s.statistics_computed = statistics_computed_;
  s.statistics_bytes = statistics_bytes_;
  s.unused_kernel_entries = UnusedEntries();
  return s;
}

std::vector<std::string> SessionImpl::UnusedEntries() const {
  Selector dumped(config_);
  for (const auto& [id, state] : graphs_) {
    for (const KernelInfo& k : state.info.kernels) {
      if (k.index < state.dumped.size() && state.dumped[k.index]) dumped.KernelSelected(k);
    }
  }
  return dumped.UnusedEntries();
}

void SessionImpl::Log(const std::string& message) const {
  if (options_.log) {
    options_.log(message);
  } else {
    std::fprintf(stderr, "graphdump: %s\n", message.c_str());
  }
}

void SessionImpl::StartIteration() {
  iteration_ = config_.initial_iteration + steps_completed_;
  step_dumps_ = !failed_ && selector_->IterationDumps(iteration_);
  step_open_ = true;
  // The last step's statistics hold for the bytes no write reached since; a step that dumps
  // nothing is not watched for writes (SessionOptions::stats_across_steps).
  if (!step_dumps_) {
    stats_cache_.Clear();
  } else if (!written_between_steps_.empty()) {
    stats_cache_.Forget(written_between_steps_);
  }
  written_between_steps_.clear();
}

bool SessionImpl::KeepsStatisticsAcrossSteps() const {
  return options_.stats_across_steps && !step_open_ && stats_cache_.size() > 0 &&
         !InChild();
}

void SessionImpl::FinishIteration() {
  EndStepDirs();
  stats_cache_.EndStep(options_.stats_across_steps);
  written_files_.Clear();
  early_inputs_.clear();
  ++steps_completed_;
  step_dumps_ = false;
  step_open_ = false;
}

}  // namespace session_internal

using session_internal::SessionImpl;

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
