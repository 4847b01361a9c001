// DumpSession: the hook API any graph executor calls while it runs a graph (docs/executor.md,
// docs/layout.md).
//
//   auto session = DumpSession::FromEnvironment(rank);   // null when dumping is off
//   session->OnGraphCompiled(graph);     // writes graphs/ and execution_order/
//   session->BeginStep(graph_id);        // the step's iteration number is now fixed
//   session->OnParameter(...)            // parameters at the start of the step (if
//   WantsParameters) if (session->Wants(kernel)) session->OnKernelDone(kernel, inputs, outputs);
//   session->OnKernelFailed(kernel, inputs, error);   // op_debug_mode 4
//   session->EndStep(graph_id);          // statistic.csv, global execution order
//   session->Close();                    // drains writers, reports unused kernel entries
//
// Threading: hooks are called from one thread (the executor's). In asynchronous mode the data
// is copied before OnKernelDone returns and written by background threads; the caller may reuse
// or modify its tensors immediately.
//
// Disk faults: the first write error stops all further dumping, is reported once (Close()
// returns it, and `.dump_metadata/INCOMPLETE` names the file), and never interrupts the caller:
// hooks keep returning normally. `.dump_metadata/INCOMPLETE` exists from Open until a Close
// without error, so a process that dies with the session open leaves it too.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graphdump/config.h"
#include "graphdump/file_system.h"
#include "graphdump/graph.h"
#include "graphdump/status.h"
#include "graphdump/tensor_view.h"

