// graphdump replay (docs/precision.md, "Replay"): finds a kernel's dumped files with the
// analysis index, rebuilds its operator call from the graph file's schema and arguments
// (graph.h KernelArgument), runs it with LibTorch in its dtype and in float64, and measures with
// compare's metrics (tensor_math.h).
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

#include "graph_compiler.h"
#include "graphdump/analysis/dump_index.h"
#include "graphdump/analysis/npy_file.h"
#include "graphdump/analysis/precision_verdict.h"
#include "graphdump/analysis/tensor_math.h"
#include "graphdump/file_system.h"
#include "graphdump/graph_files.h"
#include "graphdump/npy.h"
#include "graphdump/torch/scalar_type.h"
#include "replay_execute.h"
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

// Above this many units of roundoff of the kernel's dtype, a number is more than rounding: an
// accurate kernel's output carries one rounding (about u/2 in relative L2) plus a few in its
// computation.
constexpr double kSignificantRoundings = 4;

double UnitRoundoff(at::ScalarType type) {
  switch (type) {
    case at::kBFloat16:
      return std::ldexp(1.0, -8);
    case at::kHalf:
      return std::ldexp(1.0, -11);
    case at::kFloat:
      return std::ldexp(1.0, -24);
    default:
      return std::ldexp(1.0, -53);
  }
}

std::string DTypeText(at::ScalarType type) {
  auto dtype = torch_compat::ToDType(type);
  return dtype ? std::string(DTypeName(*dtype)) : std::string(c10::toString(type));
}

// ---------------------------------------------------------------------------------------------
// Finding the kernel.

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string JoinNames(const std::vector<std::string>& names, size_t limit) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < limit; ++i) text += "\n  " + names[i];
  if (names.size() > limit) text += "\n  ... (" + std::to_string(names.size() - limit) + " more)";
  return text;
}

struct Located {
  const RankEntry* rank = nullptr;
  const GraphEntry* graph = nullptr;
  const IterationEntry* iteration = nullptr;
  const KernelEntry* kernel = nullptr;
};

StatusOr<const RankEntry*> ChooseRank(const DumpIndex& index, std::optional<uint32_t> rank,
                                      const std::string& dir) {
  if (index.ranks.empty()) return Status::InvalidArgument(dir + " holds no rank directory");
  if (!rank) return &index.ranks.front();
  std::string have;
  for (const RankEntry& r : index.ranks) {
    if (r.rank == *rank) return &r;
    have += (have.empty() ? "" : ", ") + std::to_string(r.rank);
  }
  return Status::InvalidArgument("--rank " + std::to_string(*rank) + ": " + dir + " holds ranks " +
                                 have);
}

// The full name `wanted` names in `rank`: itself, or the one kernel whose op type equals it or
// whose full name contains it (case-insensitively).
StatusOr<std::string> ResolveKernelName(const RankEntry& rank, const std::string& wanted,
                                        const std::string& dir) {
  std::set<std::string> all;
  for (const GraphEntry& g : rank.graphs) {
    for (const std::string& name : g.execution_order) all.insert(name);
    for (const IterationEntry& it : g.iterations) {
      for (const KernelEntry& k : it.kernels) {
        if (!k.is_parameter) all.insert(k.full_name);
      }
    }
  }
  if (all.count(wanted)) return wanted;
  const std::string needle = Lower(wanted);
  std::vector<std::string> by_type, by_substring;
  for (const std::string& name : all) {
    if (Lower(OpTypeFromFullName(name)) == needle) by_type.push_back(name);
    if (Lower(name).find(needle) != std::string::npos) by_substring.push_back(name);
  }
  const std::vector<std::string>& hits = by_type.empty() ? by_substring : by_type;
  if (hits.size() == 1) return hits[0];
  if (hits.empty()) {
    return Status::InvalidArgument("no kernel of " + dir + " is named '" + wanted +
                                   "' (a full name, an op type or a piece of a full name); its "
                                   "kernels:" +
                                   JoinNames(std::vector<std::string>(all.begin(), all.end()), 20));
  }
  return Status::InvalidArgument("'" + wanted + "' matches " + std::to_string(hits.size()) +
                                 " kernels of " + dir +
                                 "; give one full name:" + JoinNames(hits, 20));
}

