// Statistics in one pass (docs/file-format.md). The hot loop per dtype is a template instantiated
// for the element type, with four independent accumulator lanes so the additions do not wait on
// each other. NaN and infinity counts cost nothing in the common case:
//  - NaN fails x < 0, x > 0 and x == 0, so nan_count = count - negative - positive - zero;
//  - an infinity makes the running sum non-finite, so only a piece whose sum is not finite is
//    scanned a second time to count infinities.
// float32 (and float16/bfloat16, widened to it) has vector kernels: SSE2, which every x86-64
// has, and AVX2+FMA chosen at run time. Without StatsRequest::counts the float32 kernel keeps
// only max, min, the sums and a NaN flag, which is about half the work per element.
// The kernels' two-vector steps are unrolled by pragma: without it GCC 12 at -O2 kept the
// accumulator arrays in memory, at less than half the speed.
// StatsAccumulator::Update cuts large inputs into fixed 1 MiB pieces, reduced on several cores
// (internal/helper_threads.h) and added in order.
#include "graphdump/stats.h"

#include <openssl/evp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>
#include <string_view>
#include <vector>

#include "graphdump/internal/cpu.h"
#include "graphdump/internal/helper_threads.h"
#include "graphdump/status.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace graphdump {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Running totals; counts of NaN are derived at the end (see the file comment).
struct Totals {
  uint64_t count = 0;
  uint64_t negative = 0, positive = 0, zero = 0;
  uint64_t negative_inf = 0, positive_inf = 0;
  uint64_t nan = 0;      // only maintained by the complex path
  bool any_nan = false;  // maintained by every path
  double sum = 0, sum_squares = 0;
  double max = -kInf, min = kInf;
};

// Adds the totals of a later piece of the same tensor to `into`.
void AddTotals(const Totals& piece, Totals* into) {
  into->count += piece.count;
  into->negative += piece.negative;
  into->positive += piece.positive;
  into->zero += piece.zero;
  into->negative_inf += piece.negative_inf;
  into->positive_inf += piece.positive_inf;
  into->nan += piece.nan;
  into->any_nan = into->any_nan || piece.any_nan;
  into->sum += piece.sum;
  into->sum_squares += piece.sum_squares;
  into->max = std::max(into->max, piece.max);
  into->min = std::min(into->min, piece.min);
}

// StatsAccumulator::Update reduces its bytes in pieces of this size, each on its own.
constexpr size_t kPieceBytes = size_t{1} << 20;

// Exact float16 -> float without branches: the exponent and mantissa bits moved to float32
// positions read as a number 2^112 too small (for normal and subnormal halves alike), so one
// multiply rebiases them; infinities and NaNs keep an all-ones exponent instead.
float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t rest = static_cast<uint32_t>(h & 0x7fff) << 13;
  const float scaled = std::bit_cast<float>(rest) * 0x1p112f;
  const uint32_t special = rest | 0x7f800000u;
  const uint32_t bits = (h & 0x7c00) == 0x7c00 ? special : std::bit_cast<uint32_t>(scaled);
  return std::bit_cast<float>(bits | sign);
}

