// Round trip: files written by WriteAscendDumpFile (file_format "bin"), converted by
// ConvertAscendDumps, equal the .npy the core's npy encoder makes of the same tensors.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "graphdump/analysis/ascend_convert.h"
#include "graphdump/analysis/ascend_index.h"
#include "graphdump/internal/ascend_writer.h"
#include "graphdump/internal/tensor_writer.h"
#include "testing/testing.h"

namespace graphdump {
namespace {

// What the core's tensor writer (used for file_format "npy") makes of `view`.
std::string ExpectedNpy(const TensorView& view, const std::string& path) {
  auto fs = NewPosixFileSystem();
  StatusOr<TensorWriteResult> written = WriteTensor(*fs, path, view, TensorWriteOptions{});
  EXPECT_TRUE(written.ok()) << written.status().message();
  return testing::ReadFile(path);
}

using testing::MakeView;

// `convert -f NCHW FILE -o OUT`.
AscendConvertSummary ConvertToNchw(const std::string& file, const std::string& out) {
  AscendConvertOptions options;
  options.output_dir = out;
  options.target_format = "NCHW";
  return ConvertAscendDumps({{file, "", ""}}, options);
}

TEST(AscendRoundTrip, ConvertOfBinFilesEqualsNpy) {
  testing::TempDir dir;
  std::vector<float> f32(2 * 3 * 4 * 5);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = 0.25f * static_cast<float>(i) - 7.f;
  std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x3555};
  std::vector<uint16_t> bf16 = {0x3f80, 0xc040, 0x7f7f};
  std::vector<int64_t> i64 = {-5};
  // A transposed (non-contiguous) 3x2 view of a 2x3 int32 matrix.
  std::vector<int32_t> i32 = {1, 2, 3, 4, 5, 6};

  std::vector<TensorView> inputs(3), outputs(2);
  inputs[0] = MakeView(DType::kFloat32, {2, 3, 4, 5}, {}, f32.data());
  inputs[1] = MakeView(DType::kFloat16, {2, 3}, {}, f16.data());
  inputs[2] = MakeView(DType::kInt32, {3, 2}, {1, 3}, i32.data());
  outputs[0] = MakeView(DType::kBFloat16, {3}, {}, bf16.data());
  outputs[1] = MakeView(DType::kInt64, {}, {}, i64.data());

  auto fs = NewPosixFileSystem();
  const std::string name = "Conv2D.Default_net_Conv2D-op1.0.0.1700000000000001";
  StatusOr<uint64_t> written = WriteAscendDumpFile(*fs, dir.Sub(name), "Default/net/Conv2D-op1",
                                                   1700000000000001, inputs, outputs);
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_EQ(*written, std::filesystem::file_size(dir.Sub(name)));  // the size it reports

  const AscendConvertSummary summary = ConvertToNchw(dir.Sub(name), dir.Sub("out"));
  ASSERT_TRUE(summary.errors.empty()) << summary.errors[0].message();
  EXPECT_EQ(summary.tensors, 5u);
  EXPECT_EQ(summary.warnings, 0u);

  struct Want {
    std::string file;
    const TensorView* view;
  };
  for (const Want& want : {Want{"input.0.2x3x4x5", &inputs[0]}, Want{"input.1.2x3", &inputs[1]},
                           Want{"input.2.3x2", &inputs[2]}, Want{"output.0.3", &outputs[0]},
                           Want{"output.1.", &outputs[1]}}) {
    const std::string path = dir.Sub("out/" + name + "." + want.file + ".npy");
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    EXPECT_EQ(testing::ReadFile(path), ExpectedNpy(*want.view, dir.Sub(want.file + ".npy")))
        << path;
  }

