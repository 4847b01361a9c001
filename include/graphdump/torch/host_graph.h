// HostGraph: what the kernels a host runs around a graph (backward nodes, optimizer updates,
// all-reduces; host_kernels.h, host.h) need from the graph that holds them. Both front ends
// implement it: TorchModel (a TorchScript module run by graphdump's executor) and EagerGraph
// (a plain nn.Module whose ATen operators are seen at the dispatcher, eager_graph.h), so one
// backward capture and one optimizer capture serve both.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "graphdump/graph.h"
#include "graphdump/session.h"

namespace graphdump {

class HostGraph {
 public:
  virtual ~HostGraph() = default;

  // Adds a kernel the host runs itself (a loss, a backward node, an optimizer update): its full
  // name becomes `scope + "/" + op_type + "-op{N}"` with a fresh N (AppendKernel).
  KernelInfo AddHostKernel(const std::string& scope, const std::string& op_type,
                           const std::string& module_path,
                           std::vector<SourceLocation> source_trace = {}) {
    KernelInfo k;
    k.op_type = op_type;
    k.full_name = scope + "/" + op_type;
    k.module_path = module_path;
    k.source_trace = std::move(source_trace);
    return AppendKernel(std::move(k));
  }

  // The scope of a module path ("features.0" -> "Default/features-Sequential/0-Conv2d"; "" ->
  // "Default").
  virtual std::string ScopeOf(const std::string& module_path) const = 0;

  // The graph's kernels so far, in index order.
  virtual const GraphInfo& graph() const = 0;

  // The session the graph dumps to; null when nothing is dumped.
  virtual DumpSession* session() const = 0;

 protected:
  // Appends `kernel` (its full name without the "-op{N}" suffix) to the graph: gives it the
  // graph's id and the next index, appends "-op{N}" to its name (N unique within the graph:
  // the index, or as an EagerGraph numbers the kernels the host adds, eager_graph.h), marks it
  // for dump_mode 2 when its module lies under a module given to set_dump, and registers it
  // with the session once the graph is registered. Returns it as stored.
  virtual KernelInfo AppendKernel(KernelInfo kernel) = 0;
};

}  // namespace graphdump