float BFloat16ToFloat(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

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
void AccumulateReal(const uint8_t* p, size_t n, Read read, bool floating, Totals* totals) {
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

// float32 without element counts: max, min, sums and the NaN flag. Scalar; the vector kernels
// use it for their last few elements.
void AccumulateFloat32Values(const uint8_t* p, size_t n, Totals* totals) {
  const ReadAs<float> read;
  for (size_t i = 0; i < n; ++i) {
    const double x = read(p, i);
    if (std::isnan(x)) {
      totals->any_nan = true;
      continue;
    }
    totals->sum += x;
    totals->sum_squares += x * x;
    totals->max = std::max(totals->max, x);
    totals->min = std::min(totals->min, x);
  }
  totals->count += n;
}

void AccumulateFloat32Counts(const uint8_t* p, size_t n, Totals* totals) {
  AccumulateReal(p, n, ReadAs<float>(), true, totals);
}

#if defined(__x86_64__)
constexpr size_t kCounterBlock = size_t{1} << 16;  // elements per flush of 32-bit count lanes

// float32 with SSE2 (baseline on x86-64): four elements per vector, comparisons and max/min in
// float (exact), sums and squares widened to double, counts in 32-bit lanes flushed every block.
// Infinities are counted directly, so the data is read once.
void AccumulateFloat32Sse2(const uint8_t* p, size_t n, Totals* totals) {
  const auto* f = reinterpret_cast<const float*>(p);
  constexpr size_t kStep = 8;
  const __m128 zero = _mm_setzero_ps();
  const __m128 inf = _mm_set1_ps(std::numeric_limits<float>::infinity());
  const __m128 minus_inf = _mm_set1_ps(-std::numeric_limits<float>::infinity());
  __m128 max = minus_inf, min = inf;
  __m128d sum[4] = {_mm_setzero_pd(), _mm_setzero_pd(), _mm_setzero_pd(), _mm_setzero_pd()};
  __m128d squares[4] = {sum[0], sum[1], sum[2], sum[3]};
  const size_t vector_end = n - n % kStep;
  alignas(16) uint32_t lanes[4];
  auto flush = [&](__m128i counter, uint64_t* total) {
    _mm_store_si128(reinterpret_cast<__m128i*>(lanes), counter);
    const uint64_t block_total = uint64_t{lanes[0]} + lanes[1] + lanes[2] + lanes[3];
    *total += block_total;
    return block_total;
  };
  for (size_t block = 0; block < vector_end; block += kCounterBlock) {
    const size_t end = std::min(vector_end, block + kCounterBlock);
    __m128i negative = _mm_setzero_si128(), positive = negative, zeros = negative;
    __m128i negative_inf = negative, positive_inf = negative;
    for (size_t i = block; i < end; i += kStep) {
      const __m128 v[2] = {_mm_loadu_ps(f + i), _mm_loadu_ps(f + i + 4)};
#pragma GCC unroll 2
      for (int k = 0; k < 2; ++k) {
        max = _mm_max_ps(v[k], max);  // a NaN in v[k] yields the old max: skipped
        min = _mm_min_ps(v[k], min);
        negative = _mm_sub_epi32(negative, _mm_castps_si128(_mm_cmplt_ps(v[k], zero)));
        positive = _mm_sub_epi32(positive, _mm_castps_si128(_mm_cmpgt_ps(v[k], zero)));
        zeros = _mm_sub_epi32(zeros, _mm_castps_si128(_mm_cmpeq_ps(v[k], zero)));
        negative_inf = _mm_sub_epi32(negative_inf, _mm_castps_si128(_mm_cmpeq_ps(v[k], minus_inf)));
        positive_inf = _mm_sub_epi32(positive_inf, _mm_castps_si128(_mm_cmpeq_ps(v[k], inf)));
        const __m128d low = _mm_cvtps_pd(v[k]);
        const __m128d high = _mm_cvtps_pd(_mm_movehl_ps(v[k], v[k]));
        sum[2 * k] = _mm_add_pd(sum[2 * k], low);
        sum[2 * k + 1] = _mm_add_pd(sum[2 * k + 1], high);
        squares[2 * k] = _mm_add_pd(squares[2 * k], _mm_mul_pd(low, low));
        squares[2 * k + 1] = _mm_add_pd(squares[2 * k + 1], _mm_mul_pd(high, high));
      }
    }
    const uint64_t ordered = flush(negative, &totals->negative) +
                             flush(positive, &totals->positive) + flush(zeros, &totals->zero);
    totals->any_nan = totals->any_nan || ordered != end - block;
    flush(negative_inf, &totals->negative_inf);
    flush(positive_inf, &totals->positive_inf);
  }
  alignas(16) float max_lanes[4], min_lanes[4];
  _mm_store_ps(max_lanes, max);
  _mm_store_ps(min_lanes, min);
  alignas(16) double pair[2];
  for (int k = 0; k < 4; ++k) {
    _mm_store_pd(pair, sum[k]);
    totals->sum += pair[0] + pair[1];
    _mm_store_pd(pair, squares[k]);
    totals->sum_squares += pair[0] + pair[1];
    totals->max = std::max(totals->max, static_cast<double>(max_lanes[k]));
    totals->min = std::min(totals->min, static_cast<double>(min_lanes[k]));
  }
  totals->count += vector_end;
  AccumulateFloat32Counts(p + 4 * vector_end, n - vector_end, totals);
}

// Adds the eight floats of `v`, widened to double, to two lanes of sums and of squares.
__attribute__((target("avx2,fma"))) inline void AddSumsAvx2(__m256 v, __m256d* sums,
                                                            __m256d* squares) {
  const __m256d low = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
  const __m256d high = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
  sums[0] = _mm256_add_pd(sums[0], low);
  sums[1] = _mm256_add_pd(sums[1], high);
  squares[0] = _mm256_fmadd_pd(low, low, squares[0]);
  squares[1] = _mm256_fmadd_pd(high, high, squares[1]);
}

// Adds the lanes of AVX2 accumulators to `totals`: eight float max/min lanes, and four double
// lanes in each of `sums` and `squares`.
template <size_t kSums>
__attribute__((target("avx2,fma"))) void AddAvx2Lanes(__m256 max, __m256 min,
                                                      const __m256d (&sums)[kSums],
                                                      const __m256d (&squares)[kSums],
                                                      Totals* totals) {
  alignas(32) float max_lanes[8], min_lanes[8];
  _mm256_store_ps(max_lanes, max);
  _mm256_store_ps(min_lanes, min);
  for (int k = 0; k < 8; ++k) {
    totals->max = std::max(totals->max, static_cast<double>(max_lanes[k]));
    totals->min = std::min(totals->min, static_cast<double>(min_lanes[k]));
  }
  alignas(32) double quad[4];
  for (size_t k = 0; k < kSums; ++k) {
    _mm256_store_pd(quad, sums[k]);
    totals->sum += (quad[0] + quad[1]) + (quad[2] + quad[3]);
    _mm256_store_pd(quad, squares[k]);
    totals->sum_squares += (quad[0] + quad[1]) + (quad[2] + quad[3]);
  }
}

__attribute__((target("avx2,fma"))) inline __m256i AsInt(__m256 mask) {
  return _mm256_castps_si256(mask);
}

// Adds the eight 32-bit lanes of `counter` to `total`; returns their sum.
__attribute__((target("avx2,fma"))) inline uint64_t AddCountLanes(__m256i counter,
                                                                  uint64_t* total) {
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), counter);
  uint64_t sum = 0;
  for (uint32_t lane : lanes) sum += lane;
  *total += sum;
  return sum;
}

