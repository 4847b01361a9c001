// The process-group layer across real processes: the test re-executes this binary as the ranks
// of a job (through the launcher), each running one DistributedRankBody test.
#include "graphdump/torch/distributed.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>

#include "graphdump/launcher.h"
#include "graphdump/rank_environment.h"

namespace graphdump {
namespace {

constexpr char kBodyEnv[] = "GRAPHDUMP_TEST_RANK_BODY";

bool InRankBody(const char* scenario) {
  const char* body = std::getenv(kBodyEnv);
  return body != nullptr && std::string(body) == scenario;
}

std::unique_ptr<ProcessGroup> Join() {
  StatusOr<RankEnvironment> env = RankEnvironmentFromEnv();
  EXPECT_TRUE(env.ok()) << env.status().message();
  EXPECT_TRUE(env->distributed());
  StatusOr<std::unique_ptr<ProcessGroup>> group = ProcessGroup::Connect(*env, {});
  EXPECT_TRUE(group.ok()) << group.status().message();
  return group.ok() ? std::move(*group) : nullptr;
}

// Runs scenario `scenario` as `nproc` ranks; returns every line they printed.
LaunchResult RunRanks(const char* scenario, int nproc, std::vector<std::string>* lines,
                      std::vector<std::string> extra_env = {}) {
  LaunchOptions options;
  options.nproc = nproc;
  options.argv = {"/proc/self/exe", "--gtest_filter=DistributedRankBody.*"};
  extra_env.push_back(std::string(kBodyEnv) + "=" + scenario);
  options.extra_env = extra_env;
  auto mu = std::make_shared<std::mutex>();
  options.output = [lines, mu](const std::string& line, bool) {
    std::lock_guard<std::mutex> lock(*mu);
    lines->push_back(line);
  };
  StatusOr<LaunchResult> result = LaunchRanks(options);
  EXPECT_TRUE(result.ok()) << result.status().message();
  return result.ok() ? *result : LaunchResult{};
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const std::string& l : lines) all += l;
  return all;
}

TEST(DistributedRankBody, Collectives) {
  if (!InRankBody("collectives")) GTEST_SKIP() << "runs only as a rank of DistributedTest";
  std::unique_ptr<ProcessGroup> group = Join();
  ASSERT_NE(group, nullptr);
  const float r = static_cast<float>(group->rank());
  std::vector<at::Tensor> tensors{at::full({2, 3}, r + 1), at::full({4}, 10 * r),
                                  at::full({2}, static_cast<double>(r), at::kDouble)};
  ASSERT_TRUE(group->AllReduceMean(tensors).ok());
  // Ranks 0..2 hold 1,2,3 / 0,10,20 / 0,1,2: the means are 2, 10, 1.
  EXPECT_TRUE(at::equal(tensors[0], at::full({2, 3}, 2.0f)));
  EXPECT_TRUE(at::equal(tensors[1], at::full({4}, 10.0f)));
  EXPECT_TRUE(at::equal(tensors[2], at::full({2}, 1.0, at::kDouble)));
  std::vector<at::Tensor> sums{at::full({3}, r + 1)};
  ASSERT_TRUE(group->AllReduceSum(sums).ok());
  EXPECT_TRUE(at::equal(sums[0], at::full({3}, 6.0f)));
  std::vector<at::Tensor> values{at::full({5}, r * 7), at::full({1}, static_cast<int64_t>(r) + 3)};
  ASSERT_TRUE(group->Broadcast(values, 1).ok());
  EXPECT_TRUE(at::equal(values[0], at::full({5}, 7.0f)));
  EXPECT_TRUE(at::equal(values[1], at::full({1}, int64_t{4})));
  EXPECT_FALSE(group->Broadcast(values, 3).ok());
  ASSERT_TRUE(group->Barrier().ok());
  std::printf("collectives ok\n");
}

TEST(DistributedTest, CollectivesAcrossThreeRanks) {
  std::vector<std::string> lines;
  LaunchResult result = RunRanks("collectives", 3, &lines);
  EXPECT_TRUE(result.ok()) << result.message << "\n" << Joined(lines);
  for (int r = 0; r < 3; ++r) {
    std::string expected = "[rank " + std::to_string(r) + "] collectives ok\n";
    EXPECT_NE(std::find(lines.begin(), lines.end(), expected), lines.end()) << Joined(lines);
  }
}

TEST(DistributedRankBody, DeadPeer) {
  if (!InRankBody("dead_peer")) GTEST_SKIP() << "runs only as a rank of DistributedTest";
  std::unique_ptr<ProcessGroup> group = Join();
  ASSERT_NE(group, nullptr);
  if (group->rank() == 1) _exit(0);  // leaves without a word
  std::vector<at::Tensor> tensors{at::ones({8})};
  Status status = group->AllReduceMean(tensors);
  ASSERT_FALSE(status.ok());
  std::printf("error: %s\n", status.message().c_str());
}

TEST(DistributedTest, DeadPeerGivesAnErrorNamingTheRank) {
  std::vector<std::string> lines;
  LaunchResult result = RunRanks("dead_peer", 2, &lines, {"GRAPHDUMP_DIST_TIMEOUT=20"});
  EXPECT_TRUE(result.ok()) << result.message << "\n" << Joined(lines);
  EXPECT_NE(Joined(lines).find("[rank 0] error: rank 0 of 2: all-reduce of 1 tensors"),
            std::string::npos)
      << Joined(lines);
}

TEST(DistributedRankBody, SilentPeer) {
  if (!InRankBody("silent_peer")) GTEST_SKIP() << "runs only as a rank of DistributedTest";
  std::unique_ptr<ProcessGroup> group = Join();
  ASSERT_NE(group, nullptr);
  if (group->rank() == 1) {
    sleep(6);  // alive, but never joins the collective
    return;
  }
  auto start = std::chrono::steady_clock::now();
  std::vector<at::Tensor> tensors{at::ones({8})};
  Status status = group->AllReduceMean(tensors);
  ASSERT_FALSE(status.ok());
  std::printf("error after %.0f s: %s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              status.message().c_str());
}

TEST(DistributedTest, SilentPeerTimesOut) {
  std::vector<std::string> lines;
  LaunchResult result = RunRanks("silent_peer", 2, &lines, {"GRAPHDUMP_DIST_TIMEOUT=2"});
  EXPECT_TRUE(result.ok()) << result.message << "\n" << Joined(lines);
  EXPECT_NE(Joined(lines).find("s: rank 0 of 2: all-reduce"), std::string::npos) << Joined(lines);
}

TEST(DistributedTest, MissingRendezvousFails) {
  RankEnvironment env;
  env.rank = 1;
  env.world_size = 2;
  env.master_addr = "127.0.0.1";
  StatusOr<uint16_t> port = FindFreePort();
  ASSERT_TRUE(port.ok());
  env.master_port = *port;  // nobody serves it
  ProcessGroupOptions options;
  options.timeout = std::chrono::milliseconds(1500);
  setenv("GRAPHDUMP_DIST_TIMEOUT", "1.5", 1);
  StatusOr<std::unique_ptr<ProcessGroup>> group = ProcessGroup::Connect(env, options);
  unsetenv("GRAPHDUMP_DIST_TIMEOUT");
  ASSERT_FALSE(group.ok());
  EXPECT_NE(group.status().message().find("rank 1 of 2: cannot reach the rendezvous store at "
                                          "127.0.0.1:" +
                                          std::to_string(*port)),
            std::string::npos)
      << group.status().message();
}

TEST(DistributedTest, RankThatNeverJoinsIsNamedWithinTheTimeout) {
  // Rank 0 of 3 serves the store and rank 1 joins; rank 2 never starts. Both fail once, after
  // the timeout, naming rank 2 (the store's own wait named no one, and the gloo connection
  // after it waited as long again).
  StatusOr<uint16_t> port = FindFreePort();
  ASSERT_TRUE(port.ok());
  setenv("GRAPHDUMP_DIST_TIMEOUT", "1.5", 1);
  auto connect = [&](uint32_t rank, Status* status, double* seconds) {
    RankEnvironment env;
    env.rank = rank;
    env.world_size = 3;
    env.master_addr = "127.0.0.1";
    env.master_port = *port;
    const auto start = std::chrono::steady_clock::now();
    StatusOr<std::unique_ptr<ProcessGroup>> group = ProcessGroup::Connect(env, {});
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    *status = group.status();
  };
  Status status0, status1;
  double seconds0 = 0, seconds1 = 0;
  std::thread rank0(connect, 0, &status0, &seconds0);
  std::thread rank1(connect, 1, &status1, &seconds1);
  rank0.join();
  rank1.join();
  unsetenv("GRAPHDUMP_DIST_TIMEOUT");
  for (const auto& [status, seconds] :
       {std::pair(status0, seconds0), std::pair(status1, seconds1)}) {
    ASSERT_FALSE(status.ok());
    EXPECT_NE(status.message().find("rank 2 of 3 did not join the job within 1.5 s"),
              std::string::npos)
        << status.message();
    EXPECT_LT(seconds, 3.0) << status.message();
  }
  EXPECT_EQ(status0.message().rfind("rank 0 of 3: ", 0), 0u) << status0.message();
}

TEST(DistributedTest, SingleProcessGroupIsTheIdentity) {
  StatusOr<std::unique_ptr<ProcessGroup>> group = ProcessGroup::Connect(RankEnvironment{}, {});
  ASSERT_TRUE(group.ok());
  std::vector<at::Tensor> tensors{at::full({3}, 5.0f)};
  ASSERT_TRUE((*group)->AllReduceMean(tensors).ok());
  EXPECT_TRUE(at::equal(tensors[0], at::full({3}, 5.0f)));
  EXPECT_TRUE((*group)->Barrier().ok());
}

TEST(DistributedTest, ShardRowsIsContiguousAndEven) {
  auto rows = ShardRows(8, 1, 2);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->first, 4);
  EXPECT_EQ(rows->second, 8);
  rows = ShardRows(9, 0, 3);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->second, 3);
  auto bad = ShardRows(7, 0, 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("batch of 7 rows cannot be split evenly over 2 ranks"),
            std::string::npos);
}

}  // namespace
}  // namespace graphdump
