// Statistics in one pass (docs/file-format.md): the kernel per dtype and StatsAccumulator, which
// runs it over a tensor's bytes. The hot loop per dtype is a template instantiated for the
// element type, with four independent accumulator lanes so the additions do not wait on each
// other. NaN and infinity counts cost nothing in the common case:
//  - NaN fails x < 0, x > 0 and x == 0, so nan_count = count - negative - positive - zero;
//  - an infinity makes the running sum non-finite, so only a piece whose sum is not finite is
//    scanned a second time to count infinities.
// float32 (and float16/bfloat16, widened to it) has vector kernels (stats_float32.cc).
// StatsAccumulator::Update cuts large inputs into fixed 1 MiB pieces, reduced on several cores
// (internal/helper_threads.h) and added in order.
#include "graphdump/stats.h"

#include <openssl/evp.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

#include "graphdump/internal/cpu.h"
#include "graphdump/internal/helper_threads.h"
#include "graphdump/internal/stats_totals.h"
#include "graphdump/status.h"

namespace graphdump {
namespace {

using internal::AccumulateFloat32;
using internal::AccumulateReal;
using internal::ReadAs;
using internal::ReadBool;
using internal::Totals;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

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
  // An ostream's default formatting is printf's %g with precision 6, which to_chars' general
  // format with precision 6 is specified to match ("inf" and "-inf" included), without the
  // stream's construction and locale look-ups (a statistic dump formats three values a row).
  char text[32];
  const std::to_chars_result end = std::to_chars(text, text + sizeof text, value,
                                                 std::chars_format::general, 6);
  return std::string(text, end.ptr);
}

}  // namespace graphdump
