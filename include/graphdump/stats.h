// Tensor statistics for statistic.csv (docs/file-format.md), computed in one pass over the data
// together with the md5 of the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "graphdump/config.h"
#include "graphdump/dtype.h"

namespace graphdump {

// statistic.csv's statistics, with MindSpore's NaN policy: one NaN element makes max, min, avg and
// l2norm NaN (infinities take part). The analysis tools' FiniteSummary (analysis/tensor_math.h)
// is the other policy: values over the finite elements only, non-finite ones counted apart.
struct NanPropagatingStats {
  uint64_t count = 0;                            // always computed
  double max = 0, min = 0, avg = 0, l2norm = 0;  // nan when any element is NaN
  uint64_t negative_count = 0;                   // x < 0, -inf included ("negative zero count")
  uint64_t positive_count = 0;                   // x > 0, +inf included ("positive zero count")
  uint64_t nan_count = 0;
  uint64_t negative_inf_count = 0;
  uint64_t positive_inf_count = 0;
  uint64_t zero_count = 0;  // the counts above: 0 unless StatsRequest::counts
  std::string md5;          // lower-case hex; empty when not requested
};

// What a StatsAccumulator computes beyond count, max, min, avg and l2norm (which are always
// computed: one cheap pass of max, min, sum and sum of squares with a check for NaN). The six
// element counts and the md5 cost more, so they are computed only when asked for. Each member
// is a pass some catalogue rows name (StatisticInfo::needs); requests compare member by member.
struct StatsRequest {
  bool counts = true;  // negative/positive/zero/NaN/-inf/+inf counts
  bool md5 = false;

  // What the statistic.csv columns `categories` need: the passes their catalogue rows name.
  static StatsRequest For(const std::vector<StatCategory>& categories);
  auto operator<=>(const StatsRequest&) const = default;
};

// Accumulates statistics over a tensor's bytes fed in C order, in pieces that end on element
// boundaries. Complex values contribute their real parts to max/min/avg and |z|^2 to l2norm.
class StatsAccumulator {
 public:
  StatsAccumulator(DType dtype, StatsRequest request);
  ~StatsAccumulator();
  StatsAccumulator(const StatsAccumulator&) = delete;
  StatsAccumulator& operator=(const StatsAccumulator&) = delete;

  // `bytes` holds whole elements in memory layout (packed int4: whole bytes, two values each;
  // `elements` says how many values are meant, so an odd count ignores the last high nibble).
  void Update(const uint8_t* bytes, size_t size, int64_t elements);
  NanPropagatingStats Finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Statistics of a whole contiguous buffer (convenience for tests and the analysis tools).
NanPropagatingStats ComputeStats(DType dtype, const void* data, int64_t elements,
                                 StatsRequest request);
// Every statistic, with or without the md5.
NanPropagatingStats ComputeStats(DType dtype, const void* data, int64_t elements, bool with_md5);

// The float32 kernels the statistics run on this machine: "avx2" (AVX2 and FMA), "sse2" (x86-64
// baseline, or forced by the environment variable GRAPHDUMP_SIMD=sse2) or "scalar".
std::string_view StatsKernels();

// Whether any element of a floating (or complex) buffer is NaN or +-Inf. Integers: false.
bool HasNonFinite(DType dtype, const void* data, int64_t elements);

// A statistic value as MindSpore prints it: default ostream formatting, 6 significant digits
// ("9.53939", "1e+06", "inf", "-inf", "nan").
std::string FormatStatValue(double value);

// The fields of one statistic.csv row besides the statistics.
struct StatRowInfo {
  std::string op_type;
  std::string op_name;
  uint32_t task_id = 0;
  uint32_t stream_id = 0;
  uint64_t timestamp = 0;
  bool is_input = false;
  uint32_t slot = 0;
  uint64_t data_size = 0;  // bytes
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
};

// "Op Type,Op Name,...,Shape,Max Value,...\n" for the given categories (no trailing comma).
std::string StatisticCsvHeader(const std::vector<StatCategory>& categories);

// One data row: every field followed by ',' and the line ending in "\n".
std::string StatisticCsvRow(const StatRowInfo& info, const NanPropagatingStats& stats,
                            const std::vector<StatCategory>& categories);
// The same row appended to `row`.
void AppendStatisticCsvRow(const StatRowInfo& info, const NanPropagatingStats& stats,
                           const std::vector<StatCategory>& categories, std::string* row);

}  // namespace graphdump
