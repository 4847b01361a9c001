// Device-format to host-layout conversion of Ascend tensors (docs/ascend.md).
//
// Supported device formats and their host layouts (C0 and N0 are read from the device shape;
// C0 is 16 for float16, 32 for int8, 4 for NC1HWC0_C04; N0 is 16):
//   NC1HWC0, NC1HWC0_C04 (N, C1, H, W, C0)        -> NCHW   src[n, c/C0, h, w, c%C0]
//   NDC1HWC0             (N, D, C1, H, W, C0)     -> NCDHW
//   C1HWNCoC0            (C1, H, W, N, C0, C0)    -> NCHW   src[c/C0, h, w, n, c%C0, c%C0]
//   FRACTAL_Z            (G·C1·H·W, N1, N0, C0)   -> NCHW   G = groups from sub_format
//   FRACTAL_Z_3D         (G·D·C1·H·W, N1, N0, C0) -> NCDHW
//   FRACTAL_NZ           (..., W1, H1, H0, W0)    -> (..., H, W)
// Padding is cropped using the original shape. For FRACTAL_Z with groups (sub_format > 1) the
// weight (N, C/groups, H, W) is laid out as GE does: e_mult groups share one cube,
// e_mult = min(lcm(lcm(Cg, C0)/Cg, lcm(Ng, N0)/Ng), groups) with Cg = C/groups input channels
// and Ng = N/groups output channels per group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "graphdump/status.h"

namespace graphdump {

// What the converter needs to know about one device tensor.
struct DeviceTensorDesc {
  int format = 0;                       // OutputFormat value
  size_t item_bytes = 0;                // 1, 2, 4, 8 or 16
  std::vector<int64_t> shape;           // device shape
  std::vector<int64_t> original_shape;  // host shape
  int32_t sub_format = 0;               // groups when > 1 (FRACTAL_Z, FRACTAL_Z_3D)
};

// True for the device formats ConvertToHostLayout handles.
bool IsConvertibleAscendFormat(int format);

// True for formats that already are a host layout (NCHW, NHWC, ND, HWCN, NCDHW, NDHWC, ...):
// their data is written as it is, under its shape.
bool IsHostAscendFormat(int format);

// Checks that `desc.shape` is the device shape `desc.original_shape` has in `desc.format`, and
// returns the host shape (the original shape). kUnsupported for formats outside
// IsConvertibleAscendFormat; kInvalidArgument, saying what was expected, when the shapes do
// not agree or the element size is not 1, 2, 4, 8 or 16 bytes.
StatusOr<std::vector<int64_t>> AscendHostShape(const DeviceTensorDesc& desc);

// The host tensor seen as `count` equal rows of `elements` each, the unit ConvertHostRows works
// in: the outermost host dimension (N) for the 4-D and 5-D formats, every row of W elements
// for FRACTAL_NZ. {0, 0} for an empty host shape. Same checks and errors as AscendHostShape.
struct HostRows {
  int64_t count = 0;
  int64_t elements = 0;
};
StatusOr<HostRows> AscendHostRows(const DeviceTensorDesc& desc);

// Converts device bytes `src` (the product of desc.shape elements) into host layout at `dst`
// (the product of the host shape elements, C order). Runs the checks of AscendHostShape first.
// REQUIRES: `dst` holds the host shape's element count times item_bytes.
Status ConvertToHostLayout(const DeviceTensorDesc& desc, const uint8_t* src, uint8_t* dst);

// Converts host rows [first, last) only (see AscendHostRows): `dst` receives
// (last - first) x elements x item_bytes bytes, what ConvertToHostLayout writes from row
// `first` on. A converter writes a tensor a few cache-sized slices at a time this way, each
// written out while it is still in cache. kInvalidArgument for rows outside the tensor.
Status ConvertHostRows(const DeviceTensorDesc& desc, const uint8_t* src, int64_t first,
                       int64_t last, uint8_t* dst);

}  // namespace graphdump