namespace graphdump {

struct SessionOptions {
  DumpConfig config;
  uint32_t rank = 0;
  std::shared_ptr<FileSystem> file_system;  // null: the POSIX file system
  int writer_threads = 2;                   // asynchronous mode
  size_t queue_bytes = size_t{256} << 20;   // asynchronous mode: bytes in flight before waiting
  std::string device_target = "cpu";        // written to .dump_metadata/config.json
  // The net name when the configuration leaves it empty (the GE dialect's model_name): the
  // host's model name, e.g. the .pt file's stem. "graph" when this is empty too.
  std::string model_name;
  // Where warnings and the one-time disk error go (default: stderr, prefixed "graphdump: ").
  std::function<void(const std::string&)> log;
  // Statistics are found again by storage and version (TensorOrigin). Within a step the host's
  // kernels all bump versions when they write. Set this when the host's code between steps does
  // too (no writes through Tensor::data() or raw pointers; graphdump's CLI qualifies), or when
  // the host reports the writes it sees between steps (BeforeWrite while
  // KeepsStatisticsAcrossSteps; the allocations reported are read again): then the statistics
  // of tensors unchanged since the last step, such as the parameters the optimizer updated, are
  // not computed again. A step that dumps nothing starts from no statistics.
  bool stats_across_steps = false;
  // Set when the host calls BeforeWrite before it writes, in place, the memory of any tensor it
  // has handed to the session (graphdump's CLI does: its executor before in-place kernels, its
  // trainer before optimizer updates and all-reduces). Asynchronous mode then writes tensors from
  // their own memory, kept alive, instead of a staging copy taken on the host's thread. A host
  // whose own code may write tensors behind the session's back (a user's Python) leaves it off.
  bool host_reports_writes = false;
  // Statistic-only rows (saved_data "statistic") are reduced on a thread of the session's own,
  // in the order the kernels ran, while the host goes on: the host's thread only queues the
  // tensors it hands over (kept alive by TensorView::keep_alive; views without it, or without
  // an origin, are reduced at once). The host must call BeforeWrite before anything writes, in
  // place, the memory of a tensor it has handed over, and FinishReads before it stops reporting
  // such writes. A step's statistic.csv files are written by that thread too, after the step's
  // rows, while the host goes on with the next step: FinishReads (or Close) waits for them.
  bool reads_in_background = false;
  // The graph files (graphs/*.ir and *.pb, execution_order/ms_execution_order_graph_*.csv) are
  // made and written on a thread of the session's own, from a copy of the graph, while the host
  // goes on; Close waits for them. Off, or where the process may use one core only: written on
  // the host's thread, there when OnGraphCompiled, EndStep or EndIteration returns.
  bool graph_files_in_background = false;
  // Tests only: the worker of reads_in_background sleeps this long before each batch, so that
  // it lags behind the host: in-place writes of queued tensors find them not reduced yet.
  uint32_t deferred_read_delay_us = 0;
  // Tests only: the host's thread sleeps this long after taking a queued tensor from the worker
  // (an in-place write's BeforeWrite) and before adding its row, so that the worker reaches
  // that row's batch meanwhile.
  uint32_t host_take_delay_us = 0;
  // One run per directory: a session refuses to open when its rank directory ({path}/rank_{id})
  // already exists, so that two runs never mix their files. With `overwrite`, an existing rank
  // directory is removed first (the CLI's --overwrite; GRAPHDUMP_OVERWRITE=1 in Python).
  bool overwrite = false;
  // What the refusal of an existing rank directory suggests, in the host's own terms (the options
  // its user can give); empty: "remove it, or dump elsewhere (the configuration's path)".
  std::string retry_hint;
};

// What the session wrote, for the host's summary.
struct DumpSummary {
  std::string root;    // {path}/rank_{rank}
  uint64_t files = 0;  // tensor files
  uint64_t bytes = 0;  // bytes of tensor files
  uint64_t kernels_dumped = 0;
  uint64_t statistic_rows = 0;
  // Tensors whose statistics were computed (each read once; the other rows reused them) and
  // the bytes they hold.
  uint64_t statistics_computed = 0;
  uint64_t statistics_bytes = 0;
  std::vector<std::string> unused_kernel_entries;
};

class DumpSession;

// Whether an error of DumpSession::Open is a dump path that cannot be prepared.
bool DumpPathNotPrepared(const Status& open_error);
// The one warning for it: "dumping is off for this run: ...".
std::string DumpOffWarning(const Status& open_error);

class DumpSession {
 public:
  // Opens a session from GRAPHDUMP_CONFIG / MINDSPORE_DUMP_CONFIG. Returns null (not an error)
  // when dumping is off or this rank is not in support_device.
  // `options` supplies everything but the configuration and rank.
  static StatusOr<std::unique_ptr<DumpSession>> FromEnvironment(uint32_t rank,
                                                                SessionOptions options = {});
  // Opens a session with an explicit configuration. Returns null when the rank does not dump.
  // Errors: kInvalidArgument for a usage error (an earlier run's rank directory without
  // overwrite), or a dump path that cannot be prepared (DumpPathNotPrepared: the rank directory
  // or its first files cannot be written). The latter stops the dump, not the training: the
  // caller warns once (DumpOffWarning) and runs on without a session; the rank directory is
  // left absent, or with an INCOMPLETE saying why when this session did not make it.
  static StatusOr<std::unique_ptr<DumpSession>> Open(SessionOptions options);

  virtual ~DumpSession() = default;

  // Registers a graph (ids must be unique), writes graphs/*.ir, graphs/*.pb and the execution
  // order. Kernel indexes are assigned in order. Returns an error on a duplicate id.
  virtual Status OnGraphCompiled(const GraphInfo& graph) = 0;

  // Appends a kernel discovered while running (e.g. a backward kernel) to a registered graph,
  // with `graph_id` set, and returns the index it got. The graph files are rewritten at
  // EndStep.
  virtual uint32_t AddKernel(uint32_t graph_id, const KernelInfo& kernel) = 0;