// float32 with AVX2 and FMA, every statistic: the SSE2 kernel eight elements wide.
__attribute__((target("avx2,fma"))) void AccumulateFloat32Avx2(const uint8_t* p, size_t n,
                                                               Totals* totals) {
  const auto* f = reinterpret_cast<const float*>(p);
  constexpr size_t kStep = 16;
  const __m256 zero = _mm256_setzero_ps();
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  const __m256 minus_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 max = minus_inf, min = inf;
  __m256d sums[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                     _mm256_setzero_pd()};
  __m256d squares[4] = {sums[0], sums[1], sums[2], sums[3]};
  const size_t vector_end = n - n % kStep;
  for (size_t block = 0; block < vector_end; block += kCounterBlock) {
    const size_t end = std::min(vector_end, block + kCounterBlock);
    __m256i negative = _mm256_setzero_si256(), positive = negative, zeros = negative;
    __m256i negative_inf = negative, positive_inf = negative;
    for (size_t i = block; i < end; i += kStep) {
      const __m256 v[2] = {_mm256_loadu_ps(f + i), _mm256_loadu_ps(f + i + 8)};
#pragma GCC unroll 2
      for (int k = 0; k < 2; ++k) {
        max = _mm256_max_ps(v[k], max);  // a NaN in v[k] yields the old max: skipped
        min = _mm256_min_ps(v[k], min);
        // A true comparison is all ones, -1 as an integer: subtracting it counts one.
        negative = _mm256_sub_epi32(negative, AsInt(_mm256_cmp_ps(v[k], zero, _CMP_LT_OQ)));
        positive = _mm256_sub_epi32(positive, AsInt(_mm256_cmp_ps(v[k], zero, _CMP_GT_OQ)));
        zeros = _mm256_sub_epi32(zeros, AsInt(_mm256_cmp_ps(v[k], zero, _CMP_EQ_OQ)));
        negative_inf =
            _mm256_sub_epi32(negative_inf, AsInt(_mm256_cmp_ps(v[k], minus_inf, _CMP_EQ_OQ)));
        positive_inf = _mm256_sub_epi32(positive_inf, AsInt(_mm256_cmp_ps(v[k], inf, _CMP_EQ_OQ)));
        AddSumsAvx2(v[k], &sums[2 * k], &squares[2 * k]);
      }
    }
    const uint64_t ordered = AddCountLanes(negative, &totals->negative) +
                             AddCountLanes(positive, &totals->positive) +
                             AddCountLanes(zeros, &totals->zero);
    totals->any_nan = totals->any_nan || ordered != end - block;
    AddCountLanes(negative_inf, &totals->negative_inf);
    AddCountLanes(positive_inf, &totals->positive_inf);
  }
  AddAvx2Lanes(max, min, sums, squares, totals);
  // GCC leaves the upper halves of the ymm registers dirty here (no vzeroupper): every legacy
  // SSE instruction after it (the tail below, the caller, a reference BLAS's sgemm) then paid
  // the AVX-SSE transition, and the next kernels of a step ran up to 3x slower.
  _mm256_zeroupper();
  totals->count += vector_end;
  AccumulateFloat32Counts(p + 4 * vector_end, n - vector_end, totals);
}

