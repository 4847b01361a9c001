// Internal: the plan of one Ascend device-to-host conversion (ascend_format.h), shared by
// the shape checks that make it (ascend_plan.cc) and the loops that move the elements
// (ascend_format.cc). Not for use outside src/analysis.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graphdump/analysis/ascend_format.h"
#include "graphdump/status.h"

namespace graphdump::ascend_internal {

enum class Kind { kNC1HWC0, kNDC1HWC0, kC1HWNCoC0, kFractalZ, kFractalNZ };

// Everything a conversion loop needs, derived from the device and host shapes. Spatial
// dimensions are H·W flattened into `hw`; 4-D formats have d = 1.
struct Plan {
  Kind kind = Kind::kNC1HWC0;
  int64_t n = 1, c = 1, d = 1, hw = 1;                          // host
  int64_t c0 = 1, c1 = 1;                                       // channel cube
  int64_t n0 = 1, n1 = 1;                                       // FRACTAL_Z output-channel cube
  int64_t groups = 1, e_mult = 1;                               // FRACTAL_Z groups
  int64_t t = 1, h = 1, w = 1, h0 = 1, h1 = 1, w0 = 1, w1 = 1;  // FRACTAL_NZ
};

// Checks the element size and that desc.shape is the device shape of desc.original_shape in
// desc.format, and derives the plan; the errors of AscendHostShape.
StatusOr<Plan> MakePlan(const DeviceTensorDesc& desc);

// The host tensor as equal rows: the outermost host dimension for the 4-D and 5-D formats,
// rows of W elements for FRACTAL_NZ.
HostRows HostRowsOf(const Plan& p);

// A shape in an error message: "(2,3,4)".
std::string Dims(const std::vector<int64_t>& v);

}  // namespace graphdump::ascend_internal
