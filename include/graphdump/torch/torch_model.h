// TorchModel: a TorchScript module run by graphdump's graph executor, kernel by kernel, with
// the dump session's hooks called for every kernel (the LibTorch host API).
//
//   auto session = graphdump::DumpSession::FromEnvironment(0);      // null: no dump
//   auto model = graphdump::TorchModel::Load("alexnet.pt", session->get());
//   (*model)->SetDump("features.0");                               // dump_mode 2 marks
//   auto out = (*model)->Forward({torch::randn({1, 3, 224, 224})}); // one step
//   (*session)->Close();
//
// Errors never escape as exceptions: LibTorch errors come back as a Status naming the kernel
// (full name, source line).
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graphdump/graph.h"
#include "graphdump/session.h"
#include "graphdump/status.h"
#include "graphdump/torch/host_graph.h"

namespace graphdump {

namespace torch_internal {
struct CompiledGraph;
struct PrecisionPlan;
}

// A precision run (docs/precision.md): the model's floating parameters, buffers and inputs are
// cast to `dtype`; the kernels `keep_fp32` selects compute in float32.
struct PrecisionOptions {
  at::ScalarType dtype = at::kFloat;
  // Entries as in the configuration's `kernels` (docs/configuration.md): a full name, an op type
  // (case-insensitive substring of the kernel's op type), or name-regex(RE) (RE2, whole name);
  // or the dotted name of a floating parameter or buffer ("pos.freqs"), which then keeps its
  // float32 values.
  std::vector<std::string> keep_fp32;
};

// What a precision run keeps in float32: kernels (indices into TorchModel::graph().kernels) and
// floating parameters and buffers (indices into TorchModel::StateNames()).
struct KeepSet {
  std::vector<size_t> kernels;
  std::vector<size_t> states;
};

struct TorchModelOptions {
  std::string method = "forward";  // the method that is run
  uint32_t graph_id = 0;           // the dump's graph id for it
};

// Sees each kernel's outputs as the executor finishes it.
using KernelObserver =
    std::function<void(const KernelInfo& kernel, const std::vector<c10::IValue>& outputs)>;

class TorchModel final : public HostGraph {
 public:
  // Loads a TorchScript archive (torch.jit.save) and compiles `options.method`. `session` may be
  // null (nothing is dumped); it is not owned and must outlive the model. Returns NotFound for a
  // missing file, InvalidArgument for a file that is not a TorchScript archive, Unsupported
  // naming a graph node the executor cannot run.
  static StatusOr<std::unique_ptr<TorchModel>> Load(const std::string& path, DumpSession* session,
                                                    TorchModelOptions options = {});
  // The same for a module already in memory.
  static StatusOr<std::unique_ptr<TorchModel>> FromModule(torch::jit::Module module,
                                                          DumpSession* session,
                                                          TorchModelOptions options = {});
  ~TorchModel();
  TorchModel(const TorchModel&) = delete;
  TorchModel& operator=(const TorchModel&) = delete;

  // Marks the module at `module_path` ("features.0"; "" for the whole model) and everything
  // under it for dump_mode 2. Returns InvalidArgument naming the path and listing the valid
  // ones when no module has that path.
  Status SetDump(const std::string& module_path);

  // Casts the module's floating parameters and buffers to `options.dtype` (in place: the module
  // object itself changes) and makes later steps cast floating inputs to it and run the kernels
  // `options.keep_fp32` selects in float32. Kernel names do not change. Returns InvalidArgument
  // naming an entry that is malformed or selects no kernel of the method.
  Status SetPrecision(const PrecisionOptions& options);

  // The indices (into graph().kernels, compiled kernels only) of the kernels `entries` select;
  // InvalidArgument naming an entry that is malformed or selects none. `option` names the
  // entries' origin in messages ("--keep-fp32").
  StatusOr<std::vector<size_t>> SelectKernels(const std::vector<std::string>& entries,
                                              const std::string& option) const;

