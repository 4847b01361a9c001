#include "graphdump/analysis/ascend_dump.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "dump_data.pb.h"

namespace graphdump {
namespace {

// A file with one float16 NC1HWC0 input (1,1,2,2,16) and one int8 ND output (3,).
std::string MakeFile(const std::function<void(toolkit::dumpdata::DumpData*)>& mutate = {}) {
  toolkit::dumpdata::DumpData msg;
  msg.set_version("2.0");
  msg.set_dump_time(123);
  msg.set_op_name("Default/Conv2D-op1");
  auto* in = msg.add_input();
  in->set_data_type(toolkit::dumpdata::DT_FLOAT16);
  in->set_format(toolkit::dumpdata::FORMAT_NC1HWC0);
  for (int d : {1, 1, 2, 2, 16}) in->mutable_shape()->add_dim(d);
  for (int d : {1, 3, 2, 2}) in->mutable_original_shape()->add_dim(d);
  in->set_size(128);
  auto* out = msg.add_output();
  out->set_data_type(toolkit::dumpdata::DT_INT8);
  out->set_format(toolkit::dumpdata::FORMAT_ND);
  out->mutable_shape()->add_dim(3);
  out->set_size(3);
  if (mutate) mutate(&msg);
  std::string header = msg.SerializeAsString();
  std::string file(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return file + header + std::string(131, 'x');
}

StatusOr<AscendDumpFile> Parse(const std::string& bytes) {
  return ParseAscendDump(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "f.bin");
}

TEST(AscendDump, ParsesHeaderAndPlacesTensors) {
  std::string bytes = MakeFile();
  StatusOr<AscendDumpFile> file = Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->op_name, "Default/Conv2D-op1");
  EXPECT_EQ(file->dump_time, 123u);
  ASSERT_EQ(file->inputs.size(), 1u);
  ASSERT_EQ(file->outputs.size(), 1u);
  EXPECT_EQ(file->inputs[0].offset, file->data_offset);
  EXPECT_EQ(file->outputs[0].offset, file->data_offset + 128);
  EXPECT_EQ(file->inputs[0].original_shape, (std::vector<int64_t>{1, 3, 2, 2}));
  EXPECT_EQ(AscendFormatName(file->inputs[0].format), "NC1HWC0");
  EXPECT_EQ(AscendDataTypeName(file->outputs[0].data_type), "INT8");
}

void ExpectError(const std::string& bytes, const std::string& needle) {
  StatusOr<AscendDumpFile> file = Parse(bytes);
  ASSERT_FALSE(file.ok()) << "expected an error mentioning " << needle;
  EXPECT_EQ(file.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(file.status().message().find("f.bin"), std::string::npos) << file.status().message();
  EXPECT_NE(file.status().message().find(needle), std::string::npos) << file.status().message();
}

TEST(AscendDump, RejectsCorruptFiles) {
  const std::string good = MakeFile();
  ExpectError(good.substr(0, 6), "8-byte header length");
  ExpectError(std::string("\xff\xff\xff\x00\x00\x00\x00\x00", 8) + good.substr(8), "header length");
  ExpectError(good.substr(0, good.size() - 1), "output[0].size");
  ExpectError(MakeFile([](auto* m) { m->mutable_input(0)->set_size(127); }), "input[0].size");
  ExpectError(
      MakeFile([](auto* m) {
        m->mutable_output(0)->set_data_type(static_cast<toolkit::dumpdata::OutputDataType>(64));
      }),
      "output[0].data_type: unknown OutputDataType value 64");
  ExpectError(MakeFile([](auto* m) {
                m->mutable_input(0)->set_format(static_cast<toolkit::dumpdata::OutputFormat>(50));
              }),
              "input[0].format: unknown OutputFormat value 50");
}

TEST(AscendDump, NamesAndTypes) {
  EXPECT_EQ(AscendFormatName(49), "C1HWC0");
  EXPECT_EQ(AscendFormatName(50), "");
  EXPECT_EQ(AscendFormatFromName("fractal_z"), 4);
  EXPECT_EQ(AscendFormatFromName("FORMAT_FRACTAL_NZ"), 29);
  EXPECT_EQ(AscendDataTypeName(31), "UINT2");
  EXPECT_EQ(AscendDataTypeBits(28), 4);
  EXPECT_EQ(AscendDataTypeToDType(27), DType::kBFloat16);
  EXPECT_EQ(AscendDataTypeFromDType(DType::kFloat16), 2);
  EXPECT_FALSE(AscendDataTypeToDType(13).has_value());
}

TEST(AscendDump, RecognisesDumpFileNames) {
  EXPECT_TRUE(LooksLikeAscendDumpName("Conv2D.Default_conv.2.7.1700000000000000"));
  EXPECT_FALSE(LooksLikeAscendDumpName("Conv2D.Default_conv.2.7.1700000000000000.npy"));
  EXPECT_FALSE(LooksLikeAscendDumpName("mapping.csv"));
  EXPECT_FALSE(LooksLikeAscendDumpName("1.2.3"));
}

}  // namespace
}  // namespace graphdump
