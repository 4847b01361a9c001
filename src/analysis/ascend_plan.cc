// The shape side of Ascend device-to-host conversion (ascend_format.h, docs/ascend.md): which
// formats convert, whether a device shape is the one its original shape has in its format, and
// the plan (sizes of the channel cubes and tiles) that the conversion loops follow.
#include "ascend_plan.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "fmt/format.h"
#include "graphdump/analysis/ascend_dump.h"
#include "graphdump/shape.h"

namespace graphdump {
namespace ascend_internal {
namespace {

// Shapes come from files: every product goes through the checked helpers of shape.h, and a
// product that does not fit is -1, which no dimension or count equals.
// REQUIRES: a >= 0, b > 0.
int64_t CeilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0); }
int64_t Mul(int64_t a, int64_t b) { return CheckedMul(a, b).value_or(-1); }
// lcm(a, b), or `cap` when it is larger. REQUIRES: a, b, cap > 0.
int64_t LcmAtMost(int64_t a, int64_t b, int64_t cap) {
  const int64_t lcm = Mul(a / std::gcd(a, b), b);
  return lcm < 0 || lcm > cap ? cap : lcm;
}
int64_t Product(const std::vector<int64_t>& v, size_t from = 0, size_t to = SIZE_MAX) {
  to = std::min(to, v.size());
  if (from >= to) return 1;
  return ShapeElements(std::span<const int64_t>(v).subspan(from, to - from)).value_or(-1);
}

Status Mismatch(const DeviceTensorDesc& desc, const std::vector<int64_t>& expected) {
  return Status::InvalidArgument(fmt::format(
      "device shape {} does not match original shape {} in {}: expected {}", Dims(desc.shape),
      Dims(desc.original_shape), AscendFormatName(desc.format), Dims(expected)));
}

// MindSpore pads host shapes of fewer than 4 dimensions to NCHW as (1, C, H, W) before laying
// them out in a 4-D device format.
std::vector<int64_t> PadTo4D(const std::vector<int64_t>& shape) {
  std::vector<int64_t> nchw = {1, 1, 1, 1};
  if (shape.size() >= 4) return shape;
  for (size_t i = 0; i < shape.size(); ++i) nchw[1 + i] = shape[i];
  return nchw;
}

StatusOr<Plan> PlanNC1HWC0(const DeviceTensorDesc& desc) {
  const std::vector<int64_t> host = PadTo4D(desc.original_shape);
  if (host.size() != 4 || desc.shape.size() != 5 || desc.shape[4] <= 0) {
    return Status::InvalidArgument(fmt::format(
        "{} needs a 5-D device shape and an original shape of at most 4 dimensions, got {} "
        "and {}",
        AscendFormatName(desc.format), Dims(desc.shape), Dims(desc.original_shape)));
  }
  Plan p;
  p.kind = Kind::kNC1HWC0;
  p.n = host[0], p.c = host[1], p.hw = host[2] * host[3];
  p.c0 = desc.shape[4], p.c1 = CeilDiv(p.c, p.c0);
  std::vector<int64_t> expected = {p.n, p.c1, host[2], host[3], p.c0};
  if (desc.shape != expected) return Mismatch(desc, expected);
  return p;
}

StatusOr<Plan> PlanNDC1HWC0(const DeviceTensorDesc& desc) {
  const std::vector<int64_t>& host = desc.original_shape;
  if (host.size() != 5 || desc.shape.size() != 6 || desc.shape[5] <= 0) {
    return Status::InvalidArgument(fmt::format(
        "NDC1HWC0 needs a 6-D device shape and a 5-D (NCDHW) original shape, got {} and {}",
        Dims(desc.shape), Dims(host)));
  }
  Plan p;
  p.kind = Kind::kNDC1HWC0;
  p.n = host[0], p.c = host[1], p.d = host[2], p.hw = host[3] * host[4];
  p.c0 = desc.shape[5], p.c1 = CeilDiv(p.c, p.c0);
  std::vector<int64_t> expected = {p.n, p.d, p.c1, host[3], host[4], p.c0};
  if (desc.shape != expected) return Mismatch(desc, expected);
  return p;
}

StatusOr<Plan> PlanC1HWNCoC0(const DeviceTensorDesc& desc) {
  const std::vector<int64_t> host = PadTo4D(desc.original_shape);
  if (host.size() != 4 || desc.shape.size() != 6 || desc.shape[5] <= 0) {
    return Status::InvalidArgument(fmt::format(
        "C1HWNCoC0 needs a 6-D device shape and an original shape of at most 4 dimensions, got "
        "{} and {}",
        Dims(desc.shape), Dims(desc.original_shape)));
  }
  Plan p;
  p.kind = Kind::kC1HWNCoC0;
  p.n = host[0], p.c = host[1], p.hw = host[2] * host[3];
  p.c0 = desc.shape[5], p.c1 = CeilDiv(p.c, p.c0);
  std::vector<int64_t> expected = {p.c1, host[2], host[3], p.n, p.c0, p.c0};
  if (desc.shape != expected) return Mismatch(desc, expected);
  return p;
}

// FRACTAL_Z (4-D host) and FRACTAL_Z_3D (5-D host), with or without groups.
StatusOr<Plan> PlanFractalZ(const DeviceTensorDesc& desc, bool three_d) {
  const std::vector<int64_t> host = three_d ? desc.original_shape : PadTo4D(desc.original_shape);
  const size_t rank = three_d ? 5 : 4;
  if (host.size() != rank || desc.shape.size() != 4 || desc.shape[2] <= 0 || desc.shape[3] <= 0) {
    return Status::InvalidArgument(fmt::format(
        "{} needs a 4-D device shape and a {}-D original shape, got {} and {}",
        AscendFormatName(desc.format), rank, Dims(desc.shape), Dims(desc.original_shape)));
  }
  Plan p;
  p.kind = Kind::kFractalZ;
  p.n = host[0], p.c = host[1];
  p.d = three_d ? host[2] : 1;
  p.hw = host[rank - 2] * host[rank - 1];
  p.groups = std::max<int64_t>(1, desc.sub_format);
  p.n0 = desc.shape[2], p.c0 = desc.shape[3];
  if (p.n % p.groups != 0) {
    return Status::InvalidArgument(fmt::format(
        "{}: original shape {} has {} output channels, not a multiple of sub_format (groups) {}",
        AscendFormatName(desc.format), Dims(host), p.n, p.groups));
  }
  const int64_t cout = p.n / p.groups;
  if (cout == 0 || p.c == 0) return p;  // empty: nothing to check or copy
  // lcm(lcm(C, C0) / C, lcm(Cout, N0) / Cout), at most groups: lcm(a, b) / a = b / gcd(a, b).
  p.e_mult = LcmAtMost(p.c0 / std::gcd(p.c, p.c0), p.n0 / std::gcd(cout, p.n0), p.groups);
  p.c1 = CeilDiv(p.e_mult * p.c, p.c0);   // e_mult * C <= N * C, a product of the shape
  p.n1 = CeilDiv(p.e_mult * cout, p.n0);  // e_mult * Cout <= N
  const int64_t g_dim = CeilDiv(p.groups, p.e_mult);
  std::vector<int64_t> expected = {Mul(Mul(Mul(g_dim, p.d), p.c1), p.hw), p.n1, p.n0, p.c0};
  if (desc.shape != expected) return Mismatch(desc, expected);
  return p;
}

StatusOr<Plan> PlanFractalNZ(const DeviceTensorDesc& desc) {
  const std::vector<int64_t>& host = desc.original_shape;
  if (host.empty() || desc.shape.size() < 4) {
    return Status::InvalidArgument(fmt::format(
        "FRACTAL_NZ needs a device shape of at least 4 dimensions and a non-scalar original "
        "shape, got {} and {}",
        Dims(desc.shape), Dims(host)));
  }
  Plan p;
  p.kind = Kind::kFractalNZ;
  const size_t r = host.size();
  p.w = host[r - 1];
  p.h = r >= 2 ? host[r - 2] : 1;
  p.t = r >= 2 ? Product(host, 0, r - 2) : 1;
  const size_t k = desc.shape.size();
  p.h0 = desc.shape[k - 2], p.w0 = desc.shape[k - 1];
  if (p.h0 <= 0 || p.w0 <= 0) return Mismatch(desc, {});
  p.w1 = CeilDiv(p.w, p.w0), p.h1 = CeilDiv(p.h, p.h0);
  const bool ok = desc.shape[k - 4] == p.w1 && desc.shape[k - 3] == p.h1 &&
                  Product(desc.shape, 0, k - 4) == p.t;
  if (!ok) {
    std::vector<int64_t> expected(host.begin(), host.end() - std::min<size_t>(r, 2));
    expected.insert(expected.end(), {p.w1, p.h1, p.h0, p.w0});
    return Mismatch(desc, expected);
  }
  return p;
}

bool IsEmptyHostShape(const DeviceTensorDesc& desc) {
  return Product(desc.original_shape) == 0 && !desc.original_shape.empty();
}

}  // namespace