StatusOr<Located> Locate(const RankEntry& rank, const std::string& full_name,
                         std::optional<int64_t> iteration, std::optional<uint32_t> call,
                         const std::string& dir, std::vector<std::string>* notes) {
  std::vector<Located> found;
  uint32_t calls = 0;
  for (const GraphEntry& g : rank.graphs) {
    for (const IterationEntry& it : g.iterations) {
      if (it.iteration < 0) continue;  // constants/
      for (const KernelEntry& k : it.kernels) {
        if (k.full_name != full_name) continue;
        if (!iteration || it.iteration == *iteration) calls = std::max(calls, k.calls);
        if (k.call == call.value_or(0)) found.push_back({&rank, &g, &it, &k});
      }
    }
  }
  if (call && *call > 0 && found.empty()) {
    return Status::InvalidArgument("--call " + std::to_string(*call) + ": " + dir +
                                   " holds kernel " + full_name + " " + std::to_string(calls) +
                                   " time(s) per iteration (calls count from 0)");
  }
  if (!call && calls > 1 && notes) {
    notes->push_back("replayed call 0 of " + std::to_string(calls) + " in the iteration " +
                     "(choose with --call)");
  }
  if (found.empty()) {
    return Status::InvalidArgument("kernel " + full_name + " has no dumped tensors in " + dir +
                                   " (rank " + std::to_string(rank.rank) +
                                   "): the configuration did not select it");
  }
  std::string have;
  for (const Located& l : found) {
    have += (have.empty() ? "" : ", ") + std::to_string(l.iteration->iteration);
  }
  if (iteration) {
    for (const Located& l : found) {
      if (l.iteration->iteration == *iteration) return l;
    }
    return Status::InvalidArgument("--iteration " + std::to_string(*iteration) + ": " + dir +
                                   " holds kernel " + full_name + " in iterations " + have);
  }
  if (found.size() > 1 && notes) {
    notes->push_back("replayed iteration " + std::to_string(found[0].iteration->iteration) +
                     " of " + have + " (choose with --iteration)");
  }
  return found.front();
}

// ---------------------------------------------------------------------------------------------
// Tensors.

