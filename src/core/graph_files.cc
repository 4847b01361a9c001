#include "graphdump/graph_files.h"

#include <fmt/format.h>
#include <google/protobuf/arena.h>

#include "graphdump_graph.pb.h"

namespace graphdump {
namespace {

std::string JoinShape(const std::vector<int64_t>& shape) {
  return fmt::format("({})", fmt::join(shape, ", "));
}

std::string MetaList(const std::vector<TensorMeta>& metas) {
  std::string out = "(";
  for (size_t i = 0; i < metas.size(); ++i) {
    if (i) out += ", ";
    out += TensorMetaToIr(metas[i]);
  }
  return out + ")";
}

// Code text on one line: the .ir keeps one source location per line.
std::string OneLine(const std::string& code) {
  std::string out = code;
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

void KernelToIr(const KernelInfo& k, std::string* out) {
  std::string op_type = k.op_type.empty() ? OpTypeFromFullName(k.full_name) : k.op_type;
  std::string args;
  for (size_t i = 0; i < k.input_names.size(); ++i) {
    if (i) args += ", ";
    args += "%" + k.input_names[i];
  }
  std::string attrs;
  for (const auto& [name, value] : k.attributes) {
    attrs += attrs.empty() ? " {" : ", ";
    attrs += name + ": " + value;
  }
  if (!attrs.empty()) attrs += "}";
  fmt::format_to(std::back_inserter(*out), "  %{}({}) = {}({}){}\n", k.index, op_type, op_type,
                 args, attrs);
  if (k.not_run) {
    *out += "      : not run (a branch not taken so far)\n";
  } else {
    fmt::format_to(std::back_inserter(*out), "      : {} -> {}\n", MetaList(k.inputs),
                   MetaList(k.outputs));
  }
  fmt::format_to(std::back_inserter(*out), "      # Fullname with scope: ({})\n", k.full_name);
  for (const SourceLocation& loc : k.source_trace) {
    fmt::format_to(std::back_inserter(*out), "      # In file {}({})/{}/\n", loc.file, loc.line,
                   OneLine(loc.code));
  }
  if (!k.uninitialized_inputs.empty() || !k.uninitialized_outputs.empty()) {
    std::string slots;
    for (uint32_t s : k.uninitialized_inputs) {
      slots += fmt::format("{}input {}", slots.empty() ? "" : ", ", s);
    }
    for (uint32_t s : k.uninitialized_outputs) {
      slots += fmt::format("{}output {}", slots.empty() ? "" : ", ", s);
    }
    fmt::format_to(std::back_inserter(*out), "      # Uninitialized: {}\n", slots);
  }
  if (!k.schema.empty()) fmt::format_to(std::back_inserter(*out), "      # Schema: {}\n", k.schema);
  if (!k.arguments.empty()) {
    std::string args;
    for (const KernelArgument& a : k.arguments) {
      args += (args.empty() ? "" : ", ") + a.name + "=" + OneLine(a.value);
    }
    fmt::format_to(std::back_inserter(*out), "      # Arguments: ({})\n", args);
  }
}

}  // namespace

std::string TensorMetaToIr(const TensorMeta& meta) {
  return fmt::format("<Tensor[{}], {}>", DTypeName(meta.dtype), JoinShape(meta.shape));
}

std::string ExecutionOrderCsv(const GraphInfo& graph) {
  std::string out = "NodeExecutionOrder-FullNameWithScope\n";
  size_t size = out.size();
  for (const KernelInfo& k : graph.kernels) size += k.full_name.size() + 1;
  out.reserve(size);
  for (const KernelInfo& k : graph.kernels) out.append(k.full_name).push_back('\n');
  return out;
}

std::string GenerateIrText(const GraphInfo& graph) {
  std::string out;
  fmt::format_to(std::back_inserter(out), "# IR entry: @graph_{}\n# Total kernels: {}\n",
                 graph.graph_id, graph.kernels.size());
  fmt::format_to(std::back_inserter(out), "# Producer: graphdump {}\n\n", GRAPHDUMP_VERSION);
  fmt::format_to(std::back_inserter(out), "subgraph @graph_{}() {{\n", graph.graph_id);
  for (const KernelInfo& k : graph.kernels) KernelToIr(k, &out);
  out += "}\n";
  return out;
}

std::string SerializeGraphProto(const GraphInfo& graph) {
  // Thousands of small strings and messages: allocated from one arena, freed at once.
  google::protobuf::Arena arena;
  proto::GraphProto& g = *google::protobuf::Arena::CreateMessage<proto::GraphProto>(&arena);
  g.set_graph_id(graph.graph_id);
  g.set_name(graph.name);
  g.set_producer(std::string("graphdump ") + GRAPHDUMP_VERSION);
  auto add_meta = [](const TensorMeta& m, proto::TensorMetaProto* p) {
    p->set_dtype(std::string(DTypeName(m.dtype)));
    for (int64_t d : m.shape) p->add_shape(d);
  };
  for (const KernelInfo& k : graph.kernels) {
    proto::KernelProto* kp = g.add_kernels();
    kp->set_index(k.index);
    kp->set_full_name(k.full_name);
    kp->set_op_type(k.op_type.empty() ? OpTypeFromFullName(k.full_name) : k.op_type);
    kp->set_module_path(k.module_path);
    kp->set_stream_id(k.stream_id);
    kp->set_not_run(k.not_run);
    for (const SourceLocation& loc : k.source_trace) {
      proto::SourceLocationProto* sp = kp->add_source_trace();
      sp->set_file(loc.file);
      sp->set_line(loc.line);
      sp->set_column(loc.column);
      sp->set_code(loc.code);
    }
    for (const TensorMeta& m : k.inputs) add_meta(m, kp->add_inputs());
    for (const TensorMeta& m : k.outputs) add_meta(m, kp->add_outputs());
    for (const std::string& n : k.input_names) kp->add_input_names(n);
    for (const auto& [name, value] : k.attributes) {
      proto::AttributeProto* ap = kp->add_attributes();
      ap->set_name(name);
      ap->set_value(value);
    }
    kp->set_schema(k.schema);
    for (const KernelArgument& a : k.arguments) {
      proto::AttributeProto* ap = kp->add_arguments();
      ap->set_name(a.name);
      ap->set_value(a.value);
    }
    for (uint32_t slot : k.uninitialized_inputs) kp->add_uninitialized_inputs(slot);
    for (uint32_t slot : k.uninitialized_outputs) kp->add_uninitialized_outputs(slot);
  }
  return g.SerializeAsString();
}

StatusOr<GraphInfo> ParseGraphProto(const std::string& bytes, const std::string& path) {
  proto::GraphProto g;
  if (!g.ParseFromString(bytes)) {
    return Status::Corrupt(path + ": not a graphdump graph file (GraphProto, docs/graph-proto.md)");
  }
  GraphInfo graph;
  graph.graph_id = g.graph_id();
  graph.name = g.name();
  auto meta = [&](const proto::TensorMetaProto& p, std::vector<TensorMeta>* out) -> Status {
    auto dtype = DTypeFromName(p.dtype());
    if (!dtype) {
      return Status::Corrupt(path + ": unknown dtype '" + p.dtype() + "' in a kernel's metadata");
    }
    out->push_back({*dtype, std::vector<int64_t>(p.shape().begin(), p.shape().end())});
    return Status::Ok();
  };
  for (const proto::KernelProto& kp : g.kernels()) {
    KernelInfo k;
    k.graph_id = graph.graph_id;
    k.index = kp.index();
    k.full_name = kp.full_name();
    k.op_type = kp.op_type();
    k.module_path = kp.module_path();
    k.stream_id = kp.stream_id();
    k.not_run = kp.not_run();
    for (const auto& sp : kp.source_trace()) {
      k.source_trace.push_back({sp.file(), sp.line(), sp.column(), sp.code()});
    }
    for (const auto& m : kp.inputs()) GRAPHDUMP_RETURN_IF_ERROR(meta(m, &k.inputs));
    for (const auto& m : kp.outputs()) GRAPHDUMP_RETURN_IF_ERROR(meta(m, &k.outputs));
    k.input_names.assign(kp.input_names().begin(), kp.input_names().end());
    for (const auto& ap : kp.attributes()) k.attributes[ap.name()] = ap.value();
    k.schema = kp.schema();
    for (const auto& ap : kp.arguments()) k.arguments.push_back({ap.name(), ap.value()});
    k.uninitialized_inputs.assign(kp.uninitialized_inputs().begin(),
                                  kp.uninitialized_inputs().end());
    k.uninitialized_outputs.assign(kp.uninitialized_outputs().begin(),
                                   kp.uninitialized_outputs().end());
    graph.kernels.push_back(std::move(k));
  }
  return graph;
}

}  // namespace graphdump
