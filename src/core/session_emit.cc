// How a DumpSession writes a kernel's tensors (docs/file-format.md): .npy files and Ascend .bin
// files (docs/ascend.md), written at once or queued to the writer threads with a copy taken
// now (or, when the host reports its writes, from the tensor's own memory), and tensors
// already written in this step linked under their new name.
#include <fmt/format.h>

#include <mutex>
#include <nlohmann/json.hpp>

#include "graphdump/ge_dialect.h"
#include "graphdump/internal/ascend_writer.h"
#include "graphdump/internal/json_text.h"
#include "graphdump/layout.h"
#include "session_impl.h"

namespace graphdump::session_internal {

void SessionImpl::DumpKernel(const KernelInfo& kernel, const std::vector<TensorView>* inputs,
                             const std::vector<TensorView>* outputs) {
  const GraphState::FileNames& names = FileNamesOf(kernel);
  if (config_.ge_layout && GeSkipsOpType(names.file_op_type)) return;
  const std::string& dir = IterationDirOf(kernel.graph_id);
  EarlyInputs early;  // the inputs whose files are written already, with the call's timestamp
  if (!early_inputs_.empty()) {
    if (auto it = early_inputs_.find({kernel.graph_id, kernel.index}); it != early_inputs_.end()) {
      early = std::move(it->second);
      early_inputs_.erase(it);
    }
  }
  TensorFileName& file =
      KernelFile(kernel, names, early.timestamp != 0 ? early.timestamp : NowMicros());
  if (auto graph = graphs_.find(kernel.graph_id); graph != graphs_.end()) {
    std::vector<uint8_t>& dumped = graph->second.dumped;
    if (kernel.index >= dumped.size()) dumped.resize(kernel.index + 1);
    dumped[kernel.index] = 1;
  }
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
      if (io == 0 && std::find(early.slots.begin(), early.slots.end(), view.slot) !=
                         early.slots.end()) {
        continue;
      }
      file.slot = view.slot >= 0 ? static_cast<uint32_t>(view.slot) : i;
      file.format = kDefaultFormat;  // the previous tensor's file may have had its own
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
  // Deferred rows go to the worker in batches: it is woken less often.
  if (reads_) {
    SubmitDeferredRows(/*when_full=*/true);
    reads_->Release();  // the tensors read already go back to the host's allocator soon
  }
}

TensorFileName& SessionImpl::KernelFile(const KernelInfo& kernel,
                                        const GraphState::FileNames& names, uint64_t timestamp) {
  // Reused kernel to kernel, every field set here: its names' buffers are not allocated again.
  TensorFileName& file = kernel_file_;
  file.op_type.assign(names.file_op_type);
  file.op_name.assign(names.file_op_name);
  file.task_id = 0;
  file.stream_id = kernel.stream_id;
  file.timestamp = timestamp;
  file.dtype.assign("float32");
  return file;
}

bool SessionImpl::WriteInputNow(const KernelInfo& kernel, const TensorView& input) {
  // An overflow dump writes a call's files only once its outputs are known; a .bin file holds
  // all of a call's tensors.
  if (config_.file_format == "bin" || config_.op_debug_mode == 3 || input.slot < 0 ||
      input.device != "cpu") {
    return false;
  }
  const GraphState::FileNames& names = FileNamesOf(kernel);
  if (config_.ge_layout && GeSkipsOpType(names.file_op_type)) return true;  // never written
  EarlyInputs& early = early_inputs_[{kernel.graph_id, kernel.index}];
  // A slot written already belongs to an earlier call that never ended: this is a new call.
  if (early.timestamp == 0 ||
      std::find(early.slots.begin(), early.slots.end(), input.slot) != early.slots.end()) {
    early.timestamp = NowMicros();
    early.slots.clear();
  }
  early.slots.push_back(input.slot);
  TensorFileName& file = KernelFile(kernel, names, early.timestamp);
  file.is_input = true;
  file.slot = static_cast<uint32_t>(input.slot);
  file.format = kDefaultFormat;
  // The writer threads get a copy taken now, never the tensor's own memory (which the kernel
  // is about to write): without a keep-alive, EmitTensor copies.
  TensorView copied_now;
  if (async_) {
    copied_now = input;
    copied_now.keep_alive = nullptr;
  }
  EmitTensor(IterationDirOf(kernel.graph_id), file, async_ ? copied_now : input,
             /*statistics=*/true);
  return true;
}

void SessionImpl::EmitAscendFile(const std::string& dir, const TensorFileName& file,
                                 const std::string& full_name,
                                 const std::vector<TensorView>* inputs,
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

SessionImpl::QueuedCopy SessionImpl::Copy(const TensorView& view) {
  QueuedCopy copy{buffers_.Take(view.ContiguousBytes()), TensorView{}};
  CopyContiguousTo(view, copy.buffer.data());
  copy.view.dtype = view.dtype;
  copy.view.shape = view.shape;
  copy.view.slot = view.slot;
  copy.view.data = copy.buffer.data();
  return copy;
}

void SessionImpl::EmitTensor(const std::string& dir, TensorFileName& file,
                             const TensorView& original, bool statistics, bool allow_npy) {
  if (failed_) return;
  file.dtype.assign(DTypeName(original.dtype));
  if (original.device != "cpu") {
    Log(fmt::format("skipping {}: tensor is on device '{}'; hand graphdump host tensors",
                    file.Basename(), original.device));
    return;
  }
  const bool want_stats = statistics && config_.saved_data != SavedData::kTensor;
  TensorWriteOptions options;
  options.write_npy = allow_npy && (config_.saved_data != SavedData::kStatistic || !statistics);
  if (want_stats) options.stats = statistic_request_;
  options.max_elements = config_.sample_mode == 1 ? static_cast<int64_t>(config_.sample_num) : 0;
  if (!options.write_npy && !want_stats) return;
  if (!options.write_npy) {
    // With reads on the worker, the worker that writes statistic.csv creates its directory.
    if (!ReadsOnWorker() && !EnsureDir(dir)) return;
    return EmitStatisticRow(dir, file, original, options);
  }
  if (!EnsureDir(dir)) return;
  // The view as the file holds it: the original itself, or reordered into storage order.
  TensorView reordered;
  if (!config_.trans_flag) reordered = StorageOrderView(original, &file.format);
  const TensorView& view = config_.trans_flag ? original : reordered;

  StatRowInfo row;  // the statistic.csv row, where there is one
  if (want_stats) FillStatRow(file, view, &row);
  const std::string path = dir + "/" + FileNameIn(dir, file.Basename(), ".npy");
  StepDir* sd = want_stats ? StepDirFor(dir) : nullptr;
  const uint64_t seq = next_seq_++;
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

std::optional<NanPropagatingStats> SessionImpl::WriteOne(const std::string& path,
                                                         const TensorView& view,
                                                         const TensorWriteOptions& options,
                                                         const StatRowInfo& row, StepDir* sd,
                                                         uint64_t seq, WrittenFiles::File* file) {
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
  if (options.stats) CountStatistics(view);
  if (sd) AddStatisticRow(row, result->stats, sd, seq);
  return std::move(result->stats);
}

void SessionImpl::LinkTensor(std::shared_ptr<WrittenFiles::File> source, const std::string& path,
                             const TensorView& view, TensorWriteOptions options,
                             const StatRowInfo& row, StepDir* sd, uint64_t seq) {
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

}  // namespace graphdump::session_internal
