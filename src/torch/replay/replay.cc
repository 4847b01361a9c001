// graphdump replay (docs/precision.md, "Replay"), the replay of one kernel: finds its dumped files
// with the analysis index (replay_lookup.cc), rebuilds its operator call from the graph file's
// schema and arguments (graph.h KernelArgument, replay_execute.cc), runs it with LibTorch in its
// dtype and in float64, and measures and judges the runs (replay_judge.cc).
#include "graphdump/torch/replay.h"

#include <torch/script.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <variant>

#include "torchscript/graph_compiler.h"
#include "graphdump/analysis/dump_index.h"
#include "graphdump/analysis/npy_file.h"
#include "graphdump/analysis/precision_verdict.h"
#include "graphdump/analysis/tensor_math.h"
#include "graphdump/file_system.h"
#include "graphdump/graph_files.h"
#include "graphdump/npy.h"
#include "graphdump/torch/scalar_type.h"
#include "replay/replay_execute.h"
#include "replay/replay_parts.h"
#include "torch_compat.h"

namespace graphdump {
namespace {

using analysis::DumpIndex;
using analysis::GraphEntry;
using analysis::IterationEntry;
using analysis::KernelEntry;
using analysis::RankEntry;
using analysis::TensorEntry;
using torch_internal::Execute;
using torch_internal::RebuildCall;
using torch_internal::ReplayCall;

using replay_internal::Cast;
using replay_internal::ChooseRank;
using replay_internal::DTypeText;
using replay_internal::FindGraphKernel;
using replay_internal::Judge;
using replay_internal::KernelTensors;
using replay_internal::LoadKernelTensors;
using replay_internal::Locate;
using replay_internal::Measure;
using replay_internal::Number;
using replay_internal::ResolveKernelName;
using replay_internal::RoundTo;
using replay_internal::SameAsDumped;
using replay_internal::TraceChain;
using replay_internal::UnitRoundoff;

// ReplayKernel's work; fills `r` as it learns about the kernel.
StatusOr<ReplayResult> ReplayInto(const ReplayRequest& request, ReplayResult& r) {
  auto index = analysis::IndexDump(request.dump_dir);
  if (!index.ok()) return index.status();
  auto rank = ChooseRank(*index, request.rank, request.dump_dir);
  if (!rank.ok()) return rank.status();
  if (!request.rank && index->ranks.size() > 1) {
    r.notes.push_back("replayed rank " + std::to_string((*rank)->rank) +
                      " of several (choose with --rank)");
  }
  auto name = ResolveKernelName(**rank, request.kernel, request.dump_dir);
  if (!name.ok()) return name.status();
  auto located = Locate(**rank, *name, request.iteration, request.call, request.dump_dir, &r.notes);
  if (!located.ok()) return located.status();
  const KernelEntry& entry = *located->kernel;
  r.full_name = *name;
  r.op_type = OpTypeFromFullName(*name);
  r.rank = (*rank)->rank;
  r.graph_id = located->graph->graph_id;
  r.iteration = located->iteration->iteration;
  r.call = entry.call;
  r.dump_dir = (*rank)->dir;
  r.source = index->SourceLine(*located->graph, *name);

  // The reference's copy of the kernel: same rank, graph, iteration and full name.
  std::optional<KernelTensors> reference;
  StatusOr<DumpIndex> ref_index = Status::NotFound("no reference");
  if (!request.reference_dir.empty()) {
    ref_index = analysis::IndexDump(request.reference_dir);
    if (!ref_index.ok()) return ref_index.status();
    auto ref_rank = ChooseRank(*ref_index, r.rank, request.reference_dir);
    if (!ref_rank.ok()) return ref_rank.status();
    auto ref_located =
        Locate(**ref_rank, *name, r.iteration, r.call, request.reference_dir, nullptr);
    if (!ref_located.ok()) {
      return Status::InvalidArgument("the reference " + request.reference_dir +
                                     " lacks the kernel: " + ref_located.status().message());
    }
    auto tensors = LoadKernelTensors(*ref_located->kernel);
    if (!tensors.ok()) return tensors.status();
    reference = std::move(*tensors);
    r.reference_dir = (*ref_rank)->dir;
    r.has_reference = true;
  }

  auto tensors = LoadKernelTensors(entry);
  if (!tensors.ok()) return tensors.status();
  const std::vector<at::Tensor>& x = tensors->inputs;

  GraphInfo graph;
  std::string missing;
  auto info = FindGraphKernel(r.dump_dir, r.graph_id, *name, &graph, &missing);
  if (!info.ok()) return info.status();
  auto not_replayable = [&](const std::string& why) {
    r.verdict = ReplayVerdict::kNotReplayable;
    r.reason = "not replayable: " + why;
    return r;
  };
  if (!*info) return not_replayable(missing);
  r.schema = (*info)->schema;
  if (r.source.empty() && UserFrame((*info)->source_trace)) {
    r.source = torch_internal::DescribeSource(**info);
  }
  auto rebuilt = RebuildCall(**info, x.size());
  if (std::holds_alternative<std::string>(rebuilt)) {
    return not_replayable(std::get<std::string>(rebuilt));
  }
  const ReplayCall& call = std::get<ReplayCall>(rebuilt);

  // The kernel's dtype: that of its floating inputs (its outputs' when it has none).
  at::ScalarType dtype = at::kFloat;
  bool found_dtype = false;
  for (const at::Tensor& t : x) {
    if (t.is_floating_point()) {
      dtype = t.scalar_type();
      found_dtype = true;
      break;
    }
  }
  for (const at::Tensor& t : tensors->outputs) {
    if (!found_dtype && t.is_floating_point()) {
      dtype = t.scalar_type();
      found_dtype = true;
    }
  }
  r.dtype = DTypeText(dtype);
  r.unit_roundoff = UnitRoundoff(dtype);

  auto same = Execute(call, x);
  if (!same.ok()) return not_replayable(same.status().message() + " (on the dumped inputs)");
  if (tensors->outputs.empty()) {
    r.notes.push_back("the dump holds no outputs of the kernel: its replay is not checked");
  } else {
    r.reproduces = SameAsDumped(*same, tensors->outputs, &r.reproduce_max_abs);
    if (!r.reproduces) {
      r.notes.push_back("the replay differs from the dumped output by up to " +
                        Number(r.reproduce_max_abs) +
                        " (another LibTorch, thread count or device computed the dump)");
    }
  }
  size_t slot = same->size();
  for (size_t i = 0; i < same->size(); ++i) {
    if ((*same)[i].is_floating_point()) {
      slot = i;
      break;
    }
  }
  if (slot == same->size()) return not_replayable("it has no floating-point output to measure");
  r.output_slot = static_cast<uint32_t>(slot);

  auto exact = Execute(call, Cast(x, at::kDouble));
  if (!exact.ok()) return not_replayable(exact.status().message() + " (in float64)");
  if (exact->size() != same->size()) return not_replayable("its float64 run has other outputs");
  const at::Tensor& y = (*same)[slot];
  const at::Tensor& y64 = (*exact)[slot];
  r.own = Measure(y, y64);
  r.rounding = Measure(y64.to(dtype), y64).rel_l2;

  if (reference) {
    const std::vector<at::Tensor>& xr = reference->inputs;
    if (xr.size() != x.size()) {
      return Status::InvalidArgument("the reference holds " + std::to_string(xr.size()) +
                                     " inputs of " + *name + " and the dump " +
                                     std::to_string(x.size()));
    }
    for (size_t i = 0; i < x.size(); ++i) {
      if (xr[i].sizes() != x[i].sizes()) {
        std::ostringstream msg;
        msg << "input " << i << " of " << *name << " has shape " << x[i].sizes()
            << " in the dump and " << xr[i].sizes() << " in the reference";
        return Status::InvalidArgument(msg.str());
      }
      if (x[i].is_floating_point() && xr[i].is_floating_point()) {
        r.input_difference = std::max(r.input_difference, Measure(x[i], xr[i]).rel_l2);
        r.input_rounding = std::max(r.input_rounding, Measure(xr[i].to(dtype), xr[i]).rel_l2);
      }
    }
    auto ref_exact = Execute(call, Cast(xr, at::kDouble));
    if (!ref_exact.ok()) {
      return not_replayable(ref_exact.status().message() + " (on the reference's inputs)");
    }
    auto ref_rounded = Execute(call, RoundTo(xr, dtype));
    if (!ref_rounded.ok()) {
      return not_replayable(ref_rounded.status().message() + " (on the reference's inputs)");
    }
    if (ref_exact->size() <= slot || ref_rounded->size() <= slot) {
      return not_replayable("its run on the reference's inputs has other outputs");
    }
    const at::Tensor& yr64 = (*ref_exact)[slot];
    r.conditioning = Measure((*ref_rounded)[slot], yr64);
    r.inherited = Measure(y64, (*ref_rounded)[slot], yr64);
    r.total = Measure(y, yr64);
  }
  Judge(&r);
  if (reference && (r.verdict == ReplayVerdict::kIllConditioned ||
                    r.verdict == ReplayVerdict::kInherits)) {
    TraceChain(*index, *ref_index, &r);
  }
  return r;
}

}  // namespace

StatusOr<ReplayResult> ReplayKernel(const ReplayRequest& request) {
  ReplayResult r;
  torch_internal::ReplayMemoryScope budget;
  try {
    return ReplayInto(request, r);
  } catch (const std::exception& e) {
    // LibTorch raised outside the operator call (measuring a result, casting an input).
    const std::string what = torch_internal::ErrorText(e);
    if (r.full_name.empty()) return Status::Internal("replay failed: " + what);
    r.verdict = ReplayVerdict::kNotReplayable;
    r.reason = "not replayable: LibTorch failed: " + what;
    return r;
  }
}

}  // namespace graphdump
