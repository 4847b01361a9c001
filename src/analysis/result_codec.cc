// The results of watch and compare as MessagePack (result_codec.h): every field of the structs,
// doubles as they are (MessagePack keeps NaN and infinities, JSON text would not).
#include "graphdump/analysis/result_codec.h"

#include <nlohmann/json.hpp>

namespace graphdump {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SourceLocation, file, line, column, code)
}  // namespace graphdump

namespace graphdump::analysis {

void to_json(nlohmann::json& j, const StatisticTitle& title) { j = title.view(); }
void from_json(const nlohmann::json& j, StatisticTitle& title) {
  title = StatisticTitle(j.get_ref<const std::string&>());
}
void to_json(nlohmann::json& j, const SharedTrace& trace) { j = trace.get(); }
void from_json(const nlohmann::json& j, SharedTrace& trace) {
  trace = SharedTrace(j.get<std::vector<SourceLocation>>());
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Skipped, path, reason)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(WatchHit, rank, graph_id, iteration, call, calls, timestamp,
                                   sequence, order, kernel, is_input, slot, check, detail,
                                   first_index, row, has_position, source_line, source_trace,
                                   path)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(WatchResult, hits, intended, skipped, tensors_checked,
                                   weight_pairs_checked, judged, ranks)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PairMetrics, elements, finite_pairs, cosine, max_abs_err,
                                   max_rel_err, rmse, norm_rel_err, rel_err_below_0_1pct,
                                   rel_err_below_0_5pct, allclose_failures, first_failure, nan_a,
                                   nan_b, inf_a, inf_b, nonfinite_mismatches,
                                   first_nonfinite_mismatch, ref_sum, ref_sum_sq)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TensorComparison, is_input, slot, path_a, path_b, dtype_a,
                                   dtype_b, shape_a, shape_b, mode, metrics, stat_diffs,
                                   worst_statistic, worst_statistic_a, worst_statistic_b, verdict,
                                   reason, first_index, standard, error, rounding, discrete,
                                   shape_differs, uninitialized)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(KernelComparison, rank, graph_id, iteration, call, calls,
                                   order, name_a, name_b, op_type, pairing, source_line,
                                   source_trace, fused_ops, tensors, verdict, reason, role, input_error,
                                   output_error, growth, added_error, adds_error,
                                   contribution_rank, input_rounding, inputs_near_rounding,
                                   error_origin, discrete_divergence, discrete_change,
                                   reads_unrecorded)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(UnpairedKernel, side, rank, graph_id, iteration, call,
                                   full_name, why)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CallCountDifference, rank, graph_id, iteration, name_a,
                                   name_b, calls_a, calls_b)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CompareResult, kernels, unpaired, call_count_differences,
                                   skipped, passed, warnings, errors, first_failure,
                                   first_adding_error, contributors, differing_sources,
                                   differing_graph_inputs)

namespace {

template <typename T>
std::string Encode(const T& value) {
  const std::vector<uint8_t> bytes = nlohmann::json::to_msgpack(nlohmann::json(value));
  return std::string(bytes.begin(), bytes.end());
}

template <typename T>
StatusOr<T> Decode(const std::string& bytes, const char* what) {
  try {
    return nlohmann::json::from_msgpack(bytes).get<T>();
  } catch (const nlohmann::json::exception& e) {
    return Status::Corrupt(std::string("not an encoded ") + what + ": " + e.what());
  }
}

}  // namespace

std::string EncodeWatchResult(const WatchResult& result) { return Encode(result); }
StatusOr<WatchResult> DecodeWatchResult(const std::string& bytes) {
  return Decode<WatchResult>(bytes, "watch result");
}
std::string EncodeCompareResult(const CompareResult& result) { return Encode(result); }
StatusOr<CompareResult> DecodeCompareResult(const std::string& bytes) {
  return Decode<CompareResult>(bytes, "compare result");
}
std::string EncodeSkipped(const std::vector<Skipped>& skipped) { return Encode(skipped); }
StatusOr<std::vector<Skipped>> DecodeSkipped(const std::string& bytes) {
  return Decode<std::vector<Skipped>>(bytes, "list of skipped files");
}

}  // namespace graphdump::analysis
