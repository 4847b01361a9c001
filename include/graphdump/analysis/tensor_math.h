// Element-wise work over dumped tensors, streamed from mmap in one pass: the metrics of
// compare and the statistics of watch and report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graphdump/analysis/npy_file.h"
#include "graphdump/dtype.h"

namespace graphdump::analysis {

// Error metrics of a tensor `a` against a reference `b` of the same element count. Elements
// where either side is NaN/Inf are left out of the numeric metrics and counted instead.
// Relative errors divide by max(|b|, small_value) + eps (the small-value rule: a reference
// below `small_value` counts as `small_value`, so near-zero references do not dominate).
struct PairMetrics {
  int64_t elements = 0;
  int64_t finite_pairs = 0;  // elements where both sides are finite
  double cosine = 1.0;       // a.b / (|a||b|); 1 when both are all zero, 0 when one is
  double max_abs_err = 0;    // max |a-b|
  double max_rel_err = 0;    // max |a-b| / (max(|b|, small_value) + eps), eps = 2^-52
  double rmse = 0;           // sqrt(mean (a-b)^2)
  // ||a-b||_2 / max(||b||_2, small_value * sqrt(finite_pairs)): the error of the whole tensor
  // relative to its size (rmse over the reference's root mean square, floored); 0 when a == b,
  // +inf when the reference is all zero (and small_value is 0) but a is not.
  double norm_rel_err = 0;
  double rel_err_below_0_1pct = 1;  // share of elements with rel err < 0.001
  double rel_err_below_0_5pct = 1;  // share of elements with rel err < 0.005
  // elements with |a-b| > atol + rtol*max(|b|, small_value) (finite pairs)
  int64_t allclose_failures = 0;
  int64_t first_failure = -1;  // flat index of the first such element
  int64_t nan_a = 0, nan_b = 0, inf_a = 0, inf_b = 0;
  int64_t nonfinite_mismatches = 0;  // positions where NaN/+Inf/-Inf differ between a and b
  int64_t first_nonfinite_mismatch = -1;
  // Sum and sum of squares of b's finite elements (in a fixed order): with the shape, a
  // fingerprint that tells whether two dumped tensors hold the same reference values.
  double ref_sum = 0, ref_sum_sq = 0;
};

// Computes PairMetrics over two mapped tensors (any stored dtypes; converted to double).
// `small_value` >= 0 is the small-value floor of the relative errors and of the elementwise
// check (0: the plain |a-b| <= atol + rtol*|b| of torch.allclose).
// REQUIRES: a.NumElements() == b.NumElements().
PairMetrics ComparePair(const MappedNpy& a, const MappedNpy& b, double atol, double rtol,
                        double small_value = 0);

// The error rounding `t` to `dtype` (RoundToDtype: bfloat16, float16, float32) makes, as
// PairMetrics::norm_rel_err measures it (same small-value floor): what a tensor of the lower
// precision loses by holding `t`'s values. Non-finite elements are left out.
double RoundingError(const MappedNpy& t, const std::string& dtype, double small_value);

// Where the first of some elements lies and how many rows hold one: a row is an index of the
// first dimension (the batch, for a batch-first tensor). Scalars of a complex tensor count as
// their element.
struct BadPositions {
  int64_t first = -1;             // flat element index in storage order; -1: none
  std::vector<uint8_t> row_seen;  // one flag per row (tensors of 2 or more dimensions)
  int64_t rows = 0;               // rows holding at least one
};

// Statistics of one tensor for watchpoints and plots, over its finite elements only: NaN and
// +-Inf are counted and located, not folded into max, min, mean and l2norm (unlike statistic.csv's
// NanPropagatingStats, where one NaN makes them NaN).
struct FiniteSummary {
  int64_t elements = 0;
  double max = 0, min = 0, mean = 0, l2norm = 0, max_abs = 0;  // over finite elements
  int64_t nan = 0, pos_inf = 0, neg_inf = 0, zero = 0;
  int64_t fp16_overflow = 0;  // finite elements with |x| > 65504
  BadPositions nan_at, inf_at;  // NaN; +-Inf
};

FiniteSummary SummarizeFinite(const MappedNpy& t);

// The index in `shape` of the element at flat position `flat` of a tensor stored in C order (or
// Fortran order, the first dimension fastest). REQUIRES: 0 <= flat < the product of `shape`.
std::vector<int64_t> UnravelIndex(int64_t flat, const std::vector<int64_t>& shape,
                                  bool fortran_order);

// "[5, 3]"; "[]" for a scalar.
std::string IndexText(const std::vector<int64_t>& index);

// "first at [5, 3], row 5 (1 of 8 rows)": where the first of `positions` lies in `t`'s shape,
// and for a tensor of two or more dimensions, its row and how many rows hold one. "" when none.
std::string PositionText(const BadPositions& positions, const NpyInfo& t);

// ||a - b||_2 and ||b||_2 and whether a == b element for element (bytes equal).
struct DeltaNorms {
  double diff_l2 = 0;
  double ref_l2 = 0;
  bool identical = false;
};
DeltaNorms DeltaBetween(const MappedNpy& a, const MappedNpy& b);

}  // namespace graphdump::analysis
