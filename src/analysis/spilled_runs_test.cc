// SpilledRuns: the merge is a stable sort of the runs one after the other, records longer than
// the read buffer come back whole, and runs written in several chunks read in order.
#include "graphdump/analysis/spilled_runs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

namespace graphdump::analysis {
namespace {

TEST(SpilledRunsTest, MergeIsAStableSortOfTheRuns) {
  constexpr size_t kRuns = 7;
  SpilledRuns spill(kRuns, 2);
  // (key word 0, key word 1, text), each run in key order with ties inside and across runs.
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> all;
  for (size_t run = 0; run < kRuns; ++run) {
    std::string chunk;
    for (uint64_t i = 0; i < 50; ++i) {
      const uint64_t key[2] = {i / 3, run % 2 == 0 ? 1u : 0u};
      // Run 3 holds one record longer than the read buffer; run 5 is empty.
      std::string text = run == 3 && i == 10 ? std::string(100000, 'x')
                                             : "r" + std::to_string(run) + "i" + std::to_string(i);
      if (run == 5) break;
      spill.Encode(key, text, &chunk);
      all.emplace_back(key[0], key[1], text);
      if (i % 7 == 0) {  // several chunks a run
        ASSERT_TRUE(spill.Append(run, &chunk).ok());
      }
    }
    ASSERT_TRUE(spill.Append(run, &chunk).ok());
    EXPECT_EQ(spill.count(run), run == 5 ? 0u : 50u);
  }
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
  });
  std::vector<std::string> merged;
  ASSERT_TRUE(spill
                  .Merge([&](std::string_view text) {
                    merged.emplace_back(text);
                    return Status::Ok();
                  })
                  .ok());
  ASSERT_EQ(merged.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(merged[i], std::get<2>(all[i])) << i;

  std::vector<std::string> run3;
  ASSERT_TRUE(spill.Read(3, [&](std::string_view text) {
    run3.emplace_back(text);
    return Status::Ok();
  }).ok());
  ASSERT_EQ(run3.size(), 50u);
  EXPECT_EQ(run3[10].size(), 100000u);
  EXPECT_EQ(run3[49], "r3i49");
}

TEST(SpilledRunsTest, AnErrorOfTheReaderStopsTheMerge) {
  SpilledRuns spill(2, 0);
  std::string chunk;
  for (int i = 0; i < 5; ++i) spill.Encode(nullptr, "a", &chunk);
  ASSERT_TRUE(spill.Append(1, &chunk).ok());
  int seen = 0;
  const Status s = spill.Merge([&](std::string_view) {
    return ++seen == 2 ? Status::IOError("stop") : Status::Ok();
  });
  EXPECT_EQ(s.message(), "stop");
  EXPECT_EQ(seen, 2);
}

TEST(SpilledRunsTest, IndentedShiftsEveryLineButTheFirst) {
  std::string out = "x";
  AppendIndented("{\n  \"a\": 1\n}", 4, &out);
  EXPECT_EQ(out, "x{\n      \"a\": 1\n    }");
}

}  // namespace
}  // namespace graphdump::analysis
