// Internal: the parts of graphdump replay (replay.h) its files share: finding the kernel and its
// dumped tensors (replay_lookup.cc), measuring and judging the replays (replay_judge.cc) and
// numbers in words (replay_output.cc). The replay itself is replay.cc. Not for use outside
// src/torch.
#pragma once

#include <torch/script.h>

#include <optional>
#include <string>
#include <vector>

#include "graphdump/analysis/dump_index.h"
#include "graphdump/graph.h"
#include "graphdump/status.h"
#include "graphdump/torch/replay.h"

namespace graphdump::replay_internal {

using analysis::DumpIndex;
using analysis::GraphEntry;
using analysis::IterationEntry;
using analysis::KernelEntry;
using analysis::RankEntry;
using analysis::TensorEntry;

// The unit roundoff of `type`: 2^-8 for bfloat16, 2^-11 float16, 2^-24 float32, else 2^-53.
double UnitRoundoff(at::ScalarType type);

// `type` as dump file names spell it ("bfloat16"), else LibTorch's name.
std::string DTypeText(at::ScalarType type);

// `x` with 3 significant digits; "nan" or "inf" when not finite (replay_output.cc).
std::string Number(double x);

// ---------------------------------------------------------------------------------------------
// Finding the kernel (replay_lookup.cc).

struct Located {
  const RankEntry* rank = nullptr;
  const GraphEntry* graph = nullptr;
  const IterationEntry* iteration = nullptr;
  const KernelEntry* kernel = nullptr;
};

StatusOr<const RankEntry*> ChooseRank(const DumpIndex& index, std::optional<uint32_t> rank,
                                      const std::string& dir);

// The full name `wanted` names in `rank`: itself, or the one kernel whose op type equals it or
// whose full name contains it (case-insensitively).
StatusOr<std::string> ResolveKernelName(const RankEntry& rank, const std::string& wanted,
                                        const std::string& dir);

StatusOr<Located> Locate(const RankEntry& rank, const std::string& full_name,
                         std::optional<int64_t> iteration, std::optional<uint32_t> call,
                         const std::string& dir, std::vector<std::string>* notes);

struct KernelTensors {
  std::vector<at::Tensor> inputs;   // by slot
  std::vector<at::Tensor> outputs;  // by slot
};

StatusOr<KernelTensors> LoadKernelTensors(const KernelEntry& kernel);

StatusOr<const KernelInfo*> FindGraphKernel(const std::string& rank_dir, uint32_t graph_id,
                                            const std::string& full_name, GraphInfo* graph,
                                            std::string* missing);

// ---------------------------------------------------------------------------------------------
// Measuring and judging (replay_judge.cc).

// a against b with compare's metrics; rel_l2 is ||a-b|| / ||norm_of|| (b when undefined).
ReplayError Measure(const at::Tensor& a, const at::Tensor& b, const at::Tensor& norm_of = {});

// Every tensor of `outputs` equals the dumped one (as stored: bfloat16 widened exactly).
bool SameAsDumped(const std::vector<at::Tensor>& replayed, const std::vector<at::Tensor>& dumped,
                  double* max_abs);

// A discrete (integer or bool) output `a` against `b`: rel_l2 is the share of elements that differ
// (1 when the shapes differ), max_abs the largest |a - b|, cosine compare's.
ReplayError MeasureDiscrete(const at::Tensor& a, const at::Tensor& b);

// How many elements of `a` differ from `b` (all of `a`'s when the shapes differ).
int64_t ChangedElements(const at::Tensor& a, const at::Tensor& b);

std::vector<at::Tensor> Cast(const std::vector<at::Tensor>& inputs, at::ScalarType dtype);

// Rounded to `dtype` and back to float64: the values a `dtype` tensor can hold.
std::vector<at::Tensor> RoundTo(const std::vector<at::Tensor>& inputs, at::ScalarType dtype);

// Whether compare of the replayed iteration finds the kernel inheriting its discrete change
// (true) or making it, a discrete divergence (false); nullopt when it finds no such change.
std::optional<bool> ComparedDiscreteInherited(const analysis::DumpIndex& dump,
                                              const analysis::DumpIndex& reference,
                                              const ReplayResult& r);

// The verdict of the model every precision tool shares (precision_verdict.h), in words.
void Judge(ReplayResult* r);

// The chain of kernels and parameters that produces the kernel's inputs, from a comparison of
// the dump with the reference in the replayed iteration (precision_verdict.h); an inheriting
// kernel names the kernel upstream that added its error.
void TraceChain(const analysis::DumpIndex& dump, const analysis::DumpIndex& reference,
                ReplayResult* r);

}  // namespace graphdump::replay_internal
