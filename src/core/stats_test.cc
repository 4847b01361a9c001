#include "graphdump/stats.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

#include "graphdump/internal/tensor_writer.h"
#include "testing/testing.h"

namespace graphdump {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct RandomTensor {
  std::string name;
  DType dtype;
  int64_t count;
  std::vector<uint8_t> bytes;  // memory layout
};

enum class Specials { kNone, kInf, kInfAndNaN };

template <typename T>
void Put(std::vector<uint8_t>* bytes, int64_t i, T value) {
  std::memcpy(bytes->data() + i * sizeof(T), &value, sizeof(T));
}

// A tensor of random values with zeros (both signs for floats) and, per `specials`, infinities
// and NaNs at random positions.
RandomTensor MakeRandom(DType dtype, int64_t count, Specials specials, uint32_t seed) {
  std::mt19937_64 rng(seed);
  RandomTensor t{std::string(DTypeName(dtype)) + "_" + std::to_string(static_cast<int>(specials)),
                 dtype, count, std::vector<uint8_t>(DTypeStorageBytes(dtype, count))};
  std::normal_distribution<double> normal(0.5, 30.0);
  for (auto& b : t.bytes) b = static_cast<uint8_t>(rng());
  for (int64_t i = 0; i < count; ++i) {
    const int64_t wide = static_cast<int64_t>(rng() % 2000000000000001ULL) - 1000000000000000LL;
    switch (dtype) {
      case DType::kFloat16: {  // random bits, made finite: the exponent 0x1f becomes 0x1e
        uint16_t h;
        std::memcpy(&h, t.bytes.data() + 2 * i, 2);
        if ((h & 0x7c00) == 0x7c00) Put<uint16_t>(&t.bytes, i, h & 0xfbff);
        break;
      }
      case DType::kBFloat16: {
        uint16_t h;
        std::memcpy(&h, t.bytes.data() + 2 * i, 2);
        if ((h & 0x7f80) == 0x7f80) Put<uint16_t>(&t.bytes, i, h & 0xff7f);
        break;
      }
      case DType::kFloat32:
        Put(&t.bytes, i, static_cast<float>(normal(rng)));
        break;
      case DType::kFloat64:
        Put(&t.bytes, i, normal(rng) * 1e10);
        break;
      case DType::kInt64:
        Put(&t.bytes, i, wide);
        break;
      case DType::kBool:
        t.bytes[i] &= 1;
        break;
      case DType::kComplex64:
        Put(&t.bytes, 2 * i, static_cast<float>(normal(rng)));
        Put(&t.bytes, 2 * i + 1, static_cast<float>(normal(rng)));
        break;
      default:
        break;  // other integers: random bits are valid values
    }
  }
  // Zeros, infinities and NaNs, as each dtype encodes them.
  const bool floating = IsFloatingPoint(dtype);
  for (int64_t k = 0; k < count / 10; ++k) {
    const int64_t i = static_cast<int64_t>(rng() % static_cast<uint64_t>(count));
    const int kind = static_cast<int>(rng() % 6);
    if (!floating || kind < 2 || specials == Specials::kNone ||
        (kind == 5 && specials != Specials::kInfAndNaN)) {
      if (dtype == DType::kInt4) {
        t.bytes[i / 2] &= (i % 2 == 0) ? 0xf0 : 0x0f;
      } else if (dtype != DType::kBool || kind == 0) {
        std::memset(t.bytes.data() + i * DTypeBits(dtype) / 8, 0, DTypeBits(dtype) / 8);
      }
      continue;
    }
    const double value = kind == 2 ? kInf : kind == 3 ? -kInf : kind == 4 ? -0.0 : kNaN;
    switch (dtype) {
      case DType::kFloat16: {
        const uint16_t bits = kind == 2 ? 0x7c00 : kind == 3 ? 0xfc00 : kind == 4 ? 0x8000 : 0x7e01;
        Put(&t.bytes, i, bits);
        break;
      }
      case DType::kBFloat16: {
        const uint16_t bits = kind == 2 ? 0x7f80 : kind == 3 ? 0xff80 : kind == 4 ? 0x8000 : 0xffc1;
        Put(&t.bytes, i, bits);
        break;
      }
      case DType::kFloat32:
        Put(&t.bytes, i, static_cast<float>(value));
        break;
      default:
        Put(&t.bytes, i, value);
        break;
    }
  }
  return t;
}

// NumPy's statistics of the raw files: one line per tensor, values as Python reprs.
constexpr char kNumpyStats[] = R"PY(
import sys, hashlib, warnings, numpy as np
np.seterr(all='ignore'); warnings.simplefilter('ignore')
for line in open(sys.argv[1]).read().splitlines():
    name, dtype, n, path = line.split('\t'); n = int(n)
    raw = open(path, 'rb').read()
    sq = None
    if dtype == 'bfloat16':
        x = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
    elif dtype == 'int4':
        b = np.frombuffer(raw, np.uint8)
        v = np.stack([b & 15, b >> 4], 1).ravel()[:n].astype(np.int64)
        x = np.where(v > 7, v - 16, v)
    elif dtype == 'bool':
        x = np.frombuffer(raw, np.uint8) != 0
    elif dtype == 'complex64':
        z = np.frombuffer(raw, np.complex64).astype(np.complex128)
        x = z.real; sq = (z.real ** 2 + z.imag ** 2).sum()
    else:
        x = np.frombuffer(raw, dtype)
    x = x.astype(np.float64)
    nan = int(np.isnan(x).sum())
    if sq is None: sq = (x * x).sum()
    if nan: mx = mn = avg = l2 = float('nan')
    else: mx, mn, avg, l2 = x.max(), x.min(), x.sum() / n, np.sqrt(sq)
    print(name, n, repr(float(mx)), repr(float(mn)), repr(float(avg)), repr(float(l2)),
          int((x < 0).sum()), int((x > 0).sum()), nan, int((x == -np.inf).sum()),
          int((x == np.inf).sum()), int((x == 0).sum()), hashlib.md5(raw).hexdigest())
)PY";