  // The kernels and the parameters and buffers `entries` select: an entry equal to a name of
  // StateNames(), or to the name a dump gives its Parameter file (SanitizeName: "pos_freqs"),
  // selects that tensor; any other is a kernel entry (SelectKernels).
  StatusOr<KeepSet> SelectKeep(const std::vector<std::string>& entries,
                               const std::string& option) const;

  // The dotted names of the model's floating parameters, then of its floating buffers
  // ("fc1.weight", "pos.freqs"), as they were when loaded: what --keep-fp32 can keep besides
  // kernels.
  const std::vector<std::string>& StateNames() const { return state_names_; }

  // What runs in float32 (SetPrecision), replacing the set. A kept parameter or buffer holds its
  // values from before the cast (float32) and is handed to the kernels that read it as a kept
  // kernel's output is: kept kernels read it in float32, others rounded to the run's dtype.
  // Requires a precision set by SetPrecision.
  void SetKeepFp32(const KeepSet& keep);

  // Runs one step of the method: BeginStep, the kernels, EndStep. `inputs` are the method's
  // arguments (without the module itself).
  StatusOr<c10::IValue> Forward(std::vector<c10::IValue> inputs);

  // Step control for hosts that run more than the method in a step (a trainer). The first
  // BeginStep registers the graph with the session; nothing extra runs and nothing is copied:
  // the kernels' dtypes and shapes are learned as they first run, and the graph files are
  // rewritten with them when that step ends. BeginStep also dumps the parameters when the
  // session wants them, once per iteration (a model called twice in one host-driven iteration,
  // DumpSession::BeginIteration, writes them at its first call).
  Status BeginStep(const std::vector<c10::IValue>& inputs);
  StatusOr<c10::IValue> RunMethod(std::vector<c10::IValue> inputs);
  void EndStep();

  // Called after each kernel of the method with its outputs; null to stop.
  void SetKernelObserver(KernelObserver observer);

  // Has kernel `index` of the compiled graph run in any step so far? (False for host kernels.)
  bool KernelRan(size_t index) const { return index < metas_known_.size() && metas_known_[index]; }

  // Module paths ("", "features", "features.0", ...) and their scopes
  // ("Default/features-Sequential/0-Conv2d"; "Default" for "").
  std::vector<std::string> ModulePaths() const;
  std::string ScopeOf(const std::string& module_path) const override;

  torch::jit::Module& module() { return module_; }
  const GraphInfo& graph() const override;
  DumpSession* session() const override { return session_; }

 private:
  TorchModel(torch::jit::Module module, DumpSession* session,
             std::unique_ptr<torch_internal::CompiledGraph> compiled);
  Status RegisterGraph();
  void DumpParameters();
  KernelInfo AppendKernel(KernelInfo kernel) override;
  bool UnderSetDump(const std::string& module_path) const;

  torch::jit::Module module_;
  DumpSession* session_;
  std::unique_ptr<torch_internal::CompiledGraph> compiled_;
  KernelObserver observer_;
  std::vector<std::string> set_dump_paths_;       // SetDump's module paths
  std::vector<uint8_t> metas_known_;              // per compiled kernel: dtypes and shapes seen
  bool metas_learned_ = false;                    // metas learned in this step, not yet sent
  std::optional<uint64_t> parameters_iteration_;  // the iteration parameters were last dumped
  std::unique_ptr<torch_internal::PrecisionPlan> precision_;  // SetPrecision; null: as loaded
  std::vector<std::string> state_names_;  // StateNames()
  // SetPrecision to a lower dtype: each floating parameter and buffer (as StateNames) and its
  // values before the cast, which a kept one takes back (SetKeepFp32).
  std::vector<std::pair<at::Tensor, at::Tensor>> state_values_;
  bool registered_ = false;
  bool in_step_ = false;
};

}  // namespace graphdump
