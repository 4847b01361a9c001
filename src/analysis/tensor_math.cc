// One-pass element loops over mapped tensors. Elements are converted to double in chunks that
// stay in L1 cache; the metric loops then run over plain double arrays.
#include "graphdump/analysis/tensor_math.h"

#include "graphdump/analysis/precision_verdict.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace graphdump::analysis {
namespace {

constexpr int64_t kChunk = 1024;                   // two double buffers stay in L1
constexpr double kRelEps = 2.220446049250313e-16;  // numpy.finfo(float).eps, as msprobe

double HalfToDouble(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), -24);
  } else if (exp == 31) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(static_cast<double>(mant | 0x400), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

template <typename T>
void ConvertAs(const uint8_t* src, int64_t n, double* out) {
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + i * sizeof(T), sizeof(T));
    out[i] = static_cast<double>(v);
  }
}

// Scalar components per element: 2 for complex (real, imaginary), 1 otherwise.
int Components(DType t) { return IsComplex(t) ? 2 : 1; }

// Converts scalar components [first, first + n) of a tensor stored as `t` to double. `t` is the
// type of the elements as the file holds them (NpyInfo::dtype): bfloat16 only comes from a raw
// '<E2' file, two bytes per element, never from graphdump's float32 form.
void Convert(DType t, const uint8_t* data, int64_t first, int64_t n, double* out) {
  switch (t) {
    case DType::kBool:
    case DType::kUInt8:
      return ConvertAs<uint8_t>(data + first, n, out);
    case DType::kInt8:
    case DType::kInt4:
      return ConvertAs<int8_t>(data + first, n, out);
    case DType::kInt16:
      return ConvertAs<int16_t>(data + first * 2, n, out);
    case DType::kUInt16:
      return ConvertAs<uint16_t>(data + first * 2, n, out);
    case DType::kInt32:
      return ConvertAs<int32_t>(data + first * 4, n, out);
    case DType::kUInt32:
      return ConvertAs<uint32_t>(data + first * 4, n, out);
    case DType::kInt64:
      return ConvertAs<int64_t>(data + first * 8, n, out);
    case DType::kUInt64:
      return ConvertAs<uint64_t>(data + first * 8, n, out);
    case DType::kFloat16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, data + (first + i) * 2, 2);
        out[i] = HalfToDouble(h);
      }
      return;
    case DType::kBFloat16:  // raw bfloat16 ('<E2'): the upper half of a float32
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, data + (first + i) * 2, 2);
        const uint32_t bits = uint32_t{h} << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        out[i] = f;
      }
      return;
    case DType::kFloat32:
    case DType::kComplex64:
      return ConvertAs<float>(data + first * 4, n, out);
    case DType::kFloat64:
    case DType::kComplex128:
      return ConvertAs<double>(data + first * 8, n, out);
  }
}

int Class(double x) {  // 0 finite, 1 NaN, 2 +Inf, 3 -Inf
  if (std::isfinite(x)) return 0;
  if (std::isnan(x)) return 1;
  return x > 0 ? 2 : 3;
}

struct Accum {
  double dot = 0, na = 0, nb = 0, sb = 0, sq = 0, max_abs = 0, max_rel = 0;
  int64_t below1 = 0, below5 = 0;
};

using V2d = double __attribute__((vector_size(16)));
using V2i = int64_t __attribute__((vector_size(16)));

