#include "graphdump/internal/posix_files.h"

#include <gtest/gtest.h>

#include <string>

namespace graphdump::internal {
namespace {

// A path's pieces on either side of its last '/', for the paths the dump writes (a long kernel
// name after the last '/') and the edge cases: no '/', the root's, a trailing one, nothing.
TEST(PosixFilesTest, PathPieces) {
  const std::string file = "/dump/rank_0/Net/0/2/MatMul.Default_net-Net_MatMul-op3.0.0.1.input.0."
                           "DefaultFormat.float32.npy";
  EXPECT_EQ(DirNameView(file), "/dump/rank_0/Net/0/2");
  EXPECT_EQ(DirName(file), "/dump/rank_0/Net/0/2");
  EXPECT_EQ(BaseName(file),
            "MatMul.Default_net-Net_MatMul-op3.0.0.1.input.0.DefaultFormat.float32.npy");
  EXPECT_EQ(DirNameView("name.npy"), ".");
  EXPECT_EQ(BaseName("name.npy"), "name.npy");
  EXPECT_EQ(DirNameView("/name.npy"), "/");
  EXPECT_EQ(BaseName("/name.npy"), "name.npy");
  EXPECT_EQ(DirNameView("a/b/"), "a/b");
  EXPECT_EQ(BaseName("a/b/"), "");
  EXPECT_EQ(DirNameView(""), ".");
  EXPECT_EQ(BaseName(""), "");
}

}  // namespace
}  // namespace graphdump::internal