  // The reader sees the host formats the writer promised.
  StatusOr<AscendDumpFile> header = ReadAscendDumpHeader(dir.Sub(name));
  ASSERT_TRUE(header.ok()) << header.status().message();
  EXPECT_EQ(header->op_name, "Default/net/Conv2D-op1");
  EXPECT_EQ(AscendFormatName(header->inputs[0].format), "NCHW");
  EXPECT_EQ(AscendFormatName(header->inputs[1].format), "ND");
  EXPECT_EQ(header->inputs[0].original_shape, inputs[0].shape);
  EXPECT_EQ(AscendDataTypeName(header->outputs[0].data_type), "BF16");
}

}  // namespace
TEST(AscendRoundTrip, SlotsWithoutTensorsKeepTheOthersIndexes) {
  // A backward node with no gradient for its first input: outputs 1 and 2 only.
  testing::TempDir dir;
  std::vector<float> weight = {1, 2, 3, 4}, bias = {5};
  std::vector<TensorView> outputs = {MakeView(DType::kFloat32, {2, 2}, {}, weight.data()),
                                     MakeView(DType::kFloat32, {1}, {}, bias.data())};
  outputs[0].slot = 1;
  outputs[1].slot = 2;
  auto fs = NewPosixFileSystem();
  const std::string name = "ConvolutionBackward0.Gradients_conv-op3.0.0.1700000000000002";
  ASSERT_TRUE(
      WriteAscendDumpFile(*fs, dir.Sub(name), "Gradients/conv-op3", 1700000000000002, {}, outputs)
          .ok());
  StatusOr<AscendDumpFile> header = ReadAscendDumpHeader(dir.Sub(name));
  ASSERT_TRUE(header.ok()) << header.status().message();
  ASSERT_EQ(header->outputs.size(), 3u);
  EXPECT_TRUE(header->outputs[0].absent());
  EXPECT_FALSE(header->outputs[1].absent());
  EXPECT_EQ(header->outputs[2].shape, std::vector<int64_t>{1});

  const AscendConvertSummary summary = ConvertToNchw(dir.Sub(name), dir.Sub("out"));
  ASSERT_TRUE(summary.errors.empty()) << summary.errors[0].message();
  EXPECT_EQ(summary.warnings, 0u);
  EXPECT_EQ(testing::ListFilesRecursive(dir.Sub("out")),
            (std::vector<std::string>{name + ".output.1.2x2.npy", name + ".output.2.1.npy"}));
}

TEST(AscendRoundTrip, DumpFilesRenamedForLengthAreFoundThroughMappingCsv) {
  // The session names a dump file "{n}" when its name is over 255 bytes (mapping.csv).
  testing::TempDir dir;
  std::vector<float> values = {1, 2, 3};
  const std::string original =
      "MatMul.Default_" + std::string(240, 'a') + "_MatMul-op0.0.0.1700000000000003";
  auto fs = NewPosixFileSystem();
  ASSERT_TRUE(fs->CreateDirectories(dir.Sub("dump")).ok());
  ASSERT_TRUE(WriteAscendDumpFile(*fs, dir.Sub("dump/0"), "Default/a/MatMul-op0", 1700000000000003,
                                  {}, {MakeView(DType::kFloat32, {3}, {}, values.data())})
                  .ok());
  testing::WriteFile(dir.Sub("dump/mapping.csv"), "0," + original + "\n");

  StatusOr<std::vector<AscendConvertJob>> jobs = CollectAscendDumpFiles({dir.Sub("dump")});
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].path, dir.Sub("dump/0"));
  EXPECT_EQ((*jobs)[0].name, original);
  AscendConvertOptions options;
  options.output_dir = dir.Sub("out");
  AscendConvertSummary summary = ConvertAscendDumps(*jobs, options);
  ASSERT_TRUE(summary.errors.empty()) << summary.errors[0].message();
  EXPECT_EQ(summary.tensors, 1u);
  // The converted file is named after the original (again too long: mapped in the output).
  const std::string mapping = testing::ReadFile(dir.Sub("out/mapping.csv"));
  const std::string line_end = "," + original + ".output.0.npy\n";
  ASSERT_GT(mapping.size(), line_end.size());
  EXPECT_EQ(mapping.substr(mapping.size() - line_end.size()), line_end) << mapping;
  EXPECT_TRUE(std::filesystem::exists(dir.Sub("out/" + mapping.substr(0, mapping.find(',')))));

  StatusOr<AscendIndex> index = IndexAscendDump(dir.Sub("dump"));
  ASSERT_TRUE(index.ok()) << index.status().message();
  ASSERT_EQ(index->entries.size(), 1u);
  EXPECT_EQ(index->entries[0].op_type, "MatMul");
  EXPECT_EQ(index->entries[0].timestamp, 1700000000000003u);
}

}  // namespace graphdump