V2d Load2(const double* p) {
  V2d v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

V2d Load2(const float* p) {
  float f[2];
  std::memcpy(f, p, sizeof(f));
  return V2d{f[0], f[1]};
}

V2d Abs2(V2d v) {
  const V2i mask = {INT64_MAX, INT64_MAX};
  return reinterpret_cast<V2d>(reinterpret_cast<V2i>(v) & mask);
}

double Sum2(V2d v) { return v[0] + v[1]; }

// The metrics of a chunk, two elements per step in SSE2 registers (the accumulators stay in
// registers; the order of additions is fixed, so results are deterministic). Adds them to `acc`
// and returns true only when every value of both chunks is finite; otherwise leaves `acc`
// untouched for the element-by-element path. `failed` receives the atol/rtol failures.
template <typename TA, typename TB>
bool FiniteChunk(const TA* x, const TB* y, int64_t n, double atol, double rtol, double small,
                 Accum* acc, int64_t* failed) {
  V2d dot = {}, na = {}, nb = {}, sb = {}, sq = {}, max_abs = {}, max_rel = {}, probe = {};
  V2i below1 = {}, below5 = {}, fails = {};
  const V2d eps = {kRelEps, kRelEps}, atol2 = {atol, atol}, rtol2 = {rtol, rtol};
  const V2d small2 = {small, small};
  const V2d t1 = {0.001, 0.001}, t5 = {0.005, 0.005};
  int64_t i = 0;
  for (; i + 2 <= n; i += 2) {
    const V2d a = Load2(x + i), b = Load2(y + i);
    probe += (a - a) + (b - b);  // NaN exactly when a value is NaN or Inf
    const V2d d = Abs2(a - b);
    const V2d ab = Abs2(b);
    const V2d floored = ab > small2 ? ab : small2;
    const V2d rel = d / (floored + eps);
    dot += a * b;
    na += a * a;
    nb += b * b;
    sb += b;
    sq += d * d;
    max_abs = max_abs > d ? max_abs : d;
    max_rel = max_rel > rel ? max_rel : rel;
    below1 -= rel < t1;  // a true comparison is -1
    below5 -= rel < t5;
    fails -= d > atol2 + rtol2 * floored;
  }
  double tail_probe = 0;
  Accum tail;
  int64_t tail_fails = 0;
  for (; i < n; ++i) {
    const double a = static_cast<double>(x[i]), b = static_cast<double>(y[i]);
    tail_probe += (a - a) + (b - b);
    const double d = std::fabs(a - b), ab = std::max(std::fabs(b), small);
    const double rel = d / (ab + kRelEps);
    tail.dot += a * b;
    tail.na += a * a;
    tail.nb += b * b;
    tail.sb += b;
    tail.sq += d * d;
    tail.max_abs = std::max(tail.max_abs, d);
    tail.max_rel = std::max(tail.max_rel, rel);
    tail.below1 += rel < 0.001;
    tail.below5 += rel < 0.005;
    tail_fails += d > atol + rtol * ab;
  }
  if (Sum2(probe) + tail_probe != 0) return false;
  acc->dot += Sum2(dot) + tail.dot;
  acc->na += Sum2(na) + tail.na;
  acc->nb += Sum2(nb) + tail.nb;
  acc->sb += Sum2(sb) + tail.sb;
  acc->sq += Sum2(sq) + tail.sq;
  acc->max_abs = std::max({acc->max_abs, max_abs[0], max_abs[1], tail.max_abs});
  acc->max_rel = std::max({acc->max_rel, max_rel[0], max_rel[1], tail.max_rel});
  acc->below1 += below1[0] + below1[1] + tail.below1;
  acc->below5 += below5[0] + below5[1] + tail.below5;
  *failed = fails[0] + fails[1] + tail_fails;
  return true;
}

}  // namespace