std::string Dims(const std::vector<int64_t>& v) { return fmt::format("({})", fmt::join(v, ",")); }

StatusOr<Plan> MakePlan(const DeviceTensorDesc& desc) {
  switch (desc.item_bytes) {
    case 1:
    case 2:
    case 4:
    case 8:
    case 16:
      break;
    default:
      return Status::InvalidArgument(
          fmt::format("elements of {} bits cannot be rearranged (1, 2, 4, 8 or 16 bytes are)",
                      desc.item_bytes * 8));
  }
  switch (desc.format) {
    case kAscendNC1HWC0:
    case kAscendNC1HWC0C04:
      return PlanNC1HWC0(desc);
    case kAscendNDC1HWC0:
      return PlanNDC1HWC0(desc);
    case kAscendC1HWNCoC0:
      return PlanC1HWNCoC0(desc);
    case kAscendFractalZ:
      return PlanFractalZ(desc, false);
    case kAscendFractalZ3D:
      return PlanFractalZ(desc, true);
    case kAscendFractalNZ:
      return PlanFractalNZ(desc);
    default:
      return Status::Unsupported(
          fmt::format("no conversion from {} to a host layout", AscendFormatName(desc.format)));
  }
}

HostRows HostRowsOf(const Plan& p) {
  switch (p.kind) {
    case Kind::kFractalNZ:
      return {p.t * p.h, p.w};
    case Kind::kNDC1HWC0:
    case Kind::kFractalZ:
      return {p.n, p.c * p.d * p.hw};
    case Kind::kNC1HWC0:
    case Kind::kC1HWNCoC0:
      break;
  }
  return {p.n, p.c * p.hw};
}

}  // namespace ascend_internal

