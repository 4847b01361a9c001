#include "graphdump/file_system.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include "testing/fault_file_system.h"
#include "testing/testing.h"

namespace graphdump {
namespace {

using testing::ListFilesRecursive;
using testing::ReadFile;
using testing::TempDir;

mode_t Mode(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

std::vector<std::string> DirEntries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(PosixFileSystemTest, CreateDirectoriesMakesPrivateParents) {
  TempDir dir;
  auto fs = NewPosixFileSystem();
  const std::string deep = dir.Sub("a/b/c");
  ASSERT_TRUE(fs->CreateDirectories(deep).ok());
  EXPECT_EQ(Mode(dir.Sub("a")), 0700u);
  EXPECT_EQ(Mode(deep), 0700u);
  EXPECT_TRUE(fs->CreateDirectories(deep).ok());        // existing is fine
  EXPECT_TRUE(fs->CreateDirectories(deep + "/").ok());  // trailing slash too
  testing::WriteFile(dir.Sub("file"), "x");
  const Status blocked = fs->CreateDirectories(dir.Sub("file/sub"));
  EXPECT_EQ(blocked.code(), StatusCode::kIOError);
  EXPECT_NE(blocked.message().find(dir.Sub("file") + " exists and is not a directory"),
            std::string::npos)
      << blocked.message();
}

TEST(PosixFileSystemTest, FileAppearsOnlyOnCommitReadOnly) {
  TempDir dir;
  auto fs = NewPosixFileSystem();
  const std::string path = dir.Sub("x.npy");
  auto file = fs->NewWritableFile(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_TRUE((*file)->Append("hello ", 6).ok());
  ASSERT_TRUE((*file)->Append("world", 5).ok());
  EXPECT_FALSE(fs->Exists(path));
  const std::vector<std::string> during = DirEntries(dir.path());
  ASSERT_EQ(during.size(), 1u);
  EXPECT_EQ(during[0].rfind(".x.npy.tmp.", 0), 0u) << during[0];
  ASSERT_TRUE((*file)->Commit().ok());
  EXPECT_TRUE(fs->Exists(path));
  EXPECT_EQ(ReadFile(path), "hello world");
  EXPECT_EQ(Mode(path), 0400u);
  EXPECT_EQ(DirEntries(dir.path()), std::vector<std::string>{"x.npy"});
  EXPECT_EQ((*file)->Append("more", 4).code(), StatusCode::kInternal);
}

// A file is created with its final mode (0400) where the umask keeps the owner's read bit, and
// made 0400 at commit where it does not (umask 0477): finished files are 0400 either way. The
// umask is read when the file system is made.
TEST(PosixFileSystemTest, CommittedFilesAreReadOnlyWhateverTheUmask) {
  TempDir dir;
  for (const mode_t mask : {mode_t{022}, mode_t{0477}}) {
    const mode_t old = ::umask(mask);
    auto fs = NewPosixFileSystem();
    const std::string path = dir.Sub("umask" + std::to_string(mask) + ".npy");
    auto file = fs->NewWritableFile(path);
    ::umask(old);
    ASSERT_TRUE(file.ok()) << file.status().message();
    ASSERT_TRUE((*file)->Append("data", 4).ok());
    ASSERT_TRUE((*file)->Commit().ok());
    EXPECT_EQ(Mode(path), 0400u) << "umask " << std::oct << mask;
    EXPECT_EQ(ReadFile(path), "data");
  }
}

// A temporary's name carries the id of the process writing it, a fork's child its own (the id
// is remembered, and forgotten in the child).
TEST(PosixFileSystemTest, TemporaryNamesCarryTheWritersProcessIdAfterAFork) {
  TempDir dir;
  auto fs = NewPosixFileSystem();
  auto temporary_of = [&](const std::string& name) {
    auto file = fs->NewWritableFile(dir.Sub(name));
    std::string found;
    for (const std::string& entry : DirEntries(dir.path())) {
      if (entry.rfind("." + name + ".tmp.", 0) == 0) found = entry;
    }
    return found;
  };
  const std::string parent = temporary_of("parent.npy");
  EXPECT_EQ(parent.rfind(".parent.npy.tmp." + std::to_string(::getpid()) + ".", 0), 0u) << parent;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string name = temporary_of("child.npy");
    const std::string want = ".child.npy.tmp." + std::to_string(::getpid()) + ".";
    ::_exit(name.rfind(want, 0) == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child's temporary does not carry the child's process id";
}

// AppendTwo writes its two pieces in order (one writev), empty ones included, after what was
// appended before; a large second piece (a tensor's data after its header) arrives whole.
TEST(PosixFileSystemTest, AppendTwoWritesBothPiecesInOrder) {
  TempDir dir;
  auto fs = NewPosixFileSystem();
  const std::string path = dir.Sub("two.npy");
  auto file = fs->NewWritableFile(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  ASSERT_TRUE((*file)->Append("<", 1).ok());
  ASSERT_TRUE((*file)->AppendTwo("head:", 5, big.data(), big.size()).ok());
  ASSERT_TRUE((*file)->AppendTwo("", 0, "|", 1).ok());
  ASSERT_TRUE((*file)->AppendTwo(">", 1, nullptr, 0).ok());
  ASSERT_TRUE((*file)->Commit().ok());
  EXPECT_EQ(ReadFile(path), "<head:" + big + "|>");
  EXPECT_EQ(Mode(path), 0400u);
  EXPECT_EQ(DirEntries(dir.path()), std::vector<std::string>{"two.npy"});
}

TEST(PosixFileSystemTest, UncommittedFileLeavesNothing) {
  TempDir dir;
  auto fs = NewPosixFileSystem(/*fsync=*/true);
  {
    auto file = fs->NewWritableFile(dir.Sub("x.npy"));
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->Append("partial", 7).ok());
  }
  EXPECT_TRUE(DirEntries(dir.path()).empty());
}

TEST(PosixFileSystemTest, FsyncCommitWorks) {
  TempDir dir;
  auto fs = NewPosixFileSystem(/*fsync=*/true);
  ASSERT_TRUE(fs->WriteWholeFile(dir.Sub("f"), "data").ok());
  EXPECT_EQ(ReadFile(dir.Sub("f")), "data");
}

TEST(PosixFileSystemTest, StaleTemporaryDoesNotBlockWriting) {
  TempDir dir;
  auto fs = NewPosixFileSystem();  // its first temporary name ends in ".0"
  const std::string stale = dir.Sub(".x.npy.tmp." + std::to_string(::getpid()) + ".0");
  testing::WriteFile(stale, "left by a crash");
  ASSERT_TRUE(fs->WriteWholeFile(dir.Sub("x.npy"), "new").ok());
  EXPECT_EQ(ReadFile(dir.Sub("x.npy")), "new");
  EXPECT_EQ(ReadFile(stale), "left by a crash");
}

TEST(PosixFileSystemTest, LongBasenameKeepsTemporaryNameWithinNameMax) {
  TempDir dir;
  auto fs = NewPosixFileSystem();
  const std::string name = std::string(250, 'k') + ".npy";  // 254 bytes: the limit is 255
  ASSERT_TRUE(fs->WriteWholeFile(dir.Sub(name), "x").ok());
  EXPECT_EQ(ReadFile(dir.Sub(name)), "x");
  const Status too_long = fs->WriteWholeFile(dir.Sub(std::string(256, 'k')), "x");
  EXPECT_EQ(too_long.code(), StatusCode::kIOError);
  EXPECT_NE(too_long.message().find("File name too long"), std::string::npos) << too_long.message();
  EXPECT_EQ(DirEntries(dir.path()), std::vector<std::string>{name});
}

TEST(PosixFileSystemTest, ErrorsNameTheFinalPath) {
  TempDir dir;
  auto fs = NewPosixFileSystem();
  const std::string missing = dir.Sub("no/such/x.npy");
  auto file = fs->NewWritableFile(missing);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kIOError);
  EXPECT_EQ(file.status().message(), "cannot create " + missing + ": No such file or directory");
}

// Runs `fn` with a 1000-byte file size limit, which makes write() fail part way (EFBIG) like a
// disk filling up.
template <typename Fn>
void WithSmallFileSizeLimit(Fn fn) {
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct rlimit limit = old_limit;
  limit.rlim_cur = 1000;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  fn();
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
}

TEST(PosixFileSystemTest, WriteErrorsNameTheFinalPathAndLeaveNothing) {
  TempDir dir;
  auto fs = NewPosixFileSystem();
  const std::string path = dir.Sub("big.npy");
  Status status;
  WithSmallFileSizeLimit([&] {
    auto file = fs->NewWritableFile(path);
    ASSERT_TRUE(file.ok());
    const std::string data(3000, 'x');
    status = (*file)->Append(data.data(), data.size());
  });
  EXPECT_EQ(status.code(), StatusCode::kIOError);
  EXPECT_EQ(status.message(), "cannot write " + path + ": " + std::strerror(EFBIG));
  EXPECT_TRUE(DirEntries(dir.path()).empty());
}

TEST(UserFileTest, WritesThePiecesWholeWithTheUmaskMode) {
  TempDir dir;
  const std::string path = dir.Sub("report.html");
  ASSERT_TRUE(WriteUserFile(path, {"<html>", std::string_view("a\0b", 3), "</html>"}).ok());
  EXPECT_EQ(ReadFile(path), std::string("<html>a\0b</html>", 16));
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(Mode(path), 0666u & ~mask);
  ASSERT_TRUE(WriteUserFile(path, {"second"}).ok());
  EXPECT_EQ(ReadFile(path), "second");
  EXPECT_EQ(DirEntries(dir.path()), std::vector<std::string>{"report.html"});
}

TEST(UserFileTest, AFailedWriteKeepsTheOldFileAndLeavesNoTemporary) {
  TempDir dir;
  const std::string path = dir.Sub("diff.csv");
  ASSERT_TRUE(WriteUserFile(path, {"old"}).ok());
  Status status;
  WithSmallFileSizeLimit([&] { status = WriteUserFile(path, {std::string(3000, 'x')}); });
  EXPECT_EQ(status.message(), "cannot write " + path + ": " + std::strerror(EFBIG));
  EXPECT_EQ(ReadFile(path), "old");
  EXPECT_EQ(DirEntries(dir.path()), std::vector<std::string>{"diff.csv"});
  const Status missing = WriteUserFile(dir.Sub("no/diff.csv"), {"x"});
  EXPECT_EQ(missing.message(),
            "cannot create " + dir.Sub("no/diff.csv") + ": No such file or directory");
}

// compare --out and report -o replaced a FIFO, a symbolic link or (as root) a device node with
// a regular file. They are refused now, left as they were, and no temporary stays.
TEST(UserFileTest, OnlyRegularFilesAreReplaced) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.Sub("fifo").c_str(), 0600), 0);
  testing::WriteFile(dir.Sub("target"), "keep");
  ASSERT_EQ(::symlink(dir.Sub("target").c_str(), dir.Sub("link").c_str()), 0);
  for (const auto& [name, kind] : {std::pair{"fifo", "a FIFO"}, {"link", "a symbolic link"}}) {
    const Status status = WriteUserFile(dir.Sub(name), {"text"});
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), "cannot write " + dir.Sub(name) + ": it is " + kind +
                                    ", not a regular file; graphdump writes only to regular "
                                    "files or new paths (remove it, or name another path)");
  }
  struct stat st;
  ASSERT_EQ(::lstat(dir.Sub("fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(::lstat(dir.Sub("link").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(ReadFile(dir.Sub("target")), "keep");
  EXPECT_EQ(DirEntries(dir.path()), (std::vector<std::string>{"fifo", "link", "target"}));
  const Status device = WriteUserFile("/dev/null", {"text"});
  EXPECT_EQ(device.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(device.message().find("/dev/null: it is a character device"), std::string::npos)
      << device.message();
}

TEST(UserFileTest, OutputPathProblemSaysWhy) {
  TempDir dir;
  EXPECT_EQ(OutputPathProblem(dir.Sub("new.csv")), "");
  ASSERT_TRUE(WriteUserFile(dir.Sub("file"), {"x"}).ok());
  EXPECT_EQ(OutputPathProblem(dir.Sub("file")), "");  // replaced when written
  EXPECT_EQ(OutputPathProblem(dir.path()), dir.path() + " is a directory");
  EXPECT_EQ(OutputPathProblem(dir.Sub("file/x.csv")), dir.Sub("file") + " is not a directory");
  EXPECT_EQ(OutputPathProblem(dir.Sub("no/x.csv")),
            "directory " + dir.Sub("no") + ": No such file or directory");
  EXPECT_EQ(OutputPathProblem(""), "the path is empty");
  // Only regular files and new paths are written: a FIFO, a device or a link is not replaced.
  const std::string rule =
      ", not a regular file; graphdump writes only to regular files or new paths (remove it, or "
      "name another path)";
  ASSERT_EQ(::mkfifo(dir.Sub("fifo").c_str(), 0600), 0);
  ASSERT_EQ(::symlink(dir.Sub("file").c_str(), dir.Sub("link").c_str()), 0);
  EXPECT_EQ(OutputPathProblem(dir.Sub("fifo")), "it is a FIFO" + rule);
  EXPECT_EQ(OutputPathProblem("/dev/null"), "it is a character device" + rule);
  EXPECT_EQ(OutputPathProblem(dir.Sub("link")), "it is a symbolic link" + rule);
  if (::geteuid() != 0) {  // root may write anywhere
    ASSERT_EQ(::mkdir(dir.Sub("ro").c_str(), 0500), 0);
    EXPECT_EQ(OutputPathProblem(dir.Sub("ro/x.csv")),
              "cannot write in directory " + dir.Sub("ro") + ": Permission denied");
    ::chmod(dir.Sub("ro").c_str(), 0700);
  }
}

// Starts a file and a user file in `dir`, writes part of the first, and dies of SIGTERM.
void DieWhileWriting(const std::string& dir, bool remove_on_signals) {
  if (remove_on_signals) RemoveTemporariesOnSignals();
  auto fs = NewPosixFileSystem();
  auto file = fs->NewWritableFile(dir + "/partial.npy");
  if (!file.ok() || !(*file)->Append("abc", 3).ok()) std::exit(1);
  std::raise(SIGTERM);
  std::exit(2);  // not reached
}

// The temporaries a process killed by SIGTERM leaves: none once RemoveTemporariesOnSignals ran.
std::vector<std::string> LeftAfterSigterm(bool remove_on_signals) {
  // The death test's child re-runs the test from the start ("threadsafe" style: a fresh
  // process, no fork of a threaded one); the variable hands it the parent's directory.
  constexpr char kVar[] = "GRAPHDUMP_TEST_SIGNAL_DIR";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const char* inherited = std::getenv(kVar);
  std::optional<TempDir> own;
  if (inherited == nullptr) own.emplace();
  const std::string dir = inherited != nullptr ? inherited : own->path();
  ::setenv(kVar, dir.c_str(), 1);
  EXPECT_EXIT(DieWhileWriting(dir, remove_on_signals), ::testing::KilledBySignal(SIGTERM), "");
  ::unsetenv(kVar);
  return DirEntries(dir);
}

// One death test per test: the child runs the test body up to its death test, so nothing may
// be checked before it.
TEST(PosixFileSystemDeathTest, SigtermWithoutTheHandlerLeavesTheTemporary) {
  const std::vector<std::string> left = LeftAfterSigterm(false);
  ASSERT_EQ(left.size(), 1u);  // what the handler is for, and proof the test can tell
  EXPECT_EQ(left[0].rfind(".partial.npy.tmp.", 0), 0u) << left[0];
}

TEST(PosixFileSystemDeathTest, SigtermWithTheHandlerRemovesTheTemporary) {
  EXPECT_TRUE(LeftAfterSigterm(true).empty());
}

TEST(PosixFileSystemTest, AppendToFileKeepsFileReadOnlyBetweenAppends) {
  TempDir dir;
  auto fs = NewPosixFileSystem();
  const std::string path = dir.Sub("statistic.csv");
  ASSERT_TRUE(fs->AppendToFile(path, "header\n").ok());
  EXPECT_EQ(Mode(path), 0400u);
  ASSERT_TRUE(fs->AppendToFile(path, "row1,\n").ok());
  ASSERT_TRUE(fs->AppendToFile(path, "row2,\n").ok());
  EXPECT_EQ(ReadFile(path), "header\nrow1,\nrow2,\n");
  EXPECT_EQ(Mode(path), 0400u);
  const Status missing = fs->AppendToFile(dir.Sub("none/statistic.csv"), "x");
  EXPECT_EQ(missing.code(), StatusCode::kIOError);
  EXPECT_NE(missing.message().find(dir.Sub("none/statistic.csv")), std::string::npos);
}

// A full disk part way through an append (here: the file size limit, which fails write() the
// same way) left a partial row under the final name; the file is now cut back to what it held.
TEST(PosixFileSystemTest, FailedAppendLeavesTheFileAsItWas) {
  TempDir dir;
  auto fs = NewPosixFileSystem();
  const std::string path = dir.Sub("statistic.csv");
  const std::string header = "Op Type,Op Name\n" + std::string(900, 'h') + "\n";
  ASSERT_TRUE(fs->AppendToFile(path, header).ok());
  Status status, fresh;
  WithSmallFileSizeLimit([&] {
    status = fs->AppendToFile(path, std::string(50, 'r') + ",\n" + std::string(200, 'r') + ",\n");
    fresh = fs->AppendToFile(dir.Sub("new.csv"), std::string(3000, 'n'));
  });
  EXPECT_EQ(status.message(), "cannot write " + path + ": " + std::strerror(EFBIG));
  EXPECT_EQ(ReadFile(path), header);  // no partial row
  EXPECT_EQ(Mode(path), 0400u);
  EXPECT_EQ(fresh.message(), "cannot write " + dir.Sub("new.csv") + ": " + std::strerror(EFBIG));
  EXPECT_EQ(DirEntries(dir.path()), std::vector<std::string>{"statistic.csv"});  // none created
  ASSERT_TRUE(fs->AppendToFile(path, "row,\n").ok());  // and it still takes rows
  EXPECT_EQ(ReadFile(path), header + "row,\n");
}

TEST(PosixFileSystemTest, RemoveAndExists) {
  TempDir dir;
  auto fs = NewPosixFileSystem();
  ASSERT_TRUE(fs->WriteWholeFile(dir.Sub("x"), "1").ok());
  EXPECT_TRUE(fs->Exists(dir.Sub("x")));
  ASSERT_TRUE(fs->Remove(dir.Sub("x")).ok());
  EXPECT_FALSE(fs->Exists(dir.Sub("x")));
  EXPECT_TRUE(fs->Remove(dir.Sub("x")).ok());  // already gone is fine
  ASSERT_EQ(::symlink("/nonexistent", dir.Sub("dangling").c_str()), 0);
  EXPECT_TRUE(fs->Exists(dir.Sub("dangling")));  // a name is taken, even by a broken link
}

// A second name for a committed file is the same file (no bytes written), refuses to replace
// anything, and stays below the root: a link planted under the existing name is linked itself,
// never followed.
TEST(PosixFileSystemTest, LinkOrCopyGivesACommittedFileASecondName) {
  TempDir dir;
  const std::string root = dir.Sub("dump");
  auto fs = NewPosixFileSystem(/*fsync=*/false, root);
  ASSERT_TRUE(fs->CreateDirectories(root + "/a").ok());
  ASSERT_TRUE(fs->CreateDirectories(root + "/b").ok());
  ASSERT_TRUE(fs->WriteWholeFile(root + "/a/x.npy", "bytes").ok());
  ASSERT_TRUE(fs->LinkOrCopy(root + "/a/x.npy", root + "/b/y.npy").ok());
  struct stat x, y;
  ASSERT_EQ(::stat((root + "/a/x.npy").c_str(), &x), 0);
  ASSERT_EQ(::stat((root + "/b/y.npy").c_str(), &y), 0);
  EXPECT_EQ(x.st_ino, y.st_ino);
  EXPECT_EQ(y.st_nlink, 2u);
  EXPECT_EQ(Mode(root + "/b/y.npy"), 0400u);
  EXPECT_EQ(ReadFile(root + "/b/y.npy"), "bytes");

  const Status again = fs->LinkOrCopy(root + "/a/x.npy", root + "/b/y.npy");
  EXPECT_EQ(again.message(), "cannot create " + root + "/b/y.npy: File exists");
  EXPECT_EQ(fs->LinkOrCopy(root + "/a/x.npy", dir.Sub("outside.npy")).code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("outside.npy")));

  testing::WriteFile(dir.Sub("victim"), "precious\n");
  ASSERT_EQ(::symlink(dir.Sub("victim").c_str(), (root + "/a/planted.npy").c_str()), 0);
  ASSERT_TRUE(fs->LinkOrCopy(root + "/a/planted.npy", root + "/b/z.npy").ok());
  struct stat z;
  ASSERT_EQ(::lstat((root + "/b/z.npy").c_str(), &z), 0);
  EXPECT_TRUE(S_ISLNK(z.st_mode));
  EXPECT_EQ(ReadFile(dir.Sub("victim")), "precious\n");
}

// Directories are kept open between files. One that another program removes, and perhaps makes
// again, is not written into: creating there fails, and the directory under the name now is
// opened and written into, or the error names the file.
TEST(PosixFileSystemTest, ADirectoryRemovedSinceIsOpenedAgain) {
  TempDir dir;
  const std::string root = dir.Sub("dump");
  auto fs = NewPosixFileSystem(/*fsync=*/false, root);
  ASSERT_TRUE(fs->CreateDirectories(root + "/it/2").ok());
  ASSERT_TRUE(fs->WriteWholeFile(root + "/it/2/a.npy", "a").ok());
  ASSERT_TRUE(fs->LinkOrCopy(root + "/it/2/a.npy", root + "/it/2/a2.npy").ok());

  std::filesystem::remove_all(root + "/it");
  std::filesystem::create_directories(root + "/it/2");
  ASSERT_TRUE(fs->WriteWholeFile(root + "/it/2/b.npy", "b").ok());
  EXPECT_EQ(ReadFile(root + "/it/2/b.npy"), "b");
  std::filesystem::remove_all(root + "/it/2");
  std::filesystem::create_directories(root + "/it/2");
  testing::WriteFile(root + "/it/2/c.npy", "c");
  ASSERT_TRUE(fs->LinkOrCopy(root + "/it/2/c.npy", root + "/it/2/c2.npy").ok());
  EXPECT_EQ(ReadFile(root + "/it/2/c2.npy"), "c");
  EXPECT_EQ(DirEntries(root + "/it/2"), (std::vector<std::string>{"c.npy", "c2.npy"}));

  std::filesystem::remove_all(root + "/it");
  const Status gone = fs->WriteWholeFile(root + "/it/2/d.npy", "d");
  EXPECT_EQ(gone.message(), "cannot create " + root + "/it/2/d.npy: No such file or directory");
  const Status unlinked = fs->LinkOrCopy(root + "/it/2/c.npy", root + "/it/2/e.npy");
  EXPECT_NE(unlinked.message().find("No such file or directory"), std::string::npos)
      << unlinked.message();
  EXPECT_EQ(DirEntries(root), std::vector<std::string>{});
}

// Symbolic links planted in the dump directory were followed: a statistic.csv link had rows
// appended to (and chmod 0400 applied to) the file it pointed at; a rank_0 link sent the whole
// dump elsewhere. Nothing is written through them now, and the errors name them.
TEST(PosixFileSystemTest, ConfinedToItsRootWithoutFollowingLinks) {
  TempDir dir;
  const std::string root = dir.Sub("dump");
  const std::string outside = dir.Sub("outside");
  ASSERT_EQ(::mkdir(outside.c_str(), 0700), 0);
  testing::WriteFile(outside + "/victim.csv", "precious\n");
  ASSERT_EQ(::chmod((outside + "/victim.csv").c_str(), 0644), 0);
  auto fs = NewPosixFileSystem(/*fsync=*/false, root);
  ASSERT_TRUE(fs->CreateDirectories(root + "/rank_0/Net/0/0").ok());
  EXPECT_EQ(Mode(root), 0700u);
  const std::string csv = root + "/rank_0/Net/0/0/statistic.csv";
  ASSERT_EQ(::symlink((outside + "/victim.csv").c_str(), csv.c_str()), 0);
  const Status append = fs->AppendToFile(csv, "row,\n");
  EXPECT_EQ(append.message(), "cannot open " + csv +
                                  ": it is a symbolic link, and graphdump does not write through "
                                  "links (remove it)");
  // A whole-file write neither writes through the link nor replaces it.
  const Status whole = fs->WriteWholeFile(csv, "header\n");
  EXPECT_EQ(whole.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(whole.message(), "cannot write " + csv +
                                 ": it is a symbolic link, not a regular file; graphdump writes "
                                 "only to regular files or new paths (remove it, or name another "
                                 "path)");
  EXPECT_EQ(DirEntries(root + "/rank_0/Net/0/0"), std::vector<std::string>{"statistic.csv"});
  EXPECT_EQ(ReadFile(outside + "/victim.csv"), "precious\n");
  EXPECT_EQ(Mode(outside + "/victim.csv"), 0644u);

  ASSERT_EQ(::symlink(outside.c_str(), (root + "/rank_1").c_str()), 0);
  for (const Status& status : {fs->CreateDirectories(root + "/rank_1/Net/0/0"),
                               fs->NewWritableFile(root + "/rank_1/x.npy").status(),
                               fs->AppendToFile(root + "/rank_1/execution_order.csv", "0\n"),
                               fs->Remove(root + "/rank_1/victim.csv")}) {
    EXPECT_EQ(status.code(), StatusCode::kIOError);
    EXPECT_NE(status.message().find(": " + root +
                                    "/rank_1 is a symbolic link, and graphdump "
                                    "does not follow links below " +
                                    root + " (remove it)"),
              std::string::npos)
        << status.message();
  }
  EXPECT_FALSE(fs->Exists(root + "/rank_1/victim.csv"));
  EXPECT_EQ(DirEntries(outside), std::vector<std::string>{"victim.csv"});
  EXPECT_EQ(ReadFile(outside + "/victim.csv"), "precious\n");

  const Status elsewhere = fs->WriteWholeFile(outside + "/new", "x");
  EXPECT_EQ(elsewhere.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(elsewhere.message(), "cannot create " + outside + "/new: it is outside " + root +
                                     ", the directory being written");
  EXPECT_EQ(fs->CreateDirectories(root + "/../x").code(), StatusCode::kInvalidArgument);
}

// The root may be reached through links (the user named the path) but must itself be a real
// directory: a dump path that is a link to elsewhere is refused.
TEST(PosixFileSystemTest, RootThatIsALinkIsRefused) {
  TempDir dir;
  ASSERT_EQ(::mkdir(dir.Sub("real").c_str(), 0700), 0);
  ASSERT_EQ(::symlink(dir.Sub("real").c_str(), dir.Sub("link").c_str()), 0);
  auto through_parent = NewPosixFileSystem(false, dir.Sub("link") + "/dump");
  ASSERT_TRUE(through_parent->CreateDirectories(dir.Sub("link/dump/rank_0")).ok());
  EXPECT_TRUE(std::filesystem::is_directory(dir.Sub("real/dump/rank_0")));
  auto linked = NewPosixFileSystem(false, dir.Sub("link"));
  const Status refused = linked->CreateDirectories(dir.Sub("link/rank_0"));
  EXPECT_EQ(refused.message(), "cannot create directory " + dir.Sub("link/rank_0") + ": " +
                                   dir.Sub("link") +
                                   " is a symbolic link; graphdump writes only into a real "
                                   "directory (name the directory the link points to)");
  testing::WriteFile(dir.Sub("file"), "x");
  auto file_root = NewPosixFileSystem(false, dir.Sub("file"));
  EXPECT_NE(file_root->CreateDirectories(dir.Sub("file/a"))
                .message()
                .find(dir.Sub("file") + " exists and is not a directory"),
            std::string::npos);
}

// A FIFO (or a device) where a file is expected blocked readers forever; /dev/zero grew memory
// without bound. Only regular files are opened, without blocking.
TEST(RegularFileTest, OnlyRegularFilesAreReadAndNothingBlocks) {
  TempDir dir;
  testing::WriteFile(dir.Sub("text"), "hello");
  StatusOr<std::string> text = ReadRegularFile(dir.Sub("text"));
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "hello");
  ASSERT_EQ(::mkfifo(dir.Sub("fifo").c_str(), 0600), 0);
  StatusOr<std::string> fifo = ReadRegularFile(dir.Sub("fifo"));
  EXPECT_EQ(fifo.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fifo.status().message(),
            dir.Sub("fifo") + ": cannot read it: it is a FIFO, not a regular file");
  EXPECT_EQ(ReadRegularFile("/dev/zero").status().message(),
            "/dev/zero: cannot read it: it is a character device, not a regular file");
  EXPECT_EQ(ReadRegularFile(dir.path()).status().message(),
            dir.path() + ": cannot read it: it is a directory, not a regular file");
  StatusOr<std::string> missing = ReadRegularFile(dir.Sub("none"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            dir.Sub("none") + ": cannot open: No such file or directory");
  StatusOr<ReadableFile> file = OpenRegularFile(dir.Sub("text"));
  ASSERT_TRUE(file.ok());
  std::string part;
  EXPECT_TRUE(file->Read(1, 3, &part).ok());
  EXPECT_EQ(part, "ell");
  EXPECT_EQ(file->Read(3, 5, &part).code(), StatusCode::kIOError);  // beyond the end
}

TEST(PosixFileSystemTest, WriteWholeFileReplacesReadOnlyFile) {
  TempDir dir;
  auto fs = NewPosixFileSystem();
  const std::string path = dir.Sub("config.json");
  ASSERT_TRUE(fs->WriteWholeFile(path, "first").ok());
  ASSERT_TRUE(fs->WriteWholeFile(path, "second").ok());
  EXPECT_EQ(ReadFile(path), "second");
  EXPECT_EQ(Mode(path), 0400u);
  EXPECT_EQ(ListFilesRecursive(dir.path()), std::vector<std::string>{"config.json"});
}

TEST(FaultFileSystemTest, InjectedFailures) {
  TempDir dir;
  auto fault = std::make_shared<testing::FaultFileSystem>(NewPosixFileSystem());
  ASSERT_TRUE(fault->WriteWholeFile(dir.Sub("kept"), "12345").ok());
  fault->FailPathsContaining("bad");
  const Status bad = fault->WriteWholeFile(dir.Sub("bad.npy"), "x");
  EXPECT_EQ(bad.code(), StatusCode::kIOError);
  EXPECT_NE(bad.message().find("No space left on device"), std::string::npos);
  EXPECT_FALSE(fault->AppendToFile(dir.Sub("bad.csv"), "x").ok());
  fault->FailAfterBytes(10);  // 5 used: 5 more fit
  ASSERT_TRUE(fault->AppendToFile(dir.Sub("log"), "ab").ok());
  const Status full = fault->AppendToFile(dir.Sub("log"), "cdef");
  EXPECT_EQ(full.message(), testing::NoSpaceMessage(dir.Sub("log")));
  EXPECT_EQ(ReadFile(dir.Sub("log")), "ab");  // all or nothing, as AppendToFile promises
  EXPECT_FALSE(fault->WriteWholeFile(dir.Sub("late"), "x").ok());
  EXPECT_EQ(ListFilesRecursive(dir.path()), (std::vector<std::string>{"kept", "log"}));
  EXPECT_EQ(ReadFile(dir.Sub("kept")), "12345");
}

}  // namespace
}  // namespace graphdump