// Runs kNumpyStats over `tensors`, written to a temporary directory: one line per tensor.
testing::CommandResult NumpyStatsOf(const std::vector<RandomTensor>& tensors) {
  testing::TempDir dir;
  std::string list;
  for (const RandomTensor& t : tensors) {
    const std::string path = dir.Sub(t.name + ".bin");
    testing::WriteFile(path, std::string(t.bytes.begin(), t.bytes.end()));
    list += t.name + "\t" + std::string(DTypeName(t.dtype)) + "\t" + std::to_string(t.count) +
            "\t" + path + "\n";
  }
  testing::WriteFile(dir.Sub("list.txt"), list);
  return testing::RunPython(kNumpyStats, {dir.Sub("list.txt")});
}

void ExpectClose(double actual, double expected, const std::string& what) {
  if (std::isnan(expected)) {
    EXPECT_TRUE(std::isnan(actual)) << what << ": " << actual;
  } else if (std::isinf(expected)) {
    EXPECT_EQ(actual, expected) << what;
  } else {
    EXPECT_NEAR(actual, expected, 1e-9 * std::max(1.0, std::abs(expected))) << what;
  }
}

void ExpectMatches(const NanPropagatingStats& s, std::istringstream& line,
                   const std::string& tensor, const std::string& name) {
  std::string word[13];
  for (auto& w : word) line >> w;
  ASSERT_EQ(word[0], tensor);
  EXPECT_EQ(s.count, std::stoull(word[1])) << name;
  // max and min are elements converted to double: exact.
  if (std::isnan(std::strtod(word[2].c_str(), nullptr))) {
    EXPECT_TRUE(std::isnan(s.max) && std::isnan(s.min)) << name;
  } else {
    EXPECT_EQ(s.max, std::strtod(word[2].c_str(), nullptr)) << name;
    EXPECT_EQ(s.min, std::strtod(word[3].c_str(), nullptr)) << name;
  }
  ExpectClose(s.avg, std::strtod(word[4].c_str(), nullptr), name + " avg");
  ExpectClose(s.l2norm, std::strtod(word[5].c_str(), nullptr), name + " l2norm");
  EXPECT_EQ(s.negative_count, std::stoull(word[6])) << name;
  EXPECT_EQ(s.positive_count, std::stoull(word[7])) << name;
  EXPECT_EQ(s.nan_count, std::stoull(word[8])) << name;
  EXPECT_EQ(s.negative_inf_count, std::stoull(word[9])) << name;
  EXPECT_EQ(s.positive_inf_count, std::stoull(word[10])) << name;
  EXPECT_EQ(s.zero_count, std::stoull(word[11])) << name;
  EXPECT_EQ(s.md5, word[12]) << name;
}