StatusOr<at::Tensor> LoadTensor(const TensorEntry& entry) {
  auto mapped = analysis::OpenTensor(entry);
  if (!mapped.ok()) return mapped.status();
  const NpyInfo& info = (*mapped)->info();
  auto stored = ToScalarType(info.dtype);
  if (!stored) {
    return Status::Unsupported(entry.path + ": LibTorch has no dtype for " +
                               std::string(DTypeName(info.dtype)));
  }
  std::vector<int64_t> shape = info.shape;
  if (info.fortran_order) std::reverse(shape.begin(), shape.end());
  at::Tensor t =
      at::from_blob(const_cast<uint8_t*>((*mapped)->data()), shape, at::TensorOptions(*stored))
          .clone();
  if (info.fortran_order && shape.size() > 1) {
    std::vector<int64_t> order(shape.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(order.size() - 1 - i);
    t = t.permute(order).contiguous();
  }
  // A bfloat16 tensor is stored as float32; the file name keeps its dtype.
  if (entry.dtype && *entry.dtype != info.dtype) {
    auto named = ToScalarType(*entry.dtype);
    if (named) t = t.to(*named);
  }
  return t;
}

struct KernelTensors {
  std::vector<at::Tensor> inputs;   // by slot
  std::vector<at::Tensor> outputs;  // by slot
};

StatusOr<KernelTensors> LoadKernelTensors(const KernelEntry& kernel) {
  KernelTensors out;
  for (const TensorEntry& t : kernel.tensors) {
    if (t.path.empty()) continue;
    auto& list = t.is_input ? out.inputs : out.outputs;
    if (t.slot != list.size()) {
      return Status::Corrupt("kernel " + kernel.full_name + ": " +
                             (t.is_input ? "input" : "output") + " slot " +
                             std::to_string(list.size()) + " has no file (next: " + t.path + ")");
    }
    auto tensor = LoadTensor(t);
    if (!tensor.ok()) return tensor.status();
    list.push_back(std::move(*tensor));
  }
  return out;
}

// `t` as contiguous float64 in a .npy held in memory, for the analysis metrics.
std::unique_ptr<analysis::MappedNpy> AsNpy(const at::Tensor& t) {
  at::Tensor d = t.to(at::kDouble).contiguous();
  std::vector<int64_t> shape(d.sizes().begin(), d.sizes().end());
  std::string header = NpyHeader(DType::kFloat64, shape);
  std::vector<uint8_t> bytes(header.begin(), header.end());
  const auto* data = static_cast<const uint8_t*>(d.data_ptr());
  bytes.insert(bytes.end(), data, data + d.numel() * sizeof(double));
  auto npy = analysis::MappedNpy::FromBytes(std::move(bytes), "replay");
  return npy.ok() ? std::move(*npy) : nullptr;
}

// a against b with compare's metrics; rel_l2 is ||a-b|| / ||norm_of|| (b when undefined).
ReplayError Measure(const at::Tensor& a, const at::Tensor& b, const at::Tensor& norm_of = {}) {
  ReplayError e;
  auto na = AsNpy(a), nb = AsNpy(b);
  if (!na || !nb || na->NumElements() != nb->NumElements()) {
    e.rel_l2 = e.max_abs = std::numeric_limits<double>::quiet_NaN();
    e.cosine = std::numeric_limits<double>::quiet_NaN();
    return e;
  }
  const analysis::PairMetrics m = analysis::ComparePair(*na, *nb, 0, 0);
  const analysis::DeltaNorms d = analysis::DeltaBetween(*na, *nb);
  double ref = d.ref_l2;
  if (norm_of.defined()) ref = norm_of.to(at::kDouble).norm().item<double>();
  e.rel_l2 = ref > 0 ? d.diff_l2 / ref : (d.diff_l2 > 0 ? INFINITY : 0.0);
  e.max_abs = m.max_abs_err;
  e.cosine = m.cosine;
  if (m.nonfinite_mismatches > 0) e.rel_l2 = e.max_abs = INFINITY;
  return e;
}

// Every tensor of `outputs` equals the dumped one (as stored: bfloat16 widened exactly).
bool SameAsDumped(const std::vector<at::Tensor>& replayed, const std::vector<at::Tensor>& dumped,
                  double* max_abs) {
  *max_abs = 0;
  if (replayed.size() != dumped.size()) return false;
  bool same = true;
  for (size_t i = 0; i < replayed.size(); ++i) {
    const at::Tensor& a = replayed[i];
    const at::Tensor& b = dumped[i];
    if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) {
      *max_abs = INFINITY;
      return false;
    }
    if (a.is_floating_point()) {
      at::Tensor x = a.to(at::kDouble), y = b.to(at::kDouble);
      at::Tensor both_nan = x.isnan().logical_and(y.isnan());
      at::Tensor equal = x.eq(y).logical_or(both_nan);
      if (!equal.all().item<bool>()) same = false;
      at::Tensor diff = (x - y).abs().masked_fill(both_nan, 0);
      if (diff.numel() > 0) *max_abs = std::max(*max_abs, diff.max().item<double>());
    } else if (!a.equal(b)) {
      same = false;
      *max_abs = INFINITY;
    }
  }
  return same;
}