// float32 with AVX2 and FMA, values only: max, min, sums and squares (exact in double: a float
// squared fits in 48 bits) and one unordered compare per two vectors for the NaN flag.
__attribute__((target("avx2,fma"))) void AccumulateFloat32ValuesAvx2(const uint8_t* p, size_t n,
                                                                     Totals* totals) {
  const auto* f = reinterpret_cast<const float*>(p);
  constexpr size_t kStep = 16;
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  const __m256 minus_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 max[2] = {minus_inf, minus_inf};
  __m256 min[2] = {inf, inf};
  __m256 unordered = _mm256_setzero_ps();
  __m256d sums[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                     _mm256_setzero_pd()};
  __m256d squares[4] = {sums[0], sums[1], sums[2], sums[3]};
  const size_t vector_end = n - n % kStep;
  for (size_t i = 0; i < vector_end; i += kStep) {
    const __m256 v[2] = {_mm256_loadu_ps(f + i), _mm256_loadu_ps(f + i + 8)};
    unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(v[0], v[1], _CMP_UNORD_Q));
#pragma GCC unroll 2
    for (int k = 0; k < 2; ++k) {
      max[k] = _mm256_max_ps(v[k], max[k]);
      min[k] = _mm256_min_ps(v[k], min[k]);
      AddSumsAvx2(v[k], &sums[2 * k], &squares[2 * k]);
    }
  }
  // A NaN makes the sums NaN too, but they are not reported then: max/min/avg/l2norm all read nan.
  totals->any_nan = totals->any_nan || _mm256_movemask_ps(unordered) != 0;
  AddAvx2Lanes(_mm256_max_ps(max[0], max[1]), _mm256_min_ps(min[0], min[1]), sums, squares, totals);
  _mm256_zeroupper();  // see AccumulateFloat32Avx2
  totals->count += vector_end;
  AccumulateFloat32Values(p + 4 * vector_end, n - vector_end, totals);
}