// A values-only result against the full one: the same values, no counts.
void ExpectSameValues(const NanPropagatingStats& values, const NanPropagatingStats& full,
                      const std::string& name) {
  EXPECT_EQ(values.count, full.count) << name;
  if (std::isnan(full.max)) {
    EXPECT_TRUE(std::isnan(values.max) && std::isnan(values.min) && std::isnan(values.avg) &&
                std::isnan(values.l2norm))
        << name;
  } else {
    EXPECT_EQ(values.max, full.max) << name;
    EXPECT_EQ(values.min, full.min) << name;
    ExpectClose(values.avg, full.avg, name + " avg");
    ExpectClose(values.l2norm, full.l2norm, name + " l2norm");
  }
  EXPECT_EQ(values.negative_count + values.positive_count + values.zero_count + values.nan_count +
                values.negative_inf_count + values.positive_inf_count,
            0u)
      << name;
  EXPECT_TRUE(values.md5.empty()) << name;
}

TEST(StatsTest, MatchesNumpyForRandomTensors) {
  std::vector<RandomTensor> tensors;
  uint32_t seed = 1;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    for (Specials specials : {Specials::kNone, Specials::kInf, Specials::kInfAndNaN}) {
      tensors.push_back(MakeRandom(dtype, 10007, specials, seed++));
    }
  }
  for (DType dtype :
       {DType::kBool, DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kUInt8,
        DType::kUInt16, DType::kUInt32, DType::kUInt64, DType::kInt4, DType::kComplex64}) {
    tensors.push_back(MakeRandom(dtype, 10007, Specials::kNone, seed++));
  }
  const testing::CommandResult numpy = NumpyStatsOf(tensors);
  ASSERT_EQ(numpy.exit_code, 0) << numpy.output;
  std::istringstream lines(numpy.output);
  for (const RandomTensor& t : tensors) {
    std::string text;
    ASSERT_TRUE(std::getline(lines, text)) << t.name;
    // Whole buffer at once, and fed in uneven pieces (as the writer's chunks arrive).
    std::istringstream whole(text), pieces(text);
    ExpectMatches(ComputeStats(t.dtype, t.bytes.data(), t.count, true), whole, t.name, t.name);
    StatsAccumulator accumulator(t.dtype, StatsRequest{.counts = true, .md5 = true});
    const int64_t piece = 998;  // even, so int4 pieces stay on byte boundaries
    for (int64_t start = 0; start < t.count; start += piece) {
      const int64_t n = std::min(piece, t.count - start);
      const size_t offset = DTypeStorageBytes(t.dtype, start);
      accumulator.Update(t.bytes.data() + offset, DTypeStorageBytes(t.dtype, start + n) - offset,
                         n);
    }
    ExpectMatches(accumulator.Finish(), pieces, t.name, t.name + " (pieces)");
    ExpectSameValues(ComputeStats(t.dtype, t.bytes.data(), t.count, StatsRequest{.counts = false}),
                     ComputeStats(t.dtype, t.bytes.data(), t.count, false), t.name + " (values)");
  }
}

