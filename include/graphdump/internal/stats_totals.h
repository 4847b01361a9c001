// The running totals of a statistics reduction (stats.cc) and the kernels that add elements to
// them, shared by the generic kernels (stats.cc) and the float32 vector kernels
// (stats_float32.cc). Core use only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

namespace graphdump::internal {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// Running totals; counts of NaN are derived at the end (stats.cc's file comment says how).
struct Totals {
  uint64_t count = 0;
  uint64_t negative = 0, positive = 0, zero = 0;
  uint64_t negative_inf = 0, positive_inf = 0;
  uint64_t nan = 0;      // only maintained by the complex path
  bool any_nan = false;  // maintained by every path
  double sum = 0, sum_squares = 0;
  double max = -kInf, min = kInf;
};

// Element readers: load element `i` of a buffer as double.
struct ReadBool {
  double operator()(const uint8_t* p, size_t i) const { return p[i] != 0 ? 1.0 : 0.0; }
};
template <typename T>
struct ReadAs {
  double operator()(const uint8_t* p, size_t i) const {
    T v;
    std::memcpy(&v, p + sizeof(T) * i, sizeof(T));
    return static_cast<double>(v);
  }
};

// Adds `n` elements read by `read` to `totals`.
template <typename Read>
inline void AccumulateReal(const uint8_t* p, size_t n, Read read, bool floating, Totals* totals) {
  constexpr size_t kLanes = 4;
  double sum[kLanes] = {}, squares[kLanes] = {};
  double max[kLanes] = {-kInf, -kInf, -kInf, -kInf}, min[kLanes] = {kInf, kInf, kInf, kInf};
  uint64_t negative[kLanes] = {}, positive[kLanes] = {}, zero[kLanes] = {};
  auto add = [&](size_t lane, double x) {
    sum[lane] += x;
    squares[lane] += x * x;
    max[lane] = x > max[lane] ? x : max[lane];  // NaN never compares true: skipped here
    min[lane] = x < min[lane] ? x : min[lane];
    negative[lane] += x < 0;
    positive[lane] += x > 0;
    zero[lane] += x == 0;
  };
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t lane = 0; lane < kLanes; ++lane) add(lane, read(p, i + lane));
  }
  for (; i < n; ++i) add(0, read(p, i));
  double piece_sum = 0;
  uint64_t ordered = 0;  // elements that are not NaN
  for (size_t lane = 0; lane < kLanes; ++lane) {
    piece_sum += sum[lane];
    totals->sum_squares += squares[lane];
    totals->max = std::max(totals->max, max[lane]);
    totals->min = std::min(totals->min, min[lane]);
    totals->negative += negative[lane];
    totals->positive += positive[lane];
    totals->zero += zero[lane];
    ordered += negative[lane] + positive[lane] + zero[lane];
  }
  totals->sum += piece_sum;
  totals->any_nan = totals->any_nan || ordered != n;
  totals->count += n;
  if (floating && !std::isfinite(piece_sum)) {
    for (size_t j = 0; j < n; ++j) {
      const double x = read(p, j);
      totals->negative_inf += x == -kInf;
      totals->positive_inf += x == kInf;
    }
  }
}

// float32 (also the widened 16-bit floats): the best kernel this machine has (StatsKernels).
// Without `counts` only max, min, the sums and the NaN flag are kept (the element counts stay 0).
void AccumulateFloat32(const uint8_t* p, size_t n, bool counts, Totals* totals);

}  // namespace graphdump::internal