void AccumulateFloat32(const uint8_t* p, size_t n, bool counts, Totals* totals) {
  if (!UseAvx2()) return AccumulateFloat32Sse2(p, n, totals);
  if (counts) return AccumulateFloat32Avx2(p, n, totals);
  AccumulateFloat32ValuesAvx2(p, n, totals);
}
#else
void AccumulateFloat32(const uint8_t* p, size_t n, bool counts, Totals* totals) {
  if (counts) return AccumulateFloat32Counts(p, n, totals);
  AccumulateFloat32Values(p, n, totals);
}
#endif

// 16-bit floats: widened to float32 a block at a time (a loop the compiler vectorizes), then
// accumulated by the float32 kernel.
template <float (*kWiden)(uint16_t)>
void AccumulateWidened(const uint8_t* p, size_t n, bool counts, Totals* totals) {
  constexpr size_t kBlock = 2048;
  uint16_t halves[kBlock];
  float floats[kBlock];
  for (size_t start = 0; start < n; start += kBlock) {
    const size_t m = std::min(kBlock, n - start);
    std::memcpy(halves, p + 2 * start, 2 * m);
    for (size_t i = 0; i < m; ++i) floats[i] = kWiden(halves[i]);
    AccumulateFloat32(reinterpret_cast<const uint8_t*>(floats), m, counts, totals);
  }
}

// Complex: the real part drives max/min/avg and the sign counts, |z|^2 the l2norm; an element
// is NaN when either part is, and infinite (by the real part's sign) when either part is.
template <typename T>
void AccumulateComplex(const uint8_t* p, size_t n, Totals* totals) {
  for (size_t i = 0; i < n; ++i) {
    T part[2];
    std::memcpy(part, p + 2 * sizeof(T) * i, 2 * sizeof(T));
    const double re = part[0], im = part[1];
    ++totals->count;
    if (std::isnan(re) || std::isnan(im)) {
      ++totals->nan;
      totals->any_nan = true;
      continue;
    }
    totals->sum += re;
    totals->sum_squares += re * re + im * im;
    totals->max = std::max(totals->max, re);
    totals->min = std::min(totals->min, re);
    totals->negative += re < 0;
    totals->positive += re > 0;
    totals->zero += re == 0;
    if (std::isinf(re) || std::isinf(im)) {
      if (re < 0 || (re == 0 && im < 0)) {
        ++totals->negative_inf;
      } else {
        ++totals->positive_inf;
      }
    }
  }
}

void AccumulateInt4(const uint8_t* p, int64_t elements, Totals* totals) {
  int8_t values[4096];
  for (int64_t start = 0; start < elements; start += 4096) {
    const int64_t n = std::min<int64_t>(4096, elements - start);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t k = start + i;
      const uint8_t nibble = (k % 2 == 0) ? (p[k / 2] & 0x0f) : (p[k / 2] >> 4);
      values[i] = static_cast<int8_t>(static_cast<int8_t>(nibble << 4) >> 4);
    }
    AccumulateReal(reinterpret_cast<const uint8_t*>(values), static_cast<size_t>(n),
                   ReadAs<int8_t>(), false, totals);
  }
}

