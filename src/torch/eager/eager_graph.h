// EagerGraph: the graph of one plain nn.Module that a program calls eagerly (not TorchScript),
// built as its operators run (eager_capture.h sees them at the dispatcher). One graph per
// module the program calls from outside any other module (the "root"), numbered with the
// TorchScript models in the order they are first called (host.h).
//
// A kernel is one operator call of the program's code, named as the TorchScript executor names
// its kernels, so that an eager dump and a scripted dump of the same model compare by name:
//   Default/{attr}-{Class}/.../{op_type}-op{N}     a call inside the module at that path
//   Default/script/{op_type}-op{N}                 a call outside any module (the script's own
//                                                  code: a loss written in Python, clipping)
//   Recompute/{module scope}/{op_type}-op{N}       a call made again during backward
//                                                  (activation checkpointing)
// N is given when the kernel is first seen: the kernels the program's code called (the three
// kinds above) are numbered 0, 1, 2, ... in the order first seen, as the TorchScript executor
// numbers a scripted model's kernels; the kernels the host adds around them (backward nodes,
// optimizer updates, all-reduces: host_kernels.h) are numbered from kHostNumbers (10^9) up. So N
// is unique within the graph (a graph of 10^9 kernels would not fit in memory), and a forward
// kernel's name does not depend on whether the backward pass and the updates were captured
// before it (a run that dumps nothing captures neither; docs/python.md). N is not the kernel's
// index (its place in the graph, KernelInfo::index).
// A kernel is found again, in every call, by (scope, operator, how many calls of that operator
// the scope made before it in this call of the root), so the k-th `linear` of `blocks.0.attn`
// is the same kernel in every iteration.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graphdump/session.h"
#include "graphdump/status.h"
#include "graphdump/torch/host_graph.h"

namespace graphdump::torch_internal {

// A module of a root's tree: its attribute path ("blocks.0.attn"; "" for the root) and class.
struct EagerModule {
  std::string path;
  std::string class_name;
};

class EagerGraph final : public HostGraph {
 public:
  // `modules` are the root's modules (the root itself included, path ""); `parameters` and
  // `buffers` its named tensors, written as Parameter.* files. `session` may be null.
  EagerGraph(uint32_t graph_id, DumpSession* session, const std::vector<EagerModule>& modules,
             std::vector<std::pair<std::string, at::Tensor>> parameters,
             std::vector<std::pair<std::string, at::Tensor>> buffers);

  // Registers the (still empty) graph with the session. Idempotent.
  Status Register();

  // HostGraph.
  std::string ScopeOf(const std::string& module_path) const override;
  const GraphInfo& graph() const override { return info_; }
  DumpSession* session() const override { return session_; }

  uint32_t graph_id() const { return info_.graph_id; }
  bool Knows(const std::string& module_path) const { return scopes_.count(module_path) > 0; }

  // The scope of a module called inside `parent_path` that is not one of the root's modules
  // (made during the call): "{parent scope}/{Class}".
  std::string ScopeOfUnlisted(const std::string& parent_scope, const std::string& class_name) const;

  // The kernel for the `occurrence`-th call of `op` in `scope` within the current root call,
  // or -1 when it is new.
  int64_t Find(uint32_t scope_id, uint32_t op_id, uint32_t occurrence) const;
  // Adds a new kernel (AddHostKernel's naming); the key is what Find looks it up by.
  const KernelInfo& Add(uint32_t scope_id, uint32_t op_id, uint32_t occurrence, KernelInfo kernel);
  const KernelInfo& kernel(size_t index) const { return info_.kernels[index]; }
  // The arguments a kernel's operator writes in place: as its schema says (`(a!)`), and those
  // it writes without saying so (batch norm's running statistics).
  struct Writes {
    std::vector<uint32_t> annotated, unannotated;
    bool allocates = false;  // the operator allocates without writing (AllocatesUninitialized)
  };
  const Writes& writes(size_t index) const { return writes_[index]; }
  void set_writes(size_t index, Writes writes) { writes_[index] = std::move(writes); }
  // Output dtypes and shapes learned when a new kernel finished; sent at the root call's end.
  void SetOutputs(size_t index, std::vector<TensorMeta> outputs);
  // Input slots of a kernel found holding uninitialised memory (KernelInfo::
  // uninitialized_inputs), added to those known; sent at the root call's end when new.
  void MarkUninitializedInputs(size_t index, const std::vector<uint32_t>& slots);
  // Output slots found holding it (a view of an unwritten buffer), likewise.
  void MarkUninitializedOutputs(size_t index, const std::vector<uint32_t>& slots);

  // dump_mode 2: marks the module at `module_path` and everything under it. InvalidArgument
  // naming the path when the root has no such module.
  Status SetDump(const std::string& module_path);

  // A call of the root begins and ends: parameters at the first call of each dumped
  // iteration; learned kernel metadata at the end.
  void BeginCall();
  void EndCall();
  // Sends the kernel metadata learned since it was last sent (at a call's end, and at the
  // iteration's end for the kernels the script ran after its last call) to the session.
  void SendMetas();

  // The name a parameter or buffer of the root is known by ("fc1.weight"), or "".
  std::string TensorName(const at::TensorImpl* impl) const;

 private:
  // The first N of the kernels the host adds (above).
  static constexpr uint64_t kHostNumbers = 1000000000;

  KernelInfo AppendKernel(KernelInfo kernel) override;  // a host kernel
  // Appends `kernel` as AppendKernel does (HostGraph), its name ending in "-op{number}".
  const KernelInfo& AppendNumbered(KernelInfo kernel, uint64_t number);
  bool UnderSetDump(const std::string& module_path) const;
  // Adds `slots` to the sorted list `sorted`; marks the metadata to be sent when one is new.
  void AddSlots(const std::vector<uint32_t>& slots, std::vector<uint32_t>* sorted);
  struct Key {
    uint32_t scope_id, op_id, occurrence;
    bool operator==(const Key& o) const {
      return scope_id == o.scope_id && op_id == o.op_id && occurrence == o.occurrence;
    }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<uint64_t>()((uint64_t{k.scope_id} << 32 | k.op_id) * 0x9E3779B97F4A7C15ull ^
                                   k.occurrence);
    }
  };

  DumpSession* session_;
  GraphInfo info_;
  std::unordered_map<std::string, std::string> scopes_;  // module path -> scope
  std::vector<std::pair<std::string, at::Tensor>> parameters_, buffers_;
  std::unordered_map<const at::TensorImpl*, std::string> tensor_names_;
  std::unordered_map<Key, uint32_t, KeyHash> by_key_;
  // Each kernel's key, by index (a host kernel's is kNoKey), and where Find looks first: the
  // kernel after the one it found last. A root's calls run their kernels in the same order, so
  // most lookups end there, reading these 12 bytes instead of hashing into by_key_'s nodes (a
  // cache miss each in a graph of thousands of kernels).
  static constexpr Key kNoKey{~0u, ~0u, ~0u};
  std::vector<Key> keys_;
  mutable size_t next_guess_ = 0;
  std::vector<Writes> writes_;  // per kernel
  std::vector<std::string> set_dump_paths_;
  uint64_t forward_kernels_ = 0, host_kernels_ = 0;  // numbered so far
  bool registered_ = false;
  bool metas_dirty_ = false;
  int64_t parameters_iteration_ = -1;
};

}  // namespace graphdump::torch_internal