// Tensors of a few MiB, which StatsAccumulator::Update reduces in 1 MiB pieces on several
// threads: the same statistics as NumPy, bit for bit the same on every run, and the same as
// feeding the bytes one whole piece per call.
TEST(StatsTest, LargeTensorsInPiecesOnHelperThreads) {
  std::vector<RandomTensor> tensors = {
      MakeRandom(DType::kFloat32, 700001, Specials::kNone, 101),
      MakeRandom(DType::kFloat32, 700001, Specials::kInf, 102),
      MakeRandom(DType::kFloat32, 700001, Specials::kInfAndNaN, 103),
      MakeRandom(DType::kFloat16, 1300001, Specials::kInfAndNaN, 104),
      MakeRandom(DType::kFloat64, 300001, Specials::kNone, 105),
      MakeRandom(DType::kInt8, 3000001, Specials::kNone, 106),
      MakeRandom(DType::kComplex64, 300001, Specials::kNone, 107),
  };
  for (RandomTensor& t : tensors) t.name += "_" + std::to_string(t.count);
  const testing::CommandResult numpy = NumpyStatsOf(tensors);
  ASSERT_EQ(numpy.exit_code, 0) << numpy.output;
  std::istringstream lines(numpy.output);
  auto same_bits = [](const NanPropagatingStats& a, const NanPropagatingStats& b) {
    auto bits = [](double x) { return std::bit_cast<uint64_t>(x); };
    return a.count == b.count && bits(a.max) == bits(b.max) && bits(a.min) == bits(b.min) &&
           bits(a.avg) == bits(b.avg) && bits(a.l2norm) == bits(b.l2norm) &&
           a.negative_count == b.negative_count && a.positive_count == b.positive_count &&
           a.zero_count == b.zero_count && a.nan_count == b.nan_count &&
           a.negative_inf_count == b.negative_inf_count &&
           a.positive_inf_count == b.positive_inf_count;
  };
  for (const RandomTensor& t : tensors) {
    std::string text;
    ASSERT_TRUE(std::getline(lines, text)) << t.name;
    std::istringstream whole(text);
    const NanPropagatingStats first = ComputeStats(t.dtype, t.bytes.data(), t.count, true);
    ExpectMatches(first, whole, t.name, t.name);
    for (int run = 0; run < 8; ++run) {
      EXPECT_TRUE(same_bits(ComputeStats(t.dtype, t.bytes.data(), t.count, true), first))
          << t.name << " run " << run;
    }
    StatsAccumulator by_piece(t.dtype, StatsRequest{.counts = true});
    const int64_t piece = static_cast<int64_t>((size_t{1} << 20) / (DTypeBits(t.dtype) / 8));
    for (int64_t start = 0; start < t.count; start += piece) {
      const int64_t n = std::min(piece, t.count - start);
      by_piece.Update(t.bytes.data() + DTypeStorageBytes(t.dtype, start),
                      DTypeStorageBytes(t.dtype, n), n);
    }
    EXPECT_TRUE(same_bits(by_piece.Finish(), first)) << t.name << " fed piece by piece";
  }
}

// A NaN or the maximum in any piece of a large tensor reaches the result.
TEST(StatsTest, LargeTensorEveryPieceCounts) {
  const int64_t piece = (int64_t{1} << 20) / 4;
  std::vector<float> floats(3 * piece + 5);
  for (size_t i = 0; i < floats.size(); ++i) floats[i] = static_cast<float>(i % 1000) - 500.0f;
  for (int64_t at : {int64_t{0}, piece - 1, piece, 2 * piece + 7, 3 * piece + 4}) {
    std::vector<float> v = floats;
    v[at] = 1e6f;
    const NanPropagatingStats s = ComputeStats(
        DType::kFloat32, v.data(), static_cast<int64_t>(v.size()), StatsRequest{.counts = false});
    EXPECT_EQ(s.max, 1e6) << "maximum at " << at;
    EXPECT_EQ(s.min, -500.0) << "maximum at " << at;
    v[at] = std::numeric_limits<float>::quiet_NaN();
    const NanPropagatingStats n = ComputeStats(
        DType::kFloat32, v.data(), static_cast<int64_t>(v.size()), StatsRequest{.counts = true});
    EXPECT_TRUE(std::isnan(n.max)) << "NaN at " << at;
    EXPECT_EQ(n.nan_count, 1u) << "NaN at " << at;
    EXPECT_EQ(n.count, v.size());
  }
}

