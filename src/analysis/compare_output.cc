// compare: the result as the CSV of --out and as JSON (docs/analysis.md).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "compare_json.h"
#include "graphdump/analysis/compare.h"
#include "graphdump/analysis/precision_verdict.h"
#include "graphdump/analysis/source_json.h"
#include "graphdump/internal/json_text.h"

namespace graphdump::analysis {
namespace {

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string Num(double v) { return fmt::format("{:.9g}", v); }

}  // namespace

std::string CompareCsvHeader() {
  return "rank,graph_id,iteration,call,order,kernel_a,kernel_b,op_type,pairing,io,slot,mode,dtype_a,"
      "dtype_b,shape_a,shape_b,elements,cosine,max_abs_err,max_rel_err,rmse,"
      "rel_err_below_0.1pct,rel_err_below_0.5pct,allclose_failures,nan_a,nan_b,inf_a,inf_b,"
      "nonfinite_mismatches,verdict,kernel_verdict,reason,source_line,path_a,path_b,standard,"
      "norm_rel_err,error,role,input_error,output_error,growth,added_error,adds_error,"
      "contribution_rank\n";
}

void AppendCompareCsvRows(const KernelComparison& k, int contribution_rank, std::string* out,
                          std::vector<size_t>* rank_at) {
    for (const TensorComparison& t : k.tensors) {
      const PairMetrics& m = t.metrics;
      const bool has = t.mode == "tensor" && t.reason.rfind("shape", 0) != 0;
      auto metric = [&](double v) { return has ? Num(v) : std::string(); };
      auto count = [&](int64_t v) { return has ? std::to_string(v) : std::string(); };
      auto known = [](double v) { return std::isnan(v) ? std::string() : Num(v); };
      *out += fmt::format(
          "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},"
          "{},{},{},{},{},{},",
          k.rank, k.graph_id, k.iteration, k.call, k.order, CsvField(k.name_a), CsvField(k.name_b),
          CsvField(k.op_type), PairingName(k.pairing), t.is_input ? "input" : "output", t.slot,
          t.mode, t.dtype_a, t.dtype_b, CsvField(t.shape_a), CsvField(t.shape_b), count(m.elements),
          metric(m.cosine), metric(m.max_abs_err), metric(m.max_rel_err), metric(m.rmse),
          metric(m.rel_err_below_0_1pct), metric(m.rel_err_below_0_5pct),
          count(m.allclose_failures), count(m.nan_a), count(m.nan_b), count(m.inf_a),
          count(m.inf_b), count(m.nonfinite_mismatches), VerdictName(t.verdict),
          VerdictName(k.verdict), CsvField(t.reason), CsvField(k.source_line), CsvField(t.path_a),
          CsvField(t.path_b));
      *out += fmt::format("{},{},{},{},{},{},{},{},{},", t.standard, metric(m.norm_rel_err),
                          known(t.error), KernelRoleName(k.role), known(k.input_error),
                          known(k.output_error), known(k.growth), known(k.added_error),
                          k.adds_error ? "true" : "false");
      if (rank_at) {
        rank_at->push_back(out->size());
        *out += '\n';
      } else {
        *out += fmt::format("{}\n", contribution_rank);
      }
    }
}

std::string CompareResultCsv(const CompareResult& result) {
  std::string out = CompareCsvHeader();
  for (const KernelComparison& k : result.kernels) AppendCompareCsvRows(k, k.contribution_rank, &out);
  return out;
}

namespace {

nlohmann::json Finite(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(fmt::format("{}", v));
}
// NaN: not measured (null); infinities as text, like Finite.
nlohmann::json Known(double v) { return std::isnan(v) ? nlohmann::json(nullptr) : Finite(v); }

void AttributionJson(const CompareResult& result, const KernelComparison& k, nlohmann::json* o) {
  using nlohmann::json;
  (*o)["role"] = KernelRoleName(k.role);
  (*o)["input_error"] = Known(k.input_error);
  (*o)["output_error"] = Known(k.output_error);
  (*o)["growth"] = Known(k.growth);
  (*o)["added_error"] = Known(k.added_error);
  (*o)["adds_error"] = k.adds_error;
  (*o)["contribution_rank"] = k.contribution_rank;
  (*o)["input_rounding"] = Known(k.input_rounding);
  (*o)["inputs_near_rounding"] = k.inputs_near_rounding;
  (*o)["error_origin"] = k.error_origin >= 0 ? json(result.kernels[k.error_origin].name_a)
                                             : json(nullptr);
  (*o)["discrete_divergence"] = k.discrete_divergence;
  (*o)["discrete_change"] = k.discrete_change.empty() ? json(nullptr) : json(k.discrete_change);
}

}  // namespace

nlohmann::json BriefKernelJson(const CompareResult& result, const KernelComparison& f) {
  using nlohmann::json;
  json o = {{"kernel", f.name_a},   {"iteration", f.iteration},
            {"call", f.call},       {"graph_id", f.graph_id},
            {"rank", f.rank},       {"order", f.order},
            {"op_type", f.op_type}, {"source_line", f.source_line},
            {"reason", f.reason},   {"source_trace", SourceTraceJson<json>(f.source_trace)}};
  if (!f.fused_ops.empty()) o["fused_ops"] = f.fused_ops;
  AttributionJson(result, f, &o);
  if (f.adds_error) {
    const int64_t index = &f - result.kernels.data();
    o["float32_chain"] = PrecisionChainJson(result, InputChain(result, index));
  }
  return o;
}

nlohmann::json KernelComparisonJson(const CompareResult& result, const KernelComparison& k) {
  using nlohmann::json;
  json tensors = json::array();
  for (const TensorComparison& t : k.tensors) {
    json jt = {{"io", t.is_input ? "input" : "output"},
               {"slot", t.slot},
               {"mode", t.mode},
               {"dtype_a", t.dtype_a},
               {"dtype_b", t.dtype_b},
               {"shape_a", t.shape_a},
               {"shape_b", t.shape_b},
               {"verdict", VerdictName(t.verdict)},
               {"reason", t.reason},
               {"first_index", t.first_index.empty() ? json(nullptr) : json(t.first_index)},
               {"standard", t.standard},
               {"error", Known(t.error)},
               {"rounding", Known(t.rounding)},
               {"discrete", t.discrete},
               {"path_a", t.path_a},
               {"path_b", t.path_b}};
    if (t.mode == "tensor") {
      const PairMetrics& m = t.metrics;
      jt["metrics"] = {{"elements", m.elements},
                       {"cosine", Finite(m.cosine)},
                       {"max_abs_err", Finite(m.max_abs_err)},
                       {"max_rel_err", Finite(m.max_rel_err)},
                       {"rmse", Finite(m.rmse)},
                       {"norm_rel_err", Finite(m.norm_rel_err)},
                       {"rel_err_below_0.1pct", m.rel_err_below_0_1pct},
                       {"rel_err_below_0.5pct", m.rel_err_below_0_5pct},
                       {"allclose_failures", m.allclose_failures},
                       {"nan_a", m.nan_a},
                       {"nan_b", m.nan_b},
                       {"inf_a", m.inf_a},
                       {"inf_b", m.inf_b},
                       {"nonfinite_mismatches", m.nonfinite_mismatches}};
    }
    if (!t.stat_diffs.empty()) {
      json diffs = json::object();
      for (const auto& [name, v] : t.stat_diffs) diffs[std::string(name.view())] = Finite(v);
      jt["statistic_rel_diffs"] = diffs;
    }
    tensors.push_back(std::move(jt));
  }
  json jk = {{"rank", k.rank},
             {"graph_id", k.graph_id},
             {"iteration", k.iteration},
             {"call", k.call},
             {"order", k.order},
             {"kernel_a", k.name_a},
             {"kernel_b", k.name_b},
             {"op_type", k.op_type},
             {"pairing", PairingName(k.pairing)},
             {"source_line", k.source_line},
             {"source_trace", SourceTraceJson<json>(k.source_trace)},
             {"verdict", VerdictName(k.verdict)},
             {"reason", k.reason}};
  if (!k.fused_ops.empty()) jk["fused_ops"] = k.fused_ops;
  // Moved, not copied: a kernel may hold 100,000 tensors (an initializer list copies).
  jk["tensors"] = std::move(tensors);
  AttributionJson(result, k, &jk);
  return jk;
}

nlohmann::json DifferingSourceJson(const KernelComparison& k) {
  return {{"kernel", k.name_a},      {"role", KernelRoleName(k.role)},
          {"iteration", k.iteration}, {"graph_id", k.graph_id},
          {"rank", k.rank},           {"error", Known(k.output_error)},
          {"reason", k.reason}};
}

nlohmann::json DifferingGraphInputJson(const KernelComparison& k, uint32_t slot) {
  using nlohmann::json;
  auto t = std::find_if(k.tensors.begin(), k.tensors.end(),
                        [&](const TensorComparison& x) { return x.is_input && x.slot == slot; });
  return {{"kernel", k.name_a},
          {"slot", slot},
          {"iteration", k.iteration},
          {"call", k.call},
          {"graph_id", k.graph_id},
          {"rank", k.rank},
          {"error", t == k.tensors.end() ? json(nullptr) : Known(t->error)},
          {"reason", t == k.tensors.end() ? std::string() : t->reason}};
}

nlohmann::json CallCountDifferenceJson(const CallCountDifference& d) {
  return {{"rank", d.rank},         {"graph_id", d.graph_id}, {"iteration", d.iteration},
          {"kernel_a", d.name_a},   {"kernel_b", d.name_b},   {"calls_a", d.calls_a},
          {"calls_b", d.calls_b}};
}

nlohmann::json SkippedJson(const std::vector<Skipped>& skipped) {
  nlohmann::json list = nlohmann::json::array();
  for (const Skipped& s : skipped) list.push_back({{"path", s.path}, {"reason", s.reason}});
  return list;
}

nlohmann::json UnpairedKernelJson(const UnpairedKernel& u) {
  nlohmann::json j = {{"side", std::string(1, u.side)}, {"rank", u.rank},
                      {"graph_id", u.graph_id},         {"iteration", u.iteration},
                      {"call", u.call},                 {"kernel", u.full_name}};
  if (!u.why.empty()) j["why"] = u.why;  // "intermediate": a value a fusion never materialises
  return j;
}

std::string CompareResultJson(const CompareResult& result) {
  using nlohmann::json;
  json j;
  j["summary"] = {{"kernels", result.kernels.size()},   {"pass", result.passed},
                  {"warning", result.warnings},         {"error", result.errors},
                  {"unpaired", result.unpaired.size()}, {"skipped", result.skipped.size()}};
  auto brief = [&](const KernelComparison& f) { return BriefKernelJson(result, f); };
  json kernels = json::array();
  for (const KernelComparison& k : result.kernels) {
    kernels.push_back(KernelComparisonJson(result, k));
  }
  j["kernels"] = std::move(kernels);
  j["first_failure"] =
      result.first_failure >= 0 ? brief(result.kernels[result.first_failure]) : json(nullptr);
  j["first_adding_error"] = result.first_adding_error >= 0
                                ? brief(result.kernels[result.first_adding_error])
                                : json(nullptr);
  json contributors = json::array();
  for (int64_t i : result.contributors) contributors.push_back(brief(result.kernels[i]));
  j["contributors"] = contributors;
  json sources = json::array();
  for (int64_t i : result.differing_sources) {
    sources.push_back(DifferingSourceJson(result.kernels[i]));
  }
  j["differing_sources"] = sources;
  json inputs = json::array();
  for (const auto& [i, slot] : result.differing_graph_inputs) {
    inputs.push_back(DifferingGraphInputJson(result.kernels[i], slot));
  }
  j["differing_graph_inputs"] = inputs;
  json unpaired = json::array();
  for (const UnpairedKernel& u : result.unpaired) unpaired.push_back(UnpairedKernelJson(u));
  j["unpaired"] = unpaired;
  json calls = json::array();
  for (const CallCountDifference& d : result.call_count_differences) {
    calls.push_back(CallCountDifferenceJson(d));
  }
  j["call_count_differences"] = calls;
  j["skipped"] = SkippedJson(result.skipped);
  return internal::JsonText(j, 2);
}

}  // namespace graphdump::analysis