PairMetrics ComparePair(const MappedNpy& a, const MappedNpy& b, double atol, double rtol,
                        double small) {
  PairMetrics m;
  const DType ta = a.info().dtype, tb = b.info().dtype;
  const int64_t scalars = a.NumElements() * std::max(Components(ta), Components(tb));
  m.elements = scalars;
  const bool same_components = Components(ta) == Components(tb);
  std::vector<double> xa(kChunk), xb(kChunk);
  Accum acc;
  // float32 against float32 (the common case) reads the mapped data directly, when it is
  // aligned: the data follows a header of any length in a file that was not written by numpy.
  const bool both_f32 = ta == DType::kFloat32 && tb == DType::kFloat32 &&
                        reinterpret_cast<uintptr_t>(a.data()) % alignof(float) == 0 &&
                        reinterpret_cast<uintptr_t>(b.data()) % alignof(float) == 0;
  for (int64_t first = 0; first < scalars; first += kChunk) {
    const int64_t n = std::min(kChunk, scalars - first);
    int64_t failed = 0;
    if (both_f32) {
      const float* fa = reinterpret_cast<const float*>(a.data()) + first;
      const float* fb = reinterpret_cast<const float*>(b.data()) + first;
      if (FiniteChunk(fa, fb, n, atol, rtol, small, &acc, &failed)) [[likely]] {
        if (failed > 0 && m.first_failure < 0) {
          for (int64_t i = 0; i < n; ++i) {
            if (std::fabs(double(fa[i]) - fb[i]) >
                atol + rtol * std::max(std::fabs(double(fb[i])), small)) {
              m.first_failure = first + i;
              break;
            }
          }
        }
        m.allclose_failures += failed;
        m.finite_pairs += n;
        continue;
      }
    }
    if (same_components) {
      Convert(ta, a.data(), first, n, xa.data());
      Convert(tb, b.data(), first, n, xb.data());
    } else {  // real vs complex: the real side's imaginary parts are zero
      for (int64_t i = 0; i < n; ++i) {
        const int64_t s = first + i;
        double va = 0, vb = 0;
        if (Components(ta) == 2 || s % 2 == 0)
          Convert(ta, a.data(), Components(ta) == 2 ? s : s / 2, 1, &va);
        if (Components(tb) == 2 || s % 2 == 0)
          Convert(tb, b.data(), Components(tb) == 2 ? s : s / 2, 1, &vb);
        if (Components(ta) == 1 && s % 2) va = 0;
        if (Components(tb) == 1 && s % 2) vb = 0;
        xa[i] = va;
        xb[i] = vb;
      }
    }
    if (!both_f32 && FiniteChunk(xa.data(), xb.data(), n, atol, rtol, small, &acc, &failed))
        [[likely]] {
      if (failed > 0 && m.first_failure < 0) {
        for (int64_t i = 0; i < n; ++i) {
          if (std::fabs(xa[i] - xb[i]) > atol + rtol * std::max(std::fabs(xb[i]), small)) {
            m.first_failure = first + i;
            break;
          }
        }
      }
      m.allclose_failures += failed;
      m.finite_pairs += n;
      continue;
    }
    for (int64_t i = 0; i < n; ++i) {
      const double x = xa[i], y = xb[i];
      if (std::isfinite(x) && std::isfinite(y)) [[likely]] {
        const double d = std::fabs(x - y);
        const double ay = std::max(std::fabs(y), small);
        const double rel = d / (ay + kRelEps);
        acc.dot += x * y;
        acc.na += x * x;
        acc.nb += y * y;
        acc.sb += y;
        acc.sq += d * d;
        acc.max_abs = std::max(acc.max_abs, d);
        acc.max_rel = std::max(acc.max_rel, rel);
        acc.below1 += rel < 0.001;
        acc.below5 += rel < 0.005;
        if (d > atol + rtol * ay) {
          if (m.first_failure < 0) m.first_failure = first + i;
          ++m.allclose_failures;
        }
        ++m.finite_pairs;
        continue;
      }
      const int ca = Class(x), cb = Class(y);
      m.nan_a += ca == 1;
      m.nan_b += cb == 1;
      m.inf_a += ca >= 2;
      m.inf_b += cb >= 2;
      if (ca != cb) {
        if (m.first_nonfinite_mismatch < 0) m.first_nonfinite_mismatch = first + i;
        ++m.nonfinite_mismatches;
      } else {
        ++acc.below1;  // the same NaN/Inf on both sides counts as equal
        ++acc.below5;
      }
    }
  }
  if (acc.na == 0 && acc.nb == 0) {
    m.cosine = 1.0;
  } else if (acc.na == 0 || acc.nb == 0) {
    m.cosine = 0.0;
  } else {
    // Rounding can put the quotient just outside [-1, 1].
    // sqrt(na * nb) is exact for identical sides (cosine exactly 1); fall back on overflow.
    const double product = acc.na * acc.nb;
    const double norm = std::isfinite(product) && product > 0
                            ? std::sqrt(product)
                            : std::sqrt(acc.na) * std::sqrt(acc.nb);
    m.cosine = std::clamp(acc.dot / norm, -1.0, 1.0);
  }
  m.max_abs_err = acc.max_abs;
  m.ref_sum = acc.sb;
  m.ref_sum_sq = acc.nb;
  m.max_rel_err = acc.max_rel;
  m.rmse = m.finite_pairs ? std::sqrt(acc.sq / static_cast<double>(m.finite_pairs)) : 0.0;
  const double ref_norm =
      std::max(std::sqrt(acc.nb), small * std::sqrt(static_cast<double>(m.finite_pairs)));
  m.norm_rel_err = acc.sq == 0    ? 0.0
                   : ref_norm > 0 ? std::sqrt(acc.sq) / ref_norm
                                  : std::numeric_limits<double>::infinity();
  m.rel_err_below_0_1pct = scalars ? static_cast<double>(acc.below1) / scalars : 1.0;
  m.rel_err_below_0_5pct = scalars ? static_cast<double>(acc.below5) / scalars : 1.0;
  return m;
}

double RoundingError(const MappedNpy& t, const std::string& dtype, double small_value) {
  const DType stored = t.info().dtype;
  const int64_t scalars = t.NumElements() * Components(stored);
  std::vector<double> x(kChunk);
  double sq = 0, nb = 0;
  int64_t finite = 0;
  for (int64_t first = 0; first < scalars; first += kChunk) {
    const int64_t n = std::min(kChunk, scalars - first);
    Convert(stored, t.data(), first, n, x.data());
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(x[i])) continue;
      const double d = RoundToDtype(x[i], dtype) - x[i];
      sq += d * d;
      nb += x[i] * x[i];
      ++finite;
    }
  }
  const double ref_norm = std::max(std::sqrt(nb), small_value * std::sqrt(double(finite)));
  return sq == 0 ? 0.0 : ref_norm > 0 ? std::sqrt(sq) / ref_norm
                                      : std::numeric_limits<double>::infinity();
}

