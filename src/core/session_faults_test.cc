// The session when things go wrong: a full disk, a byte budget spent, a live or planted lock,
// planted links, a run that ends without closing.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "graphdump/session.h"
#include "session_test_util.h"
#include "testing/fault_file_system.h"

namespace graphdump {
namespace {

using testing::ListFilesRecursive;
using testing::ReadFile;
using testing::TempDir;

// Every .npy under a final name loads with NumPy and holds as many bytes as its header says.
void ExpectEveryNpyComplete(const std::string& dir) {
  auto r = testing::RunPython(R"(
import glob, os, sys, numpy as np
n = 0
for f in glob.glob(sys.argv[1] + '/**/*.npy', recursive=True):
    a = np.load(f)
    n += 1
temps = [f for f in glob.glob(sys.argv[1] + '/**/.*', recursive=True) if '.tmp' in f]
print(n > 0, temps)
)",
                              {dir});
  EXPECT_EQ(r.output, "True []\n") << r.output;
}

class DiskFullTest : public ::testing::TestWithParam<bool> {};

TEST_P(DiskFullTest, StopsDumpingKeepsFilesAndLetsTheRunContinue) {
  const bool async = GetParam();
  TempDir dir;
  auto fault = std::make_shared<testing::FaultFileSystem>(NewPosixFileSystem());
  fault->FailOnFile(40);  // the 40th file of the dump cannot be created
  std::vector<std::string> log;
  SessionOptions options;
  options.config =
      Parse(ConfigJson(dir.path(), "", async ? R"({"enable": false})" : R"({"enable": true})"));
  options.file_system = fault;
  options.log = [&](const std::string& m) { log.push_back(m); };
  auto session = DumpSession::Open(options);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE(RunSyntheticGraph(**session, {}).ok());  // the run itself goes on
  Status closed = (*session)->Close();
  EXPECT_EQ(closed.code(), StatusCode::kIOError);
  EXPECT_NE(closed.message().find("No space left on device"), std::string::npos)
      << closed.message();
  EXPECT_NE(closed.message().find(dir.path() + "/rank_0/Net/0/"), std::string::npos)
      << closed.message();
  ASSERT_EQ(log.size(), 1u);  // one message, not one per tensor
  EXPECT_NE(log[0].find("dumping stopped"), std::string::npos);
  const std::string incomplete = ReadFile(dir.Sub("rank_0/.dump_metadata/INCOMPLETE"));
  EXPECT_NE(incomplete.find(closed.message()), std::string::npos) << incomplete;
  // Everything before the failure is there (the 39 files created before it), nothing after.
  auto npy = Matching(ListFilesRecursive(dir.path()), R"(\.npy$)");
  EXPECT_GE(npy.size(), 30u);
  EXPECT_LT(npy.size(), 40u);
  ExpectEveryNpyComplete(dir.path());
}

TEST_P(DiskFullTest, ByteBudgetExhaustedMidFile) {
  TempDir dir;
  auto fault = std::make_shared<testing::FaultFileSystem>(NewPosixFileSystem());
  fault->FailAfterBytes(6000);  // runs out in the middle of a tensor file
  SessionOptions options;
  options.config = Parse(
      ConfigJson(dir.path(), "", GetParam() ? R"({"enable": false})" : R"({"enable": true})"));
  options.file_system = fault;
  options.log = [](const std::string&) {};
  auto session = DumpSession::Open(options);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE(RunSyntheticGraph(**session, {}).ok());
  EXPECT_EQ((*session)->Close().code(), StatusCode::kIOError);
  ExpectEveryNpyComplete(dir.path());
}

// The rows of statistic.csv under `dir`: every line ends with a comma (docs/file-format.md) and has
// the header's number of fields plus the trailing empty one, so a torn row is caught.
void ExpectWholeStatisticRows(const std::string& dir) {
  for (const std::string& file : Matching(ListFilesRecursive(dir), R"(statistic\.csv$)")) {
    const std::string csv = ReadFile(dir + "/" + file);
    ASSERT_FALSE(csv.empty()) << file;
    EXPECT_EQ(csv.back(), '\n') << file;
    const size_t header_end = csv.find('\n');
    const auto fields = [](const std::string& line) {  // a quoted Shape holds commas
      const std::string unquoted = std::regex_replace(line, std::regex(R"("[^"]*")"), "S");
      return std::count(unquoted.begin(), unquoted.end(), ',') + 1;
    };
    const std::string header = csv.substr(0, header_end);
    size_t start = header_end + 1;
    while (start < csv.size()) {
      const size_t end = csv.find('\n', start);
      const std::string row = csv.substr(start, end - start);
      EXPECT_EQ(fields(row), fields(header) + 1) << file << ": " << row;
      EXPECT_EQ(row.back(), ',') << file << ": " << row;
      start = end + 1;
    }
  }
}

// --overwrite while another run wrote the same directory: "cannot remove .../rank_0: No such
// file or directory", and one run's dump left half deleted. A live run's directory is refused
// now (its files, INCOMPLETE included, untouched); once that run ends, overwrite replaces it in
// one step, and neither the lock file nor the replaced directory stays.
TEST(SessionTest, OverwriteNeverTakesALiveRunsDirectory) {
  TempDir dir;
  const DumpConfig config = Parse(ConfigJson(dir.path()));
  auto first = OpenSession(config);
  ASSERT_TRUE(RunSyntheticGraph(*first, {}).ok());
  const std::vector<std::string> written = ListFilesRecursive(dir.Sub("rank_0"));
  EXPECT_EQ(ReadFile(dir.Sub(".rank_0.lock")), "process " + std::to_string(::getpid()) + "\n");
  for (bool overwrite : {true, false}) {
    SessionOptions options;
    options.config = config;
    options.overwrite = overwrite;
    StatusOr<std::unique_ptr<DumpSession>> second = DumpSession::Open(options);
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(second.status().message(),
              dir.Sub("rank_0") + " is being written by another run now (process " +
                  std::to_string(::getpid()) +
                  "): graphdump writes one run per directory and replaces no dump that a live "
                  "run holds, --overwrite or not; wait for that run to end, or dump elsewhere "
                  "(docs/layout.md)");
    EXPECT_EQ(ListFilesRecursive(dir.Sub("rank_0")), written);
  }
  ASSERT_TRUE(first->Close().ok());
  EXPECT_EQ(::access(dir.Sub(".rank_0.lock").c_str(), F_OK), -1);  // removed by the close

  SessionOptions options;
  options.config = config;
  options.overwrite = true;
  StatusOr<std::unique_ptr<DumpSession>> third = DumpSession::Open(options);
  ASSERT_TRUE(third.ok()) << third.status().message();
  SyntheticOptions one_step;
  one_step.steps = 1;
  ASSERT_TRUE(RunSyntheticGraph(**third, one_step).ok());
  ASSERT_TRUE((*third)->Close().ok());
  const std::vector<std::string> after = ListFilesRecursive(dir.path());
  EXPECT_FALSE(after.empty());
  for (const std::string& file : after) {
    EXPECT_EQ(file.rfind("rank_0/", 0), 0u) << file;  // no lock, no replaced directory
    EXPECT_EQ(file.find("Net/0/1/"), std::string::npos) << file;  // the first run's step 1
  }
}

// A .rank_0.lock that is not a regular file (a FIFO, a directory, a symbolic link planted
// there) beside an earlier complete dump: the run is refused as a usage error naming it, and
// the earlier dump is left untouched (no INCOMPLETE "never started" written into it). A live
// holder's recorded text is shown escaped (no terminal escape codes).
TEST(SessionTest, APlantedLockThatIsNoFileIsRefusedTouchingNothing) {
  TempDir dir;
  const DumpConfig config = Parse(ConfigJson(dir.path()));
  {
    auto first = OpenSession(config);
    ASSERT_TRUE(RunSyntheticGraph(*first, {}).ok());
    ASSERT_TRUE(first->Close().ok());
  }
  const std::vector<std::string> written = ListFilesRecursive(dir.Sub("rank_0"));
  const std::string lock = dir.Sub(".rank_0.lock");
  const std::string outside = dir.Sub("outside");
  const std::vector<std::pair<std::string, std::function<void()>>> plants = {
      {"a FIFO", [&] { ASSERT_EQ(::mkfifo(lock.c_str(), 0600), 0); }},
      {"a directory", [&] { ASSERT_EQ(::mkdir(lock.c_str(), 0700), 0); }},
      {"a symbolic link", [&] { ASSERT_EQ(::symlink(outside.c_str(), lock.c_str()), 0); }}};
  for (const auto& [kind, plant] : plants) {
    plant();
    for (bool overwrite : {false, true}) {
      SessionOptions options;
      options.config = config;
      options.overwrite = overwrite;
      StatusOr<std::unique_ptr<DumpSession>> second = DumpSession::Open(options);
      ASSERT_FALSE(second.ok()) << kind;
      EXPECT_EQ(second.status().code(), StatusCode::kInvalidArgument) << kind;
      EXPECT_NE(second.status().message().find(lock), std::string::npos)
          << kind << ": " << second.status().message();
      EXPECT_EQ(ListFilesRecursive(dir.Sub("rank_0")), written) << kind;
      EXPECT_EQ(::access(outside.c_str(), F_OK), -1) << kind;
    }
    ASSERT_EQ(::rmdir(lock.c_str()) == 0 || ::unlink(lock.c_str()) == 0, true) << kind;
  }
}

// The holder's text recorded in a live run's lock is printed escaped.
TEST(SessionTest, ALockHoldersTextIsEscaped) {
  TempDir dir;
  const DumpConfig config = Parse(ConfigJson(dir.path()));
  auto first = OpenSession(config);
  {
    FILE* f = std::fopen(dir.Sub(".rank_0.lock").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("\x1b]0;owned\x07\x1b[31mred", f);
    std::fclose(f);
  }
  SessionOptions options;
  options.config = config;
  StatusOr<std::unique_ptr<DumpSession>> second = DumpSession::Open(options);
  ASSERT_FALSE(second.ok());
  const std::string message = second.status().message();
  EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
  EXPECT_EQ(message.find('\x07'), std::string::npos) << message;
  EXPECT_NE(message.find("\\x1b]0;owned\\x07\\x1b[31mred"), std::string::npos) << message;
  ASSERT_TRUE(first->Close().ok());
}

// The INCOMPLETE marker is written when the dump starts and removed by a clean close, so that
// a run stopped in any way (killed, a full disk) leaves it.
TEST(SessionTest, IncompleteMarkerLivesUntilACleanClose) {
  TempDir dir;
  auto session = OpenSession(Parse(ConfigJson(dir.path())));
  const std::string marker = dir.Sub("rank_0/.dump_metadata/INCOMPLETE");
  EXPECT_NE(ReadFile(marker).find("This dump is incomplete"), std::string::npos);
  ASSERT_TRUE(RunSyntheticGraph(*session, {}).ok());
  ASSERT_TRUE(session->Close().ok());
  EXPECT_EQ(::access(marker.c_str(), F_OK), -1);
}

// A statistic dump on a full disk: statistic.csv could not be written, and INCOMPLETE, written
// afterwards, was missing in 17 of 19 runs (no room for a new file), the rows torn in 11 of 21.
TEST_P(DiskFullTest, StatisticCsvFailureIsMarkedAndLeavesNoTornRows) {
  TempDir dir;
  auto fault = std::make_shared<testing::FaultFileSystem>(NewPosixFileSystem());
  fault->FailPathsContaining("/1/statistic.csv");  // iteration 1's table cannot be written
  std::vector<std::string> log;
  SessionOptions options;
  options.config = Parse(ConfigJson(dir.path(), R"(, "saved_data": "statistic")",
                                    GetParam() ? R"({"enable": false})" : R"({"enable": true})"));
  options.file_system = fault;
  options.log = [&](const std::string& m) { log.push_back(m); };
  auto session = DumpSession::Open(options);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE(RunSyntheticGraph(**session, {}).ok());
  Status closed = (*session)->Close();
  const std::string failed = dir.Sub("rank_0/Net/0/1/statistic.csv");
  const std::string message = "cannot create " + failed + ": No space left on device";
  EXPECT_EQ(closed.message(), message);
  ASSERT_EQ(log.size(), 1u);
  const std::string incomplete = ReadFile(dir.Sub("rank_0/.dump_metadata/INCOMPLETE"));
  EXPECT_NE(incomplete.find("error: " + message), std::string::npos) << incomplete;
  EXPECT_NE(incomplete.find("stopped dumping (the run was at iteration"), std::string::npos) << incomplete;
  EXPECT_EQ(Matching(ListFilesRecursive(dir.path()), R"(statistic\.csv$)"),
            std::vector<std::string>{"rank_0/Net/0/0/statistic.csv"});
  ExpectWholeStatisticRows(dir.path());
}

// The rows of tensors written before an error are flushed after it (they were dropped).
TEST_P(DiskFullTest, RowsOfTensorsWrittenBeforeTheErrorAreKept) {
  TempDir dir;
  auto fault = std::make_shared<testing::FaultFileSystem>(NewPosixFileSystem());
  fault->FailOnFile(12);  // a tensor file in the middle of iteration 0
  SessionOptions options;
  options.config = Parse(ConfigJson(dir.path(), R"(, "saved_data": "full")",
                                    GetParam() ? R"({"enable": false})" : R"({"enable": true})"));
  options.file_system = fault;
  options.writer_threads = 1;
  options.log = [](const std::string&) {};
  auto session = DumpSession::Open(options);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE(RunSyntheticGraph(**session, {}).ok());
  EXPECT_EQ((*session)->Close().code(), StatusCode::kIOError);
  const std::vector<std::string> files = ListFilesRecursive(dir.Sub("rank_0/Net/0/0"));
  const std::vector<std::string> npy = Matching(files, R"(\.npy$)");
  ASSERT_FALSE(npy.empty());
  ASSERT_EQ(Matching(files, "statistic.csv").size(), 1u);
  const std::string csv = ReadFile(dir.Sub("rank_0/Net/0/0/statistic.csv"));
  EXPECT_EQ(static_cast<size_t>(std::count(csv.begin(), csv.end(), '\n')), npy.size() + 1)
      << csv;  // the header and one row per tensor file written
  ExpectWholeStatisticRows(dir.path());
}

INSTANTIATE_TEST_SUITE_P(SyncAndAsync, DiskFullTest, ::testing::Bool());

// A symbolic link planted in the dump path is not followed: rank_0 pointing elsewhere stopped
// nothing, and the whole dump went there.
TEST(SessionTest, PlantedLinksAreNotFollowed) {
  TempDir dir;
  const std::string outside = dir.Sub("outside");
  ASSERT_EQ(::mkdir(outside.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(dir.Sub("dump").c_str(), 0700), 0);
  ASSERT_EQ(::symlink(outside.c_str(), dir.Sub("dump/rank_0").c_str()), 0);
  SessionOptions options;
  options.config = Parse(ConfigJson(dir.Sub("dump")));
  options.log = [](const std::string&) {};
  StatusOr<std::unique_ptr<DumpSession>> session = DumpSession::Open(options);
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find(dir.Sub("dump/rank_0") + " is a symbolic link"),
            std::string::npos)
      << session.status().message();
  EXPECT_TRUE(ListFilesRecursive(outside).empty());

  // A statistic.csv link inside an iteration directory: the rows do not reach its target.
  TempDir second;
  testing::WriteFile(second.Sub("victim"), "keep\n");
  ASSERT_EQ(::chmod(second.Sub("victim").c_str(), 0644), 0);
  options.config = Parse(ConfigJson(second.Sub("dump"), R"(, "saved_data": "statistic")"));
  auto open = DumpSession::Open(options);
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(::mkdir(second.Sub("dump/rank_0/Net").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(second.Sub("dump/rank_0/Net/0").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(second.Sub("dump/rank_0/Net/0/0").c_str(), 0700), 0);
  ASSERT_EQ(::symlink(second.Sub("victim").c_str(),
                      second.Sub("dump/rank_0/Net/0/0/statistic.csv").c_str()),
            0);
  ASSERT_TRUE(RunSyntheticGraph(**open, {}).ok());
  (void)(*open)->Close();
  EXPECT_EQ(ReadFile(second.Sub("victim")), "keep\n");
  struct stat st;
  ASSERT_EQ(::stat(second.Sub("victim").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

}  // namespace
}  // namespace graphdump
