#include "graphdump/internal/source_lines.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "testing/testing.h"

namespace graphdump {
namespace {

using testing::TempDir;
using testing::WriteFile;

TEST(SourceLinesTest, ReadsLinesAsPythonDoes) {
  TempDir dir;
  WriteFile(dir.Sub("a.py"), "\xEF\xBB\xBFimport torch\r\nx = 1\ry = 2\n\n    z = 3");
  SourceLines lines;
  EXPECT_EQ(lines.Line(dir.Sub("a.py"), 1), "import torch");  // the byte order mark dropped
  EXPECT_EQ(lines.Line(dir.Sub("a.py"), 2), "x = 1");
  EXPECT_EQ(lines.Line(dir.Sub("a.py"), 3), "y = 2");
  EXPECT_EQ(lines.Line(dir.Sub("a.py"), 4), "");
  EXPECT_EQ(lines.Line(dir.Sub("a.py"), 5), "    z = 3");  // the last line, with no end
  EXPECT_EQ(lines.Line(dir.Sub("a.py"), 6), "");            // past the end, as linecache
  EXPECT_EQ(lines.Line(dir.Sub("a.py"), 0), "");
}

TEST(SourceLinesTest, ReadsFilesWithoutCarriageReturns) {
  TempDir dir;
  WriteFile(dir.Sub("unix.py"), "\n\ndef f():\n    return 1\n\nx = f()");
  WriteFile(dir.Sub("ends.py"), "a = 1\n");
  SourceLines lines;
  EXPECT_EQ(lines.Line(dir.Sub("unix.py"), 1), "");
  EXPECT_EQ(lines.Line(dir.Sub("unix.py"), 3), "def f():");
  EXPECT_EQ(lines.Line(dir.Sub("unix.py"), 4), "    return 1");
  EXPECT_EQ(lines.Line(dir.Sub("unix.py"), 5), "");
  EXPECT_EQ(lines.Line(dir.Sub("unix.py"), 6), "x = f()");  // the last line, with no end
  EXPECT_EQ(lines.Line(dir.Sub("unix.py"), 7), "");
  EXPECT_EQ(lines.Line(dir.Sub("ends.py"), 1), "a = 1");
  EXPECT_EQ(lines.Line(dir.Sub("ends.py"), 2), "");
}

TEST(SourceLinesTest, KeepsWhatItRead) {
  TempDir dir;
  WriteFile(dir.Sub("b.py"), "first\nsecond\n");
  SourceLines lines;
  EXPECT_EQ(lines.Line(dir.Sub("b.py"), 2), "second");
  WriteFile(dir.Sub("b.py"), "changed\n");
  EXPECT_EQ(lines.Line(dir.Sub("b.py"), 2), "second");
}

TEST(SourceLinesTest, LeavesToPythonWhatItCannotRead) {
  TempDir dir;
  SourceLines lines;
  EXPECT_EQ(lines.Line(dir.Sub("missing.py"), 1), std::nullopt);
  EXPECT_EQ(lines.Line(dir.path(), 1), std::nullopt);  // a directory
  ASSERT_EQ(::mkfifo(dir.Sub("fifo.py").c_str(), 0600), 0);
  EXPECT_EQ(lines.Line(dir.Sub("fifo.py"), 1), std::nullopt);  // not waited on
  EXPECT_EQ(lines.Line("<stdin>", 1), std::nullopt);
  WriteFile(dir.Sub("latin.py"), "#!/usr/bin/env python\n# -*- coding: latin-1 -*-\ns = 'caf\xe9'\n");
  EXPECT_EQ(lines.Line(dir.Sub("latin.py"), 3), std::nullopt);
  WriteFile(dir.Sub("late.py"), "x = 1\ny = 2\n# coding: latin-1\n");  // not a declaration
  EXPECT_EQ(lines.Line(dir.Sub("late.py"), 3), "# coding: latin-1");
  WriteFile(dir.Sub("utf8.py"), "# vim: set fileencoding=UTF_8 :\ns = 'caf\xc3\xa9'\n");
  EXPECT_EQ(lines.Line(dir.Sub("utf8.py"), 2), "s = 'caf\xc3\xa9'");
}

}  // namespace
}  // namespace graphdump
