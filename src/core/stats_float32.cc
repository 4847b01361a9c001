// The float32 statistics kernels (docs/file-format.md's statistics; stats_totals.h's Totals):
// SSE2, which every x86-64 has, and AVX2+FMA chosen at run time (GRAPHDUMP_SIMD=sse2 forces
// SSE2), each with element counts; AVX2 also without them, which keeps only max, min, the sums
// and a NaN flag, about half the work per element; and one scalar loop (every count) for other
// machines and for the last few elements. The kernels' two-vector steps are unrolled by pragma: without it GCC 12
// at -O2 kept the accumulator arrays in memory, at less than half the speed.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "graphdump/internal/cpu.h"
#include "graphdump/internal/stats_totals.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace graphdump::internal {
namespace {

// float32 one element at a time, every count included: the vector kernels' last few elements,
// and the whole tensor on machines without them.
void AccumulateFloat32Scalar(const uint8_t* p, size_t n, Totals* totals) {
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
  AccumulateFloat32Scalar(p + 4 * vector_end, n - vector_end, totals);
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
  AccumulateFloat32Scalar(p + 4 * vector_end, n - vector_end, totals);
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
  AccumulateFloat32Scalar(p + 4 * vector_end, n - vector_end, totals);
}

}  // namespace

void AccumulateFloat32(const uint8_t* p, size_t n, bool counts, Totals* totals) {
  if (!UseAvx2()) return AccumulateFloat32Sse2(p, n, totals);
  if (counts) return AccumulateFloat32Avx2(p, n, totals);
  AccumulateFloat32ValuesAvx2(p, n, totals);
}
#else
}  // namespace

void AccumulateFloat32(const uint8_t* p, size_t n, bool, Totals* totals) {
  AccumulateFloat32Scalar(p, n, totals);
}
#endif

}  // namespace graphdump::internal
