#include "graphdump/launcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>

#include "graphdump/rank_environment.h"
#include "testing/testing.h"

namespace graphdump {
namespace {

struct Captured {
  std::mutex mu;
  std::vector<std::string> out;
  std::vector<std::string> err;
};

LaunchOptions Shell(int nproc, const std::string& script, Captured* captured) {
  LaunchOptions options;
  options.nproc = nproc;
  options.argv = {"/bin/sh", "-c", script};
  options.grace = std::chrono::milliseconds(2000);
  options.output = [captured](const std::string& line, bool is_stderr) {
    std::lock_guard<std::mutex> lock(captured->mu);
    (is_stderr ? captured->err : captured->out).push_back(line);
  };
  return options;
}

bool Contains(const std::vector<std::string>& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

TEST(LauncherTest, EveryRankGetsItsEnvironmentAndPrefixedOutput) {
  Captured captured;
  LaunchOptions options = Shell(
      3,
      "echo \"r=$RANK w=$WORLD_SIZE l=$LOCAL_RANK a=$MASTER_ADDR p=$MASTER_PORT\"; echo oops >&2",
      &captured);
  options.master_port = 29123;
  StatusOr<LaunchResult> result = LaunchRanks(options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_TRUE(result->ok()) << result->message;
  ASSERT_EQ(result->ranks.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    std::string k = std::to_string(r);
    EXPECT_TRUE(Contains(captured.out,
                         "[rank " + k + "] r=" + k + " w=3 l=" + k + " a=127.0.0.1 p=29123\n"))
        << "rank " << r;
    EXPECT_TRUE(Contains(captured.err, "[rank " + k + "] oops\n"));
    EXPECT_EQ(result->ranks[r].exit_status, 0);
  }
  EXPECT_EQ(captured.out.size(), 3u);
}

TEST(LauncherTest, PartialLastLineIsForwarded) {
  Captured captured;
  StatusOr<LaunchResult> result = LaunchRanks(Shell(1, "printf 'no newline'", &captured));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(captured.out, std::vector<std::string>{"[rank 0] no newline\n"});
}

TEST(LauncherTest, FailingRankStopsTheOthersAndIsNamed) {
  Captured captured;
  auto start = std::chrono::steady_clock::now();
  StatusOr<LaunchResult> result = LaunchRanks(
      Shell(3, "if [ \"$RANK\" = 1 ]; then echo bad >&2; exit 7; fi; exec sleep 60", &captured));
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(result->ok());
  EXPECT_EQ(result->first_failed_rank, 1);
  EXPECT_EQ(result->ranks[1].exit_status, 7);
  EXPECT_EQ(result->ranks[0].signal, SIGTERM);
  EXPECT_TRUE(result->ranks[0].stopped_by_launcher);
  EXPECT_EQ(result->ranks[2].signal, SIGTERM);
  EXPECT_NE(result->message.find("rank 1 failed: exited with status 7"), std::string::npos)
      << result->message;
  EXPECT_NE(result->message.find("rank 0 killed by signal 15 (SIGTERM) (stopped by the launcher)"),
            std::string::npos)
      << result->message;
  EXPECT_TRUE(Contains(captured.err, "[rank 1] bad\n"));
  // Stopped, not waited for: far less than the 60 s the others would sleep.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST(LauncherTest, RankKilledBySignalIsReportedWithTheSignal) {
  Captured captured;
  StatusOr<LaunchResult> result =
      LaunchRanks(Shell(2, "if [ \"$RANK\" = 0 ]; then kill -9 $$; fi; exec sleep 60", &captured));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->first_failed_rank, 0);
  EXPECT_EQ(result->ranks[0].signal, SIGKILL);
  EXPECT_NE(result->message.find("rank 0 failed: killed by signal 9 (SIGKILL)"), std::string::npos)
      << result->message;
}

TEST(LauncherTest, RankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  Captured captured;
  // Rank 0 fails only once rank 1 ignores SIGTERM, so the launcher must escalate to SIGKILL.
  testing::TempDir dir;
  const std::string ready = dir.Sub("ready");
  LaunchOptions options = Shell(2,
                                "if [ \"$RANK\" = 0 ]; then while [ ! -f " + ready +
                                    " ]; do sleep 0.02; done; exit 3; fi; trap '' TERM; touch " +
                                    ready + "; while :; do sleep 0.1; done",
                                &captured);
  options.grace = std::chrono::milliseconds(300);
  StatusOr<LaunchResult> result = LaunchRanks(options);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->first_failed_rank, 0);
  EXPECT_EQ(result->ranks[1].signal, SIGKILL);
}

// SIGTERM to the launcher: it used to die at once, and PR_SET_PDEATHSIG then killed the ranks
// with SIGKILL before they could remove their temporaries. Now each rank gets the SIGTERM
// (its own handler cleans up), the launcher waits for them and reports the signal.
TEST(LauncherTest, StopSignalIsForwardedToTheRanksAndWaitedFor) {
  Captured captured;
  testing::TempDir dir;
  LaunchOptions options = Shell(2,
                                "trap 'touch " + dir.path() +
                                    "/cleaned.$RANK; kill $!; exit 7' TERM; echo ready; "
                                    "sleep 60 & wait",
                                &captured);
  int ready = 0;
  options.output = [&](const std::string& line, bool is_stderr) {
    std::lock_guard<std::mutex> lock(captured.mu);
    (is_stderr ? captured.err : captured.out).push_back(line);
    if (line.find("] ready") != std::string::npos && ++ready == 2) ::kill(::getpid(), SIGTERM);
  };
  StatusOr<LaunchResult> result = LaunchRanks(options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->stop_signal, SIGTERM);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(result->ranks[r].exit_status, 7) << r;  // their trap ran: the signal reached them
    EXPECT_TRUE(result->ranks[r].stopped_by_launcher);
    EXPECT_EQ(::access(dir.Sub("cleaned." + std::to_string(r)).c_str(), F_OK), 0) << r;
  }
  struct sigaction now;
  ASSERT_EQ(::sigaction(SIGTERM, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);  // the caller's action is back
}

TEST(LauncherTest, MissingProgramFailsWith127) {
  LaunchOptions options;
  options.nproc = 2;
  options.argv = {"/nonexistent/graphdump-program"};
  options.output = [](const std::string&, bool) {};
  StatusOr<LaunchResult> result = LaunchRanks(options);
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(result->ok());
  EXPECT_EQ(result->ranks[static_cast<size_t>(result->first_failed_rank)].exit_status, 127);
  EXPECT_NE(result->message.find("could not be executed"), std::string::npos);
}

TEST(LauncherTest, RejectsBadArguments) {
  LaunchOptions options;
  options.nproc = 0;
  options.argv = {"/bin/true"};
  StatusOr<LaunchResult> result = LaunchRanks(options);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("--nproc 0"), std::string::npos);
  options.nproc = 1;
  options.argv.clear();
  EXPECT_FALSE(LaunchRanks(options).ok());
}

TEST(LauncherTest, CliFormReturnsTheFailedRanksStatus) {
  EXPECT_EQ(LaunchRanks(2, {"/bin/sh", "-c", "exit 0"}), 0);
  EXPECT_EQ(LaunchRanks(2, {"/bin/sh", "-c", "[ \"$RANK\" = 1 ] && exit 5; exit 0"}), 5);
  EXPECT_EQ(LaunchRanks(1, {"/bin/sh", "-c", "kill -9 $$"}), 3);
}

TEST(LauncherTest, FindFreePortGivesAUsablePort) {
  StatusOr<uint16_t> port = FindFreePort();
  ASSERT_TRUE(port.ok()) << port.status().message();
  EXPECT_GT(*port, 0);
  EXPECT_FALSE(FindFreePort("not-an-address").ok());
}

TEST(LauncherTest, ArgsWithoutOptionDropsTheFlagAndItsValue) {
  EXPECT_EQ(ArgsWithoutOption({"train", "m.pt", "--nproc", "2", "--steps", "3"}, "--nproc"),
            (std::vector<std::string>{"train", "m.pt", "--steps", "3"}));
  EXPECT_EQ(ArgsWithoutOption({"train", "--nproc=4", "m.pt", "--nprocx", "1"}, "--nproc"),
            (std::vector<std::string>{"train", "m.pt", "--nprocx", "1"}));
}

TEST(RankEnvironmentTest, NoVariablesMeansSingleProcess) {
  StatusOr<RankEnvironment> env = ParseRankEnvironment(nullptr, nullptr, nullptr, nullptr, nullptr);
  ASSERT_TRUE(env.ok());
  EXPECT_FALSE(env->distributed());
  EXPECT_EQ(env->rank, 0u);
  EXPECT_EQ(env->world_size, 1u);
}

TEST(RankEnvironmentTest, ParsesAllVariables) {
  StatusOr<RankEnvironment> env = ParseRankEnvironment("3", "4", "10.0.0.1", "29500", "1");
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_TRUE(env->distributed());
  EXPECT_EQ(env->rank, 3u);
  EXPECT_EQ(env->world_size, 4u);
  EXPECT_EQ(env->local_rank, 1u);
  EXPECT_EQ(env->master_addr, "10.0.0.1");
  EXPECT_EQ(env->master_port, 29500);
}

TEST(RankEnvironmentTest, ErrorsNameTheVariable) {
  auto message = [](StatusOr<RankEnvironment> env) {
    EXPECT_FALSE(env.ok());
    return env.status().message();
  };
  EXPECT_NE(message(ParseRankEnvironment("4", "4", "h", "1", nullptr)).find("RANK='4'"),
            std::string::npos);
  EXPECT_NE(message(ParseRankEnvironment("0", "x", "h", "1", nullptr)).find("WORLD_SIZE='x'"),
            std::string::npos);
  EXPECT_NE(message(ParseRankEnvironment("0", "2", "h", "70000", nullptr)).find("MASTER_PORT"),
            std::string::npos);
  EXPECT_NE(message(ParseRankEnvironment("0", "2", "", "1", nullptr)).find("MASTER_ADDR"),
            std::string::npos);
  std::string partial = message(ParseRankEnvironment("0", "2", nullptr, nullptr, nullptr));
  EXPECT_NE(partial.find("MASTER_ADDR, MASTER_PORT not set"), std::string::npos) << partial;
  EXPECT_NE(message(ParseRankEnvironment("0", "2", "h", "1", "-1")).find("LOCAL_RANK"),
            std::string::npos);
}

}  // namespace
}  // namespace graphdump