void Accumulate(DType dtype, const uint8_t* p, int64_t elements, bool counts, Totals* totals) {
  const size_t n = static_cast<size_t>(elements);
  switch (dtype) {
    case DType::kBool:
      return AccumulateReal(p, n, ReadBool(), false, totals);
    case DType::kInt8:
      return AccumulateReal(p, n, ReadAs<int8_t>(), false, totals);
    case DType::kInt16:
      return AccumulateReal(p, n, ReadAs<int16_t>(), false, totals);
    case DType::kInt32:
      return AccumulateReal(p, n, ReadAs<int32_t>(), false, totals);
    case DType::kInt64:
      return AccumulateReal(p, n, ReadAs<int64_t>(), false, totals);
    case DType::kUInt8:
      return AccumulateReal(p, n, ReadAs<uint8_t>(), false, totals);
    case DType::kUInt16:
      return AccumulateReal(p, n, ReadAs<uint16_t>(), false, totals);
    case DType::kUInt32:
      return AccumulateReal(p, n, ReadAs<uint32_t>(), false, totals);
    case DType::kUInt64:
      return AccumulateReal(p, n, ReadAs<uint64_t>(), false, totals);
    case DType::kFloat16:
      return AccumulateWidened<HalfToFloat>(p, n, counts, totals);
    case DType::kBFloat16:
      return AccumulateWidened<BFloat16ToFloat>(p, n, counts, totals);
    case DType::kFloat32:
      return AccumulateFloat32(p, n, counts, totals);
    case DType::kFloat64:
      return AccumulateReal(p, n, ReadAs<double>(), true, totals);
    case DType::kComplex64:
      return AccumulateComplex<float>(p, n, totals);
    case DType::kComplex128:
      return AccumulateComplex<double>(p, n, totals);
    case DType::kInt4:
      return AccumulateInt4(p, elements, totals);
  }
}

std::string ToHex(const unsigned char* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    hex[2 * i] = kDigits[bytes[i] >> 4];
    hex[2 * i + 1] = kDigits[bytes[i] & 0x0f];
  }
  return hex;
}

// Any element whose exponent bits are all ones (NaN or infinity), for IEEE types of `Bits`.
template <typename Bits>
bool AnyExponentAllOnes(const uint8_t* p, size_t n, Bits mask) {
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    Bits bits;
    std::memcpy(&bits, p + sizeof(Bits) * i, sizeof(Bits));
    any |= (bits & mask) == mask;
  }
  return any;
}

}  // namespace

struct StatsAccumulator::Impl {
  DType dtype;
  bool counts = true;
  Totals totals;
  EVP_MD_CTX* md5 = nullptr;  // null when md5 was not requested
};

StatsAccumulator::StatsAccumulator(DType dtype, StatsRequest request)
    : impl_(std::make_unique<Impl>()) {
  impl_->dtype = dtype;
  impl_->counts = request.counts;
  if (request.md5) {
    impl_->md5 = EVP_MD_CTX_new();
    GRAPHDUMP_CHECK(impl_->md5 != nullptr);
    GRAPHDUMP_CHECK(EVP_DigestInit_ex(impl_->md5, EVP_md5(), nullptr) == 1);
  }
}

StatsAccumulator::~StatsAccumulator() {
  if (impl_->md5 != nullptr) EVP_MD_CTX_free(impl_->md5);
}

void StatsAccumulator::Update(const uint8_t* bytes, size_t size, int64_t elements) {
  if (elements <= 0) return;
  if (impl_->md5 != nullptr) GRAPHDUMP_CHECK(EVP_DigestUpdate(impl_->md5, bytes, size) == 1);
  const size_t item = DTypeBits(impl_->dtype) / 8;
  if (impl_->dtype == DType::kInt4 || item == 0) {
    Accumulate(impl_->dtype, bytes, elements, impl_->counts, &impl_->totals);
    return;
  }
  // Fixed pieces whose totals are added in order: the result does not depend on how many
  // threads reduced them, nor on whether the caller fed the same bytes in one call or in calls
  // of whole pieces. Large tensors are read by several cores, which together read memory
  // about twice as fast as one.
  const int64_t piece = static_cast<int64_t>(kPieceBytes / item);
  const size_t pieces = static_cast<size_t>((elements + piece - 1) / piece);
  auto reduce = [&](size_t i, Totals* into) {
    const int64_t first = static_cast<int64_t>(i) * piece;
    Accumulate(impl_->dtype, bytes + first * item, std::min(piece, elements - first), impl_->counts,
               into);
  };
  if (pieces == 1) {
    Totals whole;
    reduce(0, &whole);
    AddTotals(whole, &impl_->totals);
    return;
  }
  std::vector<Totals> totals(pieces);
  RunOnHelpers(pieces, [&](size_t i) { reduce(i, &totals[i]); });
  for (const Totals& t : totals) AddTotals(t, &impl_->totals);
}