// Values only, NaN at each position of a float32 buffer of 37 elements (two vector steps of the
// AVX2 kernel and a tail), and in a float16 buffer (widened to float32).
TEST(StatsTest, ValuesOnlySeesNanAnywhere) {
  std::vector<float> floats(37);
  for (size_t i = 0; i < floats.size(); ++i) floats[i] = static_cast<float>(i) - 20.5f;
  const NanPropagatingStats clean =
      ComputeStats(DType::kFloat32, floats.data(), 37, StatsRequest{.counts = false});
  EXPECT_EQ(clean.max, 15.5);
  EXPECT_EQ(clean.min, -20.5);
  EXPECT_DOUBLE_EQ(clean.avg, -2.5);
  EXPECT_EQ(clean.nan_count, 0u);
  EXPECT_EQ(clean.zero_count, 0u);
  for (size_t i = 0; i < floats.size(); ++i) {
    std::vector<float> with_nan = floats;
    with_nan[i] = std::numeric_limits<float>::quiet_NaN();
    const NanPropagatingStats s =
        ComputeStats(DType::kFloat32, with_nan.data(), 37, StatsRequest{.counts = false});
    EXPECT_TRUE(std::isnan(s.max) && std::isnan(s.min) && std::isnan(s.avg) && std::isnan(s.l2norm))
        << "NaN at " << i;
    EXPECT_EQ(s.count, 37u);
  }
  const uint16_t halves[] = {0x3c00, 0x7e00, 0xc000};  // 1, NaN, -2
  EXPECT_TRUE(
      std::isnan(ComputeStats(DType::kFloat16, halves, 3, StatsRequest{.counts = false}).max));
  const NanPropagatingStats h =
      ComputeStats(DType::kFloat16, halves, 1, StatsRequest{.counts = false});
  EXPECT_EQ(h.max, 1.0);
}

TEST(StatsTest, RequestForCategories) {
  using C = StatCategory;
  const StatsRequest values = StatsRequest::For({C::kMax, C::kMin, C::kL2Norm, C::kAvg, C::kCount});
  EXPECT_FALSE(values.counts);
  EXPECT_FALSE(values.md5);
  EXPECT_TRUE(StatsRequest::For({C::kMax, C::kZeroCount}).counts);
  EXPECT_TRUE(StatsRequest::For({C::kNanCount}).counts);
  EXPECT_TRUE(StatsRequest::For({C::kPositiveInfCount}).counts);
  const StatsRequest md5 = StatsRequest::For({C::kMd5});
  EXPECT_TRUE(md5.md5);
  EXPECT_FALSE(md5.counts);
}

// The ctest entry core_stats_sse2 runs these tests again with GRAPHDUMP_SIMD=sse2.
TEST(StatsTest, KernelChoiceFollowsEnvironment) {
  const char* choice = std::getenv("GRAPHDUMP_SIMD");
  if (choice != nullptr && std::string(choice) == "sse2") {
    EXPECT_EQ(StatsKernels(), "sse2");
  } else {
    EXPECT_NE(StatsKernels(), "");
  }
}

TEST(StatsTest, HandPickedValues) {
  const float values[] = {1.0f, -2.0f, 0.0f, -0.0f, 4.0f};
  const NanPropagatingStats s = ComputeStats(DType::kFloat32, values, 5, false);
  EXPECT_EQ(s.count, 5u);
  EXPECT_EQ(s.max, 4.0);
  EXPECT_EQ(s.min, -2.0);
  EXPECT_DOUBLE_EQ(s.avg, 0.6);
  EXPECT_DOUBLE_EQ(s.l2norm, std::sqrt(21.0));
  EXPECT_EQ(s.negative_count, 1u);
  EXPECT_EQ(s.positive_count, 2u);
  EXPECT_EQ(s.zero_count, 2u);
  EXPECT_EQ(s.nan_count, 0u);
  EXPECT_TRUE(s.md5.empty());

  const double specials[] = {kInf, -kInf, 3.0, kNaN};
  const NanPropagatingStats t = ComputeStats(DType::kFloat64, specials, 4, false);
  EXPECT_TRUE(std::isnan(t.max) && std::isnan(t.min) && std::isnan(t.avg) && std::isnan(t.l2norm));
  EXPECT_EQ(t.nan_count, 1u);
  EXPECT_EQ(t.negative_inf_count, 1u);
  EXPECT_EQ(t.positive_inf_count, 1u);
  EXPECT_EQ(t.negative_count, 1u);  // -inf
  EXPECT_EQ(t.positive_count, 2u);  // +inf and 3

  const double infs[] = {kInf, 1.0};
  const NanPropagatingStats u = ComputeStats(DType::kFloat64, infs, 2, false);
  EXPECT_EQ(u.max, kInf);
  EXPECT_EQ(u.min, 1.0);
  EXPECT_EQ(u.avg, kInf);
  EXPECT_EQ(u.positive_inf_count, 1u);

  const NanPropagatingStats empty = ComputeStats(DType::kFloat32, nullptr, 0, true);
  EXPECT_EQ(empty.count, 0u);
  EXPECT_EQ(empty.md5, "d41d8cd98f00b204e9800998ecf8427e");  // md5 of no bytes
}