std::vector<at::Tensor> Cast(const std::vector<at::Tensor>& inputs, at::ScalarType dtype) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : inputs) out.push_back(t.is_floating_point() ? t.to(dtype) : t);
  return out;
}

// Rounded to `dtype` and back to float64: the values a `dtype` tensor can hold.
std::vector<at::Tensor> RoundTo(const std::vector<at::Tensor>& inputs, at::ScalarType dtype) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : inputs) {
    out.push_back(t.is_floating_point() ? t.to(dtype).to(at::kDouble) : t);
  }
  return out;
}

std::string Number(double x) {
  if (!std::isfinite(x)) return std::isnan(x) ? "nan" : "inf";
  std::ostringstream out;
  out.precision(3);
  out << x;
  return out.str();
}

std::string Times(double a, double b) {
  if (b <= 0) return "far more than";
  return Number(a / b) + " times";
}

double Key(double x) { return std::isnan(x) ? INFINITY : x; }

// The verdict of the model every precision tool shares (precision_verdict.h), in words.
void Judge(ReplayResult* r) {
  const double floor = kSignificantRoundings * r->unit_roundoff;
  const double own = Key(r->own.rel_l2);
  const double cond = r->has_reference ? Key(r->conditioning.rel_l2) : 0;
  const double inh = r->has_reference ? Key(r->inherited.rel_l2) : 0;
  const std::string& d = r->dtype;
  analysis::PrecisionEvidence evidence;
  evidence.significant = std::max({own, cond, inh}) > floor;
  evidence.own = own;
  evidence.own_floor = floor;
  evidence.growth_floor = analysis::StandardFor(d, d).rtol;
  if (r->has_reference) {
    evidence.conditioning = cond;
    evidence.inherited = inh;
    evidence.input_difference = r->input_difference;
    evidence.input_rounding = r->input_rounding;
    evidence.output_error = Key(r->total.rel_l2);
  }
  const analysis::PrecisionJudgement j = analysis::JudgePrecision(evidence);
  r->growth = j.growth;
  r->inputs_near_rounding = j.inputs_near_rounding;
  // "0.0027 (1.6 times their rounding to bfloat16, 0.0017)"
  const std::string inputs =
      Number(r->input_difference) + " (" +
      (r->input_rounding > 0 ? Times(r->input_difference, r->input_rounding) : "far more than") +
      " their rounding to " + d + ", " + Number(r->input_rounding) + ")";
  switch (j.verdict) {
    case analysis::PrecisionVerdict::kAccurate:
      r->verdict = ReplayVerdict::kAccurate;
      r->reason =
          "accurate at " + d + ": its own error (" + Number(r->own.rel_l2) + ")" +
          (r->has_reference ? ", conditioning (" + Number(r->conditioning.rel_l2) +
                                  ") and inherited error (" + Number(r->inherited.rel_l2) + ")"
                            : "") +
          (r->has_reference ? " are" : " is") + " within " + Number(kSignificantRoundings) +
          " roundings of " + d + " (" + Number(floor) + ")" +
          (r->has_reference ? "" : "; give --reference for conditioning and inheritance");
      return;
    case analysis::PrecisionVerdict::kInaccurate:
      r->verdict = ReplayVerdict::kInaccurate;
      r->reason = "inaccurate at " + d + ": its own error (" + Number(r->own.rel_l2) + ") is " +
                  Times(r->own.rel_l2, r->rounding) + " what rounding its output to " + d +
                  " gives (" + Number(r->rounding) + "); computing it in float32 " +
                  "(run --keep-fp32) removes it";
      return;
    case analysis::PrecisionVerdict::kIllConditioned:
    case analysis::PrecisionVerdict::kAddsError:
      r->verdict = ReplayVerdict::kIllConditioned;
      r->reason = "ill-conditioned: rounding its inputs to " + d + " alone gives error " +
                  Number(r->conditioning.rel_l2) + " (" +
                  Times(r->conditioning.rel_l2, r->input_rounding) +
                  " the inputs' own rounding, " + Number(r->input_rounding) +
                  "), its inputs differ from the reference run's by " + inputs +
                  " and its output by " + Number(r->total.rel_l2) + " (x" + Number(j.growth) +
                  "), while its own error is " + Number(r->own.rel_l2) +
                  ": it magnifies the error of its inputs" +
                  (j.inputs_near_rounding ? ", which carry only their rounding" : "") +
                  "; computing it alone in float32 does not help: keep it and the chain that "
                  "produces its inputs in float32, or change the formula";
      return;
    case analysis::PrecisionVerdict::kInherits:
      r->verdict = ReplayVerdict::kInherits;
      r->reason = "inherits: its inputs already differ from the reference run's by " + inputs +
                  ", which makes its output differ by " + Number(r->total.rel_l2) + " (x" +
                  Number(j.growth) + "; its own error is " + Number(r->own.rel_l2) +
                  ", conditioning " + Number(r->conditioning.rel_l2) + "): look at the kernels "
                  "before it";
      return;
  }
}