NanPropagatingStats StatsAccumulator::Finish() {
  const Totals& t = impl_->totals;
  NanPropagatingStats stats;
  stats.count = t.count;
  if (impl_->counts) {
    stats.negative_count = t.negative;
    stats.positive_count = t.positive;
    stats.zero_count = t.zero;
    stats.nan_count = IsComplex(impl_->dtype) ? t.nan : t.count - t.negative - t.positive - t.zero;
    stats.negative_inf_count = t.negative_inf;
    stats.positive_inf_count = t.positive_inf;
  }
  if (t.any_nan) {
    stats.max = stats.min = stats.avg = stats.l2norm = kNaN;
  } else if (t.count > 0) {
    stats.max = t.max;
    stats.min = t.min;
    stats.avg = t.sum / static_cast<double>(t.count);
    stats.l2norm = std::sqrt(t.sum_squares);
  }  // an empty tensor keeps the zeros of NanPropagatingStats
  if (impl_->md5 != nullptr) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    GRAPHDUMP_CHECK(EVP_DigestFinal_ex(impl_->md5, digest, &length) == 1);
    stats.md5 = ToHex(digest, length);
    EVP_MD_CTX_free(impl_->md5);
    impl_->md5 = nullptr;
  }
  return stats;
}

NanPropagatingStats ComputeStats(DType dtype, const void* data, int64_t elements,
                                 StatsRequest request) {
  StatsAccumulator accumulator(dtype, request);
  accumulator.Update(static_cast<const uint8_t*>(data), DTypeStorageBytes(dtype, elements),
                     elements);
  return accumulator.Finish();
}

NanPropagatingStats ComputeStats(DType dtype, const void* data, int64_t elements, bool with_md5) {
  return ComputeStats(dtype, data, elements, StatsRequest{.counts = true, .md5 = with_md5});
}

std::string_view StatsKernels() {
#if defined(__x86_64__)
  return UseAvx2() ? "avx2" : "sse2";
#else
  return "scalar";
#endif
}

bool HasNonFinite(DType dtype, const void* data, int64_t elements) {
  if (elements <= 0) return false;
  const auto* p = static_cast<const uint8_t*>(data);
  const size_t n = static_cast<size_t>(elements);
  switch (dtype) {
    case DType::kFloat16:
      return AnyExponentAllOnes<uint16_t>(p, n, 0x7c00);
    case DType::kBFloat16:
      return AnyExponentAllOnes<uint16_t>(p, n, 0x7f80);
    case DType::kFloat32:
      return AnyExponentAllOnes<uint32_t>(p, n, 0x7f800000u);
    case DType::kFloat64:
      return AnyExponentAllOnes<uint64_t>(p, n, 0x7ff0000000000000ull);
    case DType::kComplex64:
      return AnyExponentAllOnes<uint32_t>(p, 2 * n, 0x7f800000u);
    case DType::kComplex128:
      return AnyExponentAllOnes<uint64_t>(p, 2 * n, 0x7ff0000000000000ull);
    default:
      return false;
  }
}

std::string FormatStatValue(double value) {
  // glibc prints a NaN with its sign bit set as "-nan"; MindSpore's files say "nan".
  if (std::isnan(value)) return "nan";
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace graphdump