TEST(StatsTest, Md5OfKnownBytes) {
  const char text[] = "abc";
  EXPECT_EQ(ComputeStats(DType::kUInt8, text, 3, true).md5, "900150983cd24fb0d6963f7d28e17f72");
}

TEST(StatsTest, HasNonFinite) {
  const float finite[] = {1.0f, -3e38f, 0.0f};
  const float with_inf[] = {1.0f, std::numeric_limits<float>::infinity()};
  const double with_nan[] = {1.0, kNaN};
  const uint16_t half_inf[] = {0x3c00, 0xfc00};
  const uint16_t half_max[] = {0x7bff};
  const uint16_t bf16_nan[] = {0x7fc0};
  const float complex_nan[] = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_FALSE(HasNonFinite(DType::kFloat32, finite, 3));
  EXPECT_TRUE(HasNonFinite(DType::kFloat32, with_inf, 2));
  EXPECT_FALSE(HasNonFinite(DType::kFloat32, with_inf, 1));
  EXPECT_TRUE(HasNonFinite(DType::kFloat64, with_nan, 2));
  EXPECT_TRUE(HasNonFinite(DType::kFloat16, half_inf, 2));
  EXPECT_FALSE(HasNonFinite(DType::kFloat16, half_max, 1));
  EXPECT_FALSE(HasNonFinite(DType::kBFloat16, half_max, 1));
  EXPECT_TRUE(HasNonFinite(DType::kBFloat16, bf16_nan, 1));
  EXPECT_TRUE(HasNonFinite(DType::kComplex64, complex_nan, 1));
  const int32_t ints[] = {0x7f800000, -1};
  EXPECT_FALSE(HasNonFinite(DType::kInt32, ints, 2));
}

TEST(StatsTest, FormatStatValue) {
  EXPECT_EQ(FormatStatValue(9.539392), "9.53939");
  EXPECT_EQ(FormatStatValue(1e6), "1e+06");
  EXPECT_EQ(FormatStatValue(123456.0), "123456");
  EXPECT_EQ(FormatStatValue(1234567.0), "1.23457e+06");
  EXPECT_EQ(FormatStatValue(0.0001), "0.0001");
  EXPECT_EQ(FormatStatValue(0.00001), "1e-05");
  EXPECT_EQ(FormatStatValue(-2.5), "-2.5");
  EXPECT_EQ(FormatStatValue(0.0), "0");
  EXPECT_EQ(FormatStatValue(3.0), "3");
  EXPECT_EQ(FormatStatValue(kInf), "inf");
  EXPECT_EQ(FormatStatValue(-kInf), "-inf");
  EXPECT_EQ(FormatStatValue(kNaN), "nan");
  EXPECT_EQ(FormatStatValue(-kNaN), "nan");
}

// The ostream formatting statistic.csv always had (printf's %g, 6 digits), for doubles of every
// magnitude, both signs, zeros, subnormals, the largest and values that round up a digit.
TEST(StatsTest, FormatStatValueIsTheStreamsFormatting) {
  std::vector<double> values = {-0.0, 0.0, 5e-324, -5e-324, 2.2250738585072014e-308,
                                1.7976931348623157e308, 999999.5, 9999995.0, 0.000099999949,
                                0.00009999995, 1e-5, 123456.5, 1e15, 1e16, 1e17, 0.1, 1.0 / 3};
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200000; ++i) {
    const double bits = std::bit_cast<double>(rng());
    if (!std::isnan(bits)) values.push_back(bits);
    values.push_back(std::ldexp(static_cast<double>(rng() >> 11) / 9007199254740992.0,
                                static_cast<int>(rng() % 160) - 80) *
                     (i % 2 ? 1 : -1));
    values.push_back(static_cast<double>(static_cast<float>(values.back())));
  }
  for (double v : values) {
    std::ostringstream stream;
    stream << v;
    ASSERT_EQ(FormatStatValue(v), stream.str()) << std::hexfloat << v;
  }
}

