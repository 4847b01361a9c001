// Data-parallel training across ranks with torch.distributed's c10d (gloo on CPU).
//
//   auto env = graphdump::RankEnvironmentFromEnv();            // RANK, WORLD_SIZE, MASTER_*
//   auto group = graphdump::ProcessGroup::Connect(*env, {});   // rendezvous at MASTER_ADDR
//   auto dp = graphdump::DataParallel::Create(model.get(), group->get());
//   (*dp)->BroadcastParameters();                             // rank 0's initial weights
//   options.gradient_hook = (*dp)->GradientHook();            // TrainerOptions
//   auto rows = graphdump::ShardRows(batch, env->rank, env->world_size);
//
// The all-reduce is a kernel of the graph: one kernel per parameter gradient, named
// "Default/allreduce-DataParallel/{parameter}/AllReduce-op{N}" (parameter path with '.' -> '_'),
// input 0 the rank's local gradient, output 0 the mean over all ranks. The communication itself
// is fused: the gradients of one dtype travel as one flat buffer in one collective.
//
// Every error is a Status naming this rank and the world size; no call waits forever: each
// collective fails after `ProcessGroupOptions::timeout`, and a peer that died fails it at once
// (its connection closes).
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graphdump/rank_environment.h"
#include "graphdump/status.h"
#include "graphdump/torch/torch_model.h"
#include "graphdump/torch/trainer.h"

namespace graphdump {

// The variable that overrides ProcessGroupOptions::timeout, in seconds.
inline constexpr char kDistTimeoutEnv[] = "GRAPHDUMP_DIST_TIMEOUT";

struct ProcessGroupOptions {
  // How long rendezvous and each collective may take before they fail.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // What errors call a member of the job: "rank" (training), "process" (distributed analysis,
  // whose processes read dump ranks).
  std::string member = "rank";
};

// The ranks of one job, connected through c10d's gloo backend (TCP).
class ProcessGroup {
 public:
  // Joins the job described by `env`: rank 0 serves the rendezvous store at MASTER_ADDR:
  // MASTER_PORT, the others connect to it. Blocks until every rank has joined or the timeout
  // passed (once, counted from the call). A single-process environment gives a group of one,
  // with no network. Errors (IOError) name the rank, the address and what failed; when ranks
  // did not join within the timeout, "rank 2 of 3 did not join the job within 300 s" names
  // them (rank 0, which serves the store, when the others cannot reach it).
  static StatusOr<std::unique_ptr<ProcessGroup>> Connect(const RankEnvironment& env,
                                                         ProcessGroupOptions options);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  uint32_t rank() const;
  uint32_t world_size() const;

  // Replaces every tensor by the element-wise sum over ranks, then divides by the world size.
  // Tensors of one dtype are fused into one collective. REQUIRES: CPU, dense tensors, the same
  // list (shapes and dtypes, in order) on every rank.
  Status AllReduceMean(std::vector<at::Tensor>& tensors);
  // The same without the division.
  Status AllReduceSum(std::vector<at::Tensor>& tensors);
  // Overwrites every tensor with rank `root`'s value.
  Status Broadcast(std::vector<at::Tensor>& tensors, uint32_t root = 0);
  // Returns when every rank has called Barrier.
  Status Barrier();

 private:
  struct Impl;
  explicit ProcessGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Rows [first, last) of a batch of `batch` rows that rank `rank` of `world_size` trains on:
// contiguous shards, rank r gets [r*B/N, (r+1)*B/N). Returns InvalidArgument when `batch` is
// not a multiple of `world_size` (the mean of unequal shards' gradients would not equal the
// gradient of the whole batch).
StatusOr<std::pair<int64_t, int64_t>> ShardRows(int64_t batch, uint32_t rank, uint32_t world_size);

// Data parallelism for a Trainer of `model`: the initial broadcast and the gradient all-reduce
// kernels.
class DataParallel {
 public:
  // Neither pointer is owned; both must outlive the object.
  static StatusOr<std::unique_ptr<DataParallel>> Create(TorchModel* model, ProcessGroup* group);
  ~DataParallel();

  // Overwrites every parameter and buffer with rank 0's, so all ranks start equal.
  Status BroadcastParameters();

  // Averages the gradients of `params` over all ranks (in place), and dumps one AllReduce
  // kernel per gradient when the session wants it. Call after backward, before the optimizer.
  Status ReduceGradients(const std::vector<std::string>& names, std::vector<at::Tensor>& params);

  // ReduceGradients as a callable for TrainerOptions::gradient_hook.
  std::function<Status(const std::vector<std::string>&, std::vector<at::Tensor>&)> GradientHook();

 private:
  DataParallel(TorchModel* model, ProcessGroup* group);
  void MaybeKillForTest();

  TorchModel* model_;
  ProcessGroup* group_;
  std::vector<KernelInfo> kernels_;  // one per parameter, registered at the first reduction
  uint64_t steps_ = 0;
};

// Everything a training host keeps while it is one rank of a data-parallel job.
struct DataParallelJob {
  RankEnvironment env;
  std::unique_ptr<ProcessGroup> group;
  std::unique_ptr<DataParallel> data_parallel;
  int64_t first_row = 0;  // this rank's rows of the combined batch: [first_row, last_row)
  int64_t last_row = 0;
};

// Makes a training host one rank of the job in `env`: checks that the batch of `data` splits
// evenly (ShardRows), narrows `data` and `labels` to this rank's rows, connects the process
// group, broadcasts rank 0's parameters and buffers, and sets `options->gradient_hook` to the
// all-reduce. Create the Trainer with `*options` afterwards. Errors: InvalidArgument for an
// uneven batch, IOError (naming the rank) when the job cannot be joined.
StatusOr<std::unique_ptr<DataParallelJob>> JoinDataParallel(const RankEnvironment& env,
                                                            TorchModel* model,
                                                            TrainerOptions* options,
                                                            at::Tensor* data, at::Tensor* labels,
                                                            ProcessGroupOptions group_options = {});

}  // namespace graphdump