namespace {

// The row of flat element `element` (C order: the slowest index; Fortran: the fastest).
int64_t RowOf(int64_t element, const NpyInfo& info, int64_t elements) {
  const int64_t rows = info.shape[0];
  return info.fortran_order ? element % rows : element / (elements / rows);
}

void Note(int64_t element, const NpyInfo& info, int64_t elements, BadPositions* p) {
  if (p->first < 0) p->first = element;
  if (info.shape.size() < 2 || info.shape[0] <= 0) return;
  if (p->row_seen.empty()) p->row_seen.assign(static_cast<size_t>(info.shape[0]), 0);
  uint8_t& seen = p->row_seen[static_cast<size_t>(RowOf(element, info, elements))];
  p->rows += seen == 0;
  seen = 1;
}

}  // namespace

std::vector<int64_t> UnravelIndex(int64_t flat, const std::vector<int64_t>& shape,
                                  bool fortran_order) {
  std::vector<int64_t> index(shape.size());
  for (size_t n = 0; n < shape.size(); ++n) {
    const size_t d = fortran_order ? n : shape.size() - 1 - n;  // fastest dimension first
    if (shape[d] <= 0) return index;
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

std::string IndexText(const std::vector<int64_t>& index) {
  std::string text = "[";
  for (size_t i = 0; i < index.size(); ++i) text += (i ? ", " : "") + std::to_string(index[i]);
  return text + "]";
}

std::string PositionText(const BadPositions& positions, const NpyInfo& t) {
  if (positions.first < 0 || t.shape.empty()) return "";  // a scalar has no position
  const std::vector<int64_t> index = UnravelIndex(positions.first, t.shape, t.fortran_order);
  std::string text = "first at " + IndexText(index);
  if (t.shape.size() >= 2) {
    text += ", row " + std::to_string(index[0]) + " (" + std::to_string(positions.rows) + " of " +
            std::to_string(t.shape[0]) + " rows)";
  }
  return text;
}

FiniteSummary SummarizeFinite(const MappedNpy& t) {
  FiniteSummary s;
  const DType type = t.info().dtype;
  const int64_t components = Components(type);
  const int64_t scalars = t.NumElements() * components;
  s.elements = scalars;
  std::vector<double> x(kChunk);
  double sum = 0, sq = 0;
  double mx = -std::numeric_limits<double>::infinity(), mn = -mx;
  int64_t finite = 0;
  for (int64_t first = 0; first < scalars; first += kChunk) {
    const int64_t n = std::min(kChunk, scalars - first);
    Convert(type, t.data(), first, n, x.data());
    for (int64_t i = 0; i < n; ++i) {
      const double v = x[i];
      if (!std::isfinite(v)) [[unlikely]] {
        const int64_t element = (first + i) / components;
        if (std::isnan(v)) {
          ++s.nan;
          Note(element, t.info(), t.NumElements(), &s.nan_at);
        } else {
          ++(v > 0 ? s.pos_inf : s.neg_inf);
          Note(element, t.info(), t.NumElements(), &s.inf_at);
        }
        continue;
      }
      ++finite;
      sum += v;
      sq += v * v;
      mx = std::max(mx, v);
      mn = std::min(mn, v);
      s.zero += v == 0;
      s.fp16_overflow += std::fabs(v) > 65504.0;
    }
  }
  if (finite > 0) {
    s.max = mx;
    s.min = mn;
    s.mean = sum / static_cast<double>(finite);
    s.max_abs = std::max(std::fabs(mx), std::fabs(mn));
  }
  s.l2norm = std::sqrt(sq);
  return s;
}

DeltaNorms DeltaBetween(const MappedNpy& a, const MappedNpy& b) {
  DeltaNorms d;
  const DType ta = a.info().dtype, tb = b.info().dtype;
  d.identical = ta == tb && a.info().data_bytes == b.info().data_bytes &&
                std::memcmp(a.data(), b.data(), a.info().data_bytes) == 0;
  if (Components(ta) != Components(tb) || a.NumElements() != b.NumElements()) {
    return d;
  }
  const int64_t scalars = a.NumElements() * Components(ta);
  std::vector<double> xa(kChunk), xb(kChunk);
  double diff = 0, ref = 0;
  for (int64_t first = 0; first < scalars; first += kChunk) {
    const int64_t n = std::min(kChunk, scalars - first);
    Convert(ta, a.data(), first, n, xa.data());
    Convert(tb, b.data(), first, n, xb.data());
    for (int64_t i = 0; i < n; ++i) {
      diff += (xa[i] - xb[i]) * (xa[i] - xb[i]);
      ref += xb[i] * xb[i];
    }
  }
  d.diff_l2 = std::sqrt(diff);
  d.ref_l2 = std::sqrt(ref);
  return d;
}

}  // namespace graphdump::analysis