  // Updates what the host has learned about a registered graph's kernels since it registered
  // them: their input and output dtypes and shapes (seen when they first ran), which have not
  // run (KernelInfo::not_run), and set_dump marks; attributes are added to the kernel's
  // (UpdateAttributes does that for one kernel alone). `kernels` are the graph's kernels in
  // index order (AddKernel's included); names and indexes are not changed. Selection follows
  // the new marks at once; the graph files are rewritten when the step (or iteration) ends. A
  // graph not registered is left alone.
  virtual void UpdateKernels(uint32_t graph_id, const std::vector<KernelInfo>& kernels) = 0;
  // Adds `attributes` to the attributes of the registered kernel `index` of graph `graph_id`
  // (an update kernel's `optimizer` and `param_group`: one kernel's attributes, without the
  // graph's other kernels); the graph files are rewritten when the step (or iteration) ends. A
  // graph or kernel not registered is left alone.
  virtual void UpdateAttributes(uint32_t graph_id, uint32_t index,
                                const std::map<std::string, std::string>& attributes) = 0;
  // Appends `lines` (JSON objects, each ending in a newline) to graphs/hyperparameters.jsonl, all
  // or nothing: the optimizers' hyperparameters by iteration (docs/python.md, "Optimizer update
  // kernels"), which a schedule changes at every step, kept out of the graph files so that those
  // are not rewritten at every step.
  virtual void AppendHyperparameters(const std::string& lines) = 0;

  // Host-driven iterations, for hosts that run several graphs (or one graph several times) in
  // one iteration, e.g. a model and a loss module, then an optimizer. Between BeginIteration and
  // EndIteration, BeginStep and EndStep of any graph keep the iteration number, and EndStep only
  // appends the graph's global execution order line; EndIteration ends the iteration as EndStep
  // does otherwise (statistic.csv rows, the next iteration number). Without BeginIteration each
  // BeginStep/EndStep pair is one iteration. BeginIteration while one is open does nothing.
  virtual void BeginIteration() = 0;
  virtual void EndIteration() = 0;
  virtual bool IterationOpen() const = 0;

  // Starts a step of `graph_id`; the iteration number (initial_iteration + steps run) is fixed
  // until EndStep.
  virtual void BeginStep(uint32_t graph_id) = 0;
  virtual uint64_t CurrentIteration() const = 0;
  // True when anything at all is dumped in the current step (iteration selected).
  virtual bool StepDumps() const = 0;

  // Does the session want the tensors of kernel `index` of graph `graph_id` in the current
  // step? O(1), and reads nothing of the kernel's KernelInfo (a capture asks it for every
  // operator call, and a large graph's KernelInfos are rarely in the CPU's caches).
  virtual bool Wants(uint32_t graph_id, uint32_t index) const = 0;
  bool Wants(const KernelInfo& kernel) const { return Wants(kernel.graph_id, kernel.index); }

  // Dumps a kernel's inputs and outputs (those selected by input_output). `kernel` must come
  // from a registered graph. In overflow mode only kernels with a NaN/Inf output are written.
  virtual void OnKernelDone(const KernelInfo& kernel, const std::vector<TensorView>& inputs,
                            const std::vector<TensorView>& outputs) = 0;

  // Would OnKernelDone(kernel, ...) read the bytes of `input` as one of its inputs? False when
  // the kernel's inputs are not dumped in this step, when only statistics are saved and the
  // statistics of these bytes (same TensorOrigin) are already known, or when only tensors are
  // saved (.npy) and a file of these bytes was written in this step (the input's file is then
  // a second name for it, docs/file-format.md). A kernel about to write
  // `input` in place must hand OnKernelDone a copy taken before it ran, unless this is false:
  // then `input` itself may be handed over, written or not. Holds until EndStep.
  virtual bool ReadsInput(const KernelInfo& kernel, const TensorView& input) = 0;

  // For a kernel about to write `input` in place, where ReadsInput is true: reads now what the
  // dump keeps of `input` (the statistics of a statistic dump; the file of a .npy tensor dump
  // that dumps every call, named as OnKernelDone's call will name its other files, or queued
  // for the writer threads as a copy) and returns true, so that `input` itself may be handed to
  // OnKernelDone after the write; false where a copy taken before the write is needed (.bin
  // files, an overflow dump, statistics with tensors, md5). `input.slot` is its slot. A call's
  // OnKernelDone comes before the next call of the same kernel reads an input now.
  virtual bool ReadInputNow(const KernelInfo& kernel, const TensorView& input) = 0;

