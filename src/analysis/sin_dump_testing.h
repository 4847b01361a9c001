// For the analysis tests: a one-kernel, one-iteration dump of Default/net-Net/Sin-op1's output,
// written either as a float32 .npy file or as a statistic.csv row (docs/file-format.md), so a
// test can compare the two forms of the same tensor.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "graphdump/analysis/dump_index.h"
#include "graphdump/npy.h"
#include "graphdump/stats.h"
#include "testing/testing.h"

namespace graphdump::analysis::testing_dumps {

inline constexpr char kSinKernel[] = "Default/net-Net/Sin-op1";
inline constexpr char kSinFileName[] = "Default_net-Net_Sin-op1";

// Writes the dump under `dir` and indexes it: `values` as the output's .npy file, or (when
// `statistic` is set) a statistic.csv row of `categories` holding `stats` for a tensor of
// `values`' shape.
inline DumpIndex WriteSinDump(const ::graphdump::testing::TempDir& dir, bool statistic,
                              const std::vector<float>& values, const NanPropagatingStats& stats,
                              const std::vector<StatCategory>& categories) {
  const std::string rank = dir.Sub("rank_0");
  const std::string iteration = rank + "/Net/0/0";
  std::filesystem::create_directories(rank + "/execution_order");
  std::filesystem::create_directories(iteration);
  ::graphdump::testing::WriteFile(
      rank + "/execution_order/ms_execution_order_graph_0.csv",
      std::string("NodeExecutionOrder-FullNameWithScope\n") + kSinKernel + "\n");
  const int64_t n = static_cast<int64_t>(values.size());
  if (statistic) {
    StatRowInfo info;
    info.op_type = "Sin";
    info.op_name = kSinFileName;
    info.timestamp = 1700000000000000;
    info.data_size = static_cast<uint64_t>(n) * 4;
    info.shape = {n};
    ::graphdump::testing::WriteFile(
        iteration + "/statistic.csv",
        StatisticCsvHeader(categories) + StatisticCsvRow(info, stats, categories));
  } else {
    std::string bytes = NpyHeader(DType::kFloat32, {n});
    bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * 4);
    ::graphdump::testing::WriteFile(iteration + std::string("/Sin.") + kSinFileName +
                                        ".0.0.1700000000000000.output.0.DefaultFormat.float32.npy",
                                    bytes);
  }
  auto index = IndexDump(dir.path());
  EXPECT_TRUE(index.ok()) << index.status().message();
  return std::move(index).value();
}

}  // namespace graphdump::analysis::testing_dumps