TEST(StatisticCsvTest, HeaderHasNoTrailingComma) {
  EXPECT_EQ(StatisticCsvHeader({StatCategory::kMax, StatCategory::kMin, StatCategory::kL2Norm}),
            "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,"
            "Max Value,Min Value,L2Norm Value\n");
  EXPECT_EQ(StatisticCsvHeader({}),
            "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape\n");
  EXPECT_EQ(StatisticCsvHeader({StatCategory::kMd5, StatCategory::kAvg, StatCategory::kCount,
                                StatCategory::kNegativeZeroCount, StatCategory::kPositiveZeroCount,
                                StatCategory::kNanCount, StatCategory::kNegativeInfCount,
                                StatCategory::kPositiveInfCount, StatCategory::kZeroCount}),
            "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,"
            "MD5,Avg Value,Count,Negative Zero Count,Positive Zero Count,NaN Count,"
            "Negative Inf Count,Positive Inf Count,Zero Count\n");
}

TEST(StatisticCsvTest, RowFormat) {
  StatRowInfo info;
  info.op_type = "Conv2d";
  info.op_name = "Default_features-Sequential_0-Conv2d_conv2d-op3";
  info.task_id = 0;
  info.stream_id = 0;
  info.timestamp = 1700000000123456;
  info.is_input = false;
  info.slot = 1;
  info.data_size = 24;
  info.dtype = DType::kBFloat16;
  info.shape = {2, 3};
  NanPropagatingStats s;
  s.count = 6;
  s.max = 1e6;
  s.min = -kInf;
  s.avg = 9.539392;
  s.l2norm = kNaN;
  s.negative_count = 2;
  s.positive_count = 3;
  s.nan_count = 0;
  s.negative_inf_count = 1;
  s.positive_inf_count = 0;
  s.zero_count = 1;
  s.md5 = "0123456789abcdef0123456789abcdef";
  const std::vector<StatCategory> all = {StatCategory::kMax,
                                         StatCategory::kMin,
                                         StatCategory::kAvg,
                                         StatCategory::kCount,
                                         StatCategory::kNegativeZeroCount,
                                         StatCategory::kPositiveZeroCount,
                                         StatCategory::kNanCount,
                                         StatCategory::kNegativeInfCount,
                                         StatCategory::kPositiveInfCount,
                                         StatCategory::kZeroCount,
                                         StatCategory::kMd5,
                                         StatCategory::kL2Norm};
  EXPECT_EQ(StatisticCsvRow(info, s, all),
            "Conv2d,Default_features-Sequential_0-Conv2d_conv2d-op3,0,0,1700000000123456,output,1,"
            "24,bfloat16,\"(2,3)\",1e+06,-inf,9.53939,6,2,3,0,1,0,1,"
            "0123456789abcdef0123456789abcdef,nan,\n");
  info.is_input = true;
  info.shape = {};
  info.dtype = DType::kInt64;
  EXPECT_EQ(StatisticCsvRow(info, s, {StatCategory::kL2Norm, StatCategory::kMax}),
            "Conv2d,Default_features-Sequential_0-Conv2d_conv2d-op3,0,0,1700000000123456,input,1,"
            "24,int64,\"()\",nan,1e+06,\n");
  info.shape = {5};
  EXPECT_NE(StatisticCsvRow(info, s, {}).find(",\"(5)\",\n"), std::string::npos);
}

TEST(StatisticCsvTest, ShapeToString) {
  EXPECT_EQ(ShapeToString(std::vector<int64_t>{2, 3}), "(2,3)");
  EXPECT_EQ(ShapeToString(std::vector<int64_t>{}), "()");
  EXPECT_EQ(ShapeToString(std::vector<int64_t>{5}), "(5)");
  EXPECT_EQ(ShapeToString(std::vector<int64_t>{0, 1, 7}), "(0,1,7)");
}

}  // namespace
}  // namespace graphdump