// The chain of kernels and parameters that produces the kernel's inputs, from a comparison of
// the dump with the reference in the replayed iteration (precision_verdict.h); an inheriting
// kernel names the kernel upstream that added its error.
void TraceChain(const analysis::DumpIndex& dump, const analysis::DumpIndex& reference,
                ReplayResult* r) {
  analysis::CompareOptions options;
  options.iteration = r->iteration;
  options.progress = false;
  const analysis::CompareResult compared = analysis::CompareDumps(dump, reference, options);
  int64_t index = -1;
  for (size_t i = 0; i < compared.kernels.size(); ++i) {
    const analysis::KernelComparison& k = compared.kernels[i];
    if (k.rank == r->rank && k.graph_id == r->graph_id && k.iteration == r->iteration &&
        k.call == r->call && k.name_a == r->full_name) {
      index = static_cast<int64_t>(i);
    }
  }
  if (index < 0) return;
  const analysis::PrecisionChain chain = analysis::InputChain(compared, index);
  if (r->verdict == ReplayVerdict::kInherits) {
    if (chain.upstream >= 0) {
      const analysis::KernelComparison& k = compared.kernels[chain.upstream];
      r->upstream = k.name_a;
      const std::string at = k.source_line.empty() ? "" : " at " + k.source_line;
      r->reason.replace(r->reason.rfind("look at the kernels before it"), std::string::npos,
                        "the error was added upstream by " + k.name_a + at +
                            " (graphdump replay it)");
    }
    return;
  }
  r->float32_chain = analysis::PrecisionChainJson(compared, chain).dump();
  r->chain_text = analysis::PrecisionChainText(compared, chain, "  ");
}

StatusOr<const KernelInfo*> FindGraphKernel(const std::string& rank_dir, uint32_t graph_id,
                                            const std::string& full_name, GraphInfo* graph,
                                            std::string* missing) {
  const std::string path =
      rank_dir + "/graphs/ms_output_trace_code_graph_" + std::to_string(graph_id) + ".pb";
  auto bytes = ReadRegularFile(path);
  if (!bytes.ok()) {
    *missing =
        "the dump has no readable graph file " + path + " (" + bytes.status().message() + ")";
    return nullptr;
  }
  auto parsed = ParseGraphProto(*bytes, path);
  if (!parsed.ok()) return parsed.status();
  *graph = std::move(*parsed);
  for (const KernelInfo& k : graph->kernels) {
    if (k.full_name == full_name) return &k;
  }
  *missing = "the graph file " + path + " does not list the kernel";
  return nullptr;
}

}  // namespace

const char* ReplayVerdictName(ReplayVerdict verdict) {
  switch (verdict) {
    case ReplayVerdict::kAccurate:
      return "accurate";
    case ReplayVerdict::kInaccurate:
      return "inaccurate";
    case ReplayVerdict::kIllConditioned:
      return "ill-conditioned";
    case ReplayVerdict::kInherits:
      return "inherits";
    case ReplayVerdict::kNotReplayable:
      return "not replayable";
  }
  return "?";
}

