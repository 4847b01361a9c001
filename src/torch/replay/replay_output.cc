// graphdump replay, the report: a ReplayResult as JSON and as text, and the numbers in the
// verdict's words.
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "graphdump/torch/replay.h"

namespace graphdump {
namespace replay_internal {

std::string Number(double x) {
  if (!std::isfinite(x)) return std::isnan(x) ? "nan" : "inf";
  std::ostringstream out;
  out.precision(3);
  out << x;
  return out.str();
}

}  // namespace replay_internal

using replay_internal::Number;

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
    j["output_dtype"] = r.output_dtype;
    j["discrete"] = r.discrete;
    if (r.discrete) {
      j["discrete_elements"] = r.discrete_elements;
      j["discrete_changed"] = r.discrete_changed;
      j["discrete_input_differs"] = r.discrete_input_differs;
      j["discrete_upstream"] = r.discrete_upstream;
    }
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
    const std::string share = r.discrete ? "share of elements that differ, " : "";
    if (r.discrete) {
      out << "output     " << r.output_slot << " (" << r.output_dtype << "): discrete, "
          << r.discrete_changed << " of " << r.discrete_elements << " elements differ\n";
    }
    out << "own          " << Number(r.own.rel_l2) << "  (" << share << r.dtype
        << " against float64 on the same inputs; rounding the output alone: " << Number(r.rounding)
        << ")\n";
    if (r.has_reference) {
      out << "conditioning " << Number(r.conditioning.rel_l2) << "  (" << share
          << "float64 on the reference's "
          << "inputs rounded to " << r.dtype << "; their rounding: " << Number(r.input_rounding)
          << ")\n";
      out << "inherited    " << Number(r.inherited.rel_l2) << "  (" << share
          << "float64 on this run's inputs against the rounded reference's; inputs differ by "
          << Number(r.input_difference) << ")\n";
      out << "total        " << Number(r.total.rel_l2) << "  (" << share
          << "this run's output against float64 on the reference's inputs)\n";
    }
  }
  out << "verdict    " << r.reason << "\n";
  out << r.chain_text;
  for (const std::string& note : r.notes) out << "note       " << note << "\n";
  return out.str();
}

}  // namespace graphdump