using ascend_internal::Dims;
using ascend_internal::HostRowsOf;
using ascend_internal::IsEmptyHostShape;
using ascend_internal::MakePlan;
using ascend_internal::Plan;
using ascend_internal::Product;

bool IsConvertibleAscendFormat(int format) {
  switch (format) {
    case kAscendNC1HWC0:
    case kAscendNC1HWC0C04:
    case kAscendNDC1HWC0:
    case kAscendC1HWNCoC0:
    case kAscendFractalZ:
    case kAscendFractalZ3D:
    case kAscendFractalNZ:
      return true;
    default:
      return false;
  }
}

bool IsHostAscendFormat(int format) {
  switch (format) {
    case kAscendNCHW:
    case kAscendNHWC:
    case kAscendND:
    case 14:  // CHWN
    case kAscendHWCN:
    case kAscendNDHWC:
    case kAscendNCDHW:
    case 31:  // DHWCN
    case 34:  // CN
    case 35:  // NC
    case 36:  // DHWNC
    case 47:  // NCL
      return true;
    default:
      return false;
  }
}

StatusOr<std::vector<int64_t>> AscendHostShape(const DeviceTensorDesc& desc) {
  GRAPHDUMP_RETURN_IF_ERROR(AscendHostRows(desc).status());
  return desc.original_shape;
}

StatusOr<HostRows> AscendHostRows(const DeviceTensorDesc& desc) {
  for (const std::vector<int64_t>* shape : {&desc.shape, &desc.original_shape}) {
    if (!ShapeElements(*shape)) {
      return Status::InvalidArgument(
          fmt::format("{} shape {} has a negative dimension or more elements than fit int64",
                      shape == &desc.shape ? "device" : "original", Dims(*shape)));
    }
  }
  if (IsEmptyHostShape(desc)) {
    if (Product(desc.shape) != 0) {
      return Status::InvalidArgument(
          fmt::format("original shape {} is empty but device shape {} is not",
                      Dims(desc.original_shape), Dims(desc.shape)));
    }
    return HostRows{0, 0};
  }
  GRAPHDUMP_ASSIGN_OR_RETURN(Plan plan, MakePlan(desc));
  return HostRowsOf(plan);
}

}  // namespace graphdump