namespace {

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

std::string ReplayResultJson(const ReplayResult& r) {
  auto num = [](double x) -> nlohmann::json {
    return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json();
  };
  auto error = [&](const ReplayError& e) {
    return nlohmann::json{
        {"rel_l2", num(e.rel_l2)}, {"max_abs", num(e.max_abs)}, {"cosine", num(e.cosine)}};
  };
  nlohmann::json j = {{"kernel", r.full_name},
                      {"op_type", r.op_type},
                      {"schema", r.schema},
                      {"source", r.source},
                      {"dump", r.dump_dir},
                      {"rank", r.rank},
                      {"graph", r.graph_id},
                      {"iteration", r.iteration},
                      {"call", r.call},
                      {"dtype", r.dtype},
                      {"replayable", r.verdict != ReplayVerdict::kNotReplayable},
                      {"verdict", ReplayVerdictName(r.verdict)},
                      {"reason", r.reason},
                      {"notes", r.notes}};
  if (r.verdict != ReplayVerdict::kNotReplayable) {
    j["reproduces"] = r.reproduces;
    j["reproduce_max_abs"] = num(r.reproduce_max_abs);
    j["unit_roundoff"] = r.unit_roundoff;
    j["output_slot"] = r.output_slot;
    j["own"] = error(r.own);
    j["rounding"] = num(r.rounding);
    if (r.has_reference) {
      j["reference"] = r.reference_dir;
      j["conditioning"] = error(r.conditioning);
      j["inherited"] = error(r.inherited);
      j["total"] = error(r.total);
      j["input_difference"] = num(r.input_difference);
      j["input_rounding"] = num(r.input_rounding);
      j["inputs_near_rounding"] = r.inputs_near_rounding;
      j["growth"] = num(r.growth);
      j["upstream"] = r.upstream.empty() ? nlohmann::json() : nlohmann::json(r.upstream);
      j["float32_chain"] = r.float32_chain.empty() ? nlohmann::json()
                                                   : nlohmann::json::parse(r.float32_chain);
    }
  }
  return j.dump(2);
}

std::string ReplayResultText(const ReplayResult& r) {
  std::ostringstream out;
  out << "kernel     " << r.full_name << "\n";
  if (!r.source.empty()) out << "source     " << r.source << "\n";
  out << "dump       " << r.dump_dir << " (rank " << r.rank << ", graph " << r.graph_id
      << ", iteration " << r.iteration << (r.call > 0 ? ", call " + std::to_string(r.call) : "")
      << ")\n";
  if (r.verdict != ReplayVerdict::kNotReplayable) {
    out << "computed   in " << r.dtype << "; replayed output "
        << (r.reproduces ? "equals the dumped one bit for bit" : "differs from the dumped one")
        << "\n";
    out << "own          " << Number(r.own.rel_l2) << "  (" << r.dtype
        << " against float64 on the same inputs; rounding the output alone: " << Number(r.rounding)
        << ")\n";
    if (r.has_reference) {
      out << "conditioning " << Number(r.conditioning.rel_l2) << "  (float64 on the reference's "
          << "inputs rounded to " << r.dtype << "; their rounding: " << Number(r.input_rounding)
          << ")\n";
      out << "inherited    " << Number(r.inherited.rel_l2)
          << "  (float64 on this run's inputs against the rounded reference's; inputs differ by "
          << Number(r.input_difference) << ")\n";
      out << "total        " << Number(r.total.rel_l2)
          << "  (this run's output against float64 on the reference's inputs)\n";
    }
  }
  out << "verdict    " << r.reason << "\n";
  out << r.chain_text;
  for (const std::string& note : r.notes) out << "note       " << note << "\n";
  return out.str();
}

}  // namespace graphdump