  // Called by a host with SessionOptions::host_reports_writes or reads_in_background before it
  // writes, in place, the memory of the allocation identified by `storage`
  // (TensorOrigin::storage.get()): returns when no queued write or reduction of a dumped tensor
  // still reads that memory (queued reductions the worker has not begun are run on the calling
  // thread, not waited for). Cheap when none is pending.
  virtual void BeforeWrite(const void* storage) = 0;

  // With SessionOptions::reads_in_background: returns when no queued reduction still reads a
  // tensor handed over so far, and the statistic.csv files of the steps ended are written.
  virtual void FinishReads() = 0;
  // With SessionOptions::reads_in_background: is a reduction (or a step's files) still queued?
  virtual bool ReadsQueued() const = 0;
  // With SessionOptions::stats_across_steps, between steps: does the session hold statistics
  // for the next step to reuse? A host that cannot trust version counters there reports every
  // write it sees until the next step begins (BeforeWrite): those allocations are read again.
  virtual bool KeepsStatisticsAcrossSteps() const = 0;
  // With SessionOptions::reads_in_background: false finishes the queued reductions and has the
  // tensors of later OnKernelDone calls read before those return (a host about to write memory
  // it cannot report, such as a compiled graph's reused buffers); true lets them be queued
  // again.
  virtual void DeferReads(bool defer) = 0;

  // The bytes of the allocation `storage` were written without its version counter changing
  // (TensorOrigin::version): statistics recorded for them are not reused. Every host calls it
  // after such a write (batch norm's running statistics).
  virtual void ForgetStatistics(const void* storage) = 0;
  // The same for every allocation: a host that cannot report writes between steps calls it
  // when a step ends (SessionOptions::stats_across_steps).
  virtual void ForgetAllStatistics() = 0;

  // A tensor of `kernel` (input or output `slot`) that the dump cannot hold, for the reason
  // `why` (a sparse tensor): it has no file, and the kernel's other tensors keep their slots.
  // Said once per kernel and slot (a warning), when the kernel's tensors of that side are
  // dumped in this step.
  virtual void OnTensorNotDumped(const KernelInfo& kernel, bool input, uint32_t slot,
                                 const std::string& why) {
    (void)kernel, (void)input, (void)slot, (void)why;
  }

  // op_debug_mode 4: dumps the inputs of a kernel that failed. Does nothing in other modes.
  virtual void OnKernelFailed(const KernelInfo& kernel, const std::vector<TensorView>& inputs,
                              const std::string& error) = 0;

  // Parameters (weights, buffers) as they were at the start of the step, written as
  // Parameter.{name}... in every dumped iteration directory of the graph.
  virtual bool WantsParameters() const = 0;
  virtual void OnParameter(uint32_t graph_id, const std::string& name, const TensorView& value) = 0;

  // A tensor constant of the graph, written once to {graph_id}/constants/Parameter.data-{N}...
  virtual void OnConstant(uint32_t graph_id, uint32_t index, const TensorView& value) = 0;

  // Ends the step: statistic.csv rows, one line in ms_global_execution_order_graph_{id}.csv.
  virtual void EndStep(uint32_t graph_id) = 0;

  // Marks modules for dump_mode 2 (kernels whose module_path equals or lies under one of these).
  virtual void SetDump(const std::string& module_path) = 0;

  // The host's run stopped with an error (a kernel failed, the user's script raised): the dump
  // is incomplete, and `.dump_metadata/INCOMPLETE` says why; Close then keeps it.
  virtual void OnRunFailed(const std::string& reason) = 0;

  // Waits for every pending write, writes the remaining statistic rows, reports unused kernel
  // entries. Returns the first write error, if any. Idempotent.
  virtual Status Close() = 0;

  virtual DumpSummary Summary() const = 0;
  virtual const DumpConfig& config() const = 0;
};

}  // namespace graphdump
