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
using replay_internal::ChangedElements;
using replay_internal::ChooseRank;
using replay_internal::DTypeText;
using replay_internal::FindGraphKernel;
using replay_internal::Judge;
using replay_internal::KernelTensors;
using replay_internal::LoadKernelTensors;
using replay_internal::Locate;
using replay_internal::Measure;
using replay_internal::MeasureDiscrete;
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
  auto exact = Execute(call, Cast(x, at::kDouble));
  if (!exact.ok()) return not_replayable(exact.status().message() + " (in float64)");
  if (exact->size() != same->size()) return not_replayable("its float64 run has other outputs");
  if (same->empty()) return not_replayable("it has no output to measure");

  std::optional<std::vector<at::Tensor>> ref_exact, ref_rounded;
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
      } else if (!x[i].is_floating_point() && !x[i].is_complex() &&
                 ChangedElements(x[i], xr[i]) > 0) {
        r.discrete_input_differs = true;
      }
    }
    auto exact_r = Execute(call, Cast(xr, at::kDouble));
    if (!exact_r.ok()) {
      return not_replayable(exact_r.status().message() + " (on the reference's inputs)");
    }
    auto rounded_r = Execute(call, RoundTo(xr, dtype));
    if (!rounded_r.ok()) {
      return not_replayable(rounded_r.status().message() + " (on the reference's inputs)");
    }
    if (exact_r->size() != same->size() || rounded_r->size() != same->size()) {
      return not_replayable("its run on the reference's inputs has other outputs");
    }
    ref_exact = std::move(*exact_r);
    ref_rounded = std::move(*rounded_r);
  }

  // Which output to measure: a discrete output whose elements differ is the divergence; else
  // the first floating output; else the first output (discrete, unchanged).
  auto discrete = [](const at::Tensor& t) { return !t.is_floating_point() && !t.is_complex(); };
  size_t slot = same->size();
  for (size_t i = 0; i < same->size() && slot == same->size(); ++i) {
    if (!discrete((*same)[i])) continue;
    int64_t changed = 0;
    if (reference && i < reference->outputs.size()) {
      changed = ChangedElements((*same)[i], reference->outputs[i]);
    } else if (ref_exact) {
      changed = ChangedElements((*same)[i], (*ref_exact)[i]);
    } else {
      changed = ChangedElements((*same)[i], (*exact)[i]);
    }
    if (changed > 0) {
      slot = i;
      r.discrete_changed = changed;
    }
  }
  for (size_t i = 0; i < same->size() && slot == same->size(); ++i) {
    if ((*same)[i].is_floating_point()) slot = i;
  }
  if (slot == same->size()) slot = 0;
  r.output_slot = static_cast<uint32_t>(slot);
  r.output_dtype = DTypeText((*same)[slot].scalar_type());
  r.discrete = discrete((*same)[slot]);
  const at::Tensor& y = (*same)[slot];
  const at::Tensor& y64 = (*exact)[slot];
  if (r.discrete) {
    r.discrete_elements = y.numel();
    r.own = MeasureDiscrete(y, y64);
    r.rounding = 0;
  } else {
    r.own = Measure(y, y64);
    r.rounding = Measure(y64.to(dtype), y64).rel_l2;
  }
  if (reference) {
    const at::Tensor& yr64 = (*ref_exact)[slot];
    const at::Tensor& yr_rounded = (*ref_rounded)[slot];
    if (r.discrete) {
      r.conditioning = MeasureDiscrete(yr_rounded, yr64);
      r.inherited = MeasureDiscrete(y64, yr_rounded);
      r.total = MeasureDiscrete(y, yr64);
    } else {
      r.conditioning = Measure(yr_rounded, yr64);
      r.inherited = Measure(y64, yr_rounded, yr64);
      r.total = Measure(y, yr64);
    }
  }
  if (reference && r.discrete) {
    // Whether the choice was made here or upstream is compare's judgement of the iteration
    // (docs/precision.md, "Discrete outputs"); where it has none, inputs that differ by more
    // than their rounding in a way that explains more of the change than their rounding does.
    const std::optional<bool> inherited = replay_internal::ComparedDiscreteInherited(
        *index, *ref_index, r);
    r.discrete_upstream =
        r.discrete_input_differs ||
        (inherited ? *inherited
                   : r.input_difference > analysis::kRoundingMultiple * r.input_rounding &&
                         r.inherited.rel_l2 > r.conditioning.rel_l2);
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
