// A small synthetic graph run through the session hooks without any framework: a two-layer
// perceptron with a float16 cast and a parameter update per step. It exercises every hook and is
// what `graphdump demo-synthetic` and the core and analysis tests dump. Values are deterministic
// for a given seed, and faults can be planted to test the analysis tools.
#pragma once

#include <cstdint>

#include "graphdump/graph.h"
#include "graphdump/session.h"
#include "graphdump/status.h"

namespace graphdump {

struct SyntheticOptions {
  uint32_t graph_id = 0;
  int steps = 3;
  uint64_t seed = 1;
  int batch = 4;
  int features = 8;
  int hidden = 16;
  // Planted faults: add `perturb` to every output element of kernel `perturb_kernel` (-1: none)
  // from iteration `fault_iteration` on; make element 0 of kernel `nan_kernel`'s output NaN in
  // iteration `fault_iteration`.
  int perturb_kernel = -1;
  float perturb = 0.0f;
  int nan_kernel = -1;
  uint64_t fault_iteration = 0;
  // Scale of the input; large values overflow the float16 cast kernel.
  float input_scale = 1.0f;
};

// The graph description: kernel names, module paths, source lines in "synthetic_mlp.py".
GraphInfo SyntheticGraph(const SyntheticOptions& options);

// Registers the graph with `session` (when not yet registered) and runs options.steps steps.
Status RunSyntheticGraph(DumpSession& session, const SyntheticOptions& options);

}  // namespace graphdump
