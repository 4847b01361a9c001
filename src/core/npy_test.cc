#include "graphdump/npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "testing/testing.h"

namespace graphdump {
namespace {

std::string Prefix(uint8_t major, uint16_t header_len) {
  std::string prefix("\x93NUMPY", 6);
  prefix.push_back(static_cast<char>(major));
  prefix.push_back('\0');
  prefix.push_back(static_cast<char>(header_len & 0xff));
  prefix.push_back(static_cast<char>(header_len >> 8));
  return prefix;
}

TEST(NpyHeaderTest, ExactBytesFor2DFloat32) {
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string header = NpyHeader(DType::kFloat32, {2, 3});
  ASSERT_EQ(header.size(), 128u);  // 10 + 59 + pad: the next multiple of 64
  EXPECT_EQ(header, Prefix(1, 118) + dict + std::string(128 - 10 - dict.size() - 1, ' ') + "\n");
}

TEST(NpyHeaderTest, OneDimensionScalarAndEmpty) {
  EXPECT_EQ(NpyHeader(DType::kInt64, {5}).substr(10, 60),
            "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }   ");
  EXPECT_EQ(NpyHeader(DType::kBool, {}).substr(10, 58),
            "{'descr': '|b1', 'fortran_order': False, 'shape': (), }   ");
  EXPECT_EQ(NpyHeader(DType::kComplex128, {0, 7, 1}).substr(10, 64),
            "{'descr': '<c16', 'fortran_order': False, 'shape': (0, 7, 1), } ");
}

TEST(NpyHeaderTest, StoredDescrForWidenedTypes) {
  EXPECT_NE(NpyHeader(DType::kBFloat16, {2}).find("'descr': '<f4'"), std::string::npos);
  EXPECT_NE(NpyHeader(DType::kInt4, {2}).find("'descr': '|i1'"), std::string::npos);
  EXPECT_NE(NpyHeader(DType::kFloat16, {2}).find("'descr': '<f2'"), std::string::npos);
}

TEST(NpyHeaderTest, AlwaysAlignedWithNewlineAndValidLength) {
  // Shapes whose dict lengths cover every residue modulo 64, including an exact fit (NumPy then
  // pads a full 64 bytes: the padding is never empty).
  for (int64_t dims = 0; dims < 70; ++dims) {
    std::vector<int64_t> shape(static_cast<size_t>(dims), 1);
    if (dims > 0) shape[0] = dims * 1000;
    const std::string header = NpyHeader(DType::kFloat32, shape);
    ASSERT_EQ(header.size() % 64, 0u) << dims;
    EXPECT_EQ(header.back(), '\n');
    EXPECT_EQ(header.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    const size_t len = static_cast<uint8_t>(header[8]) | static_cast<uint8_t>(header[9]) << 8;
    EXPECT_EQ(len + 10, header.size());
    const size_t close = header.find('}');
    ASSERT_NE(close, std::string::npos);
    const std::string pad = header.substr(close + 1, header.size() - close - 2);
    EXPECT_GE(pad.size(), 1u);
    EXPECT_EQ(pad, std::string(pad.size(), ' '));
  }
}

TEST(NpyHeaderTest, HugeHeaderUsesVersion2) {
  std::vector<int64_t> shape(30000, 1);  // "1, " per dimension: a dict over 65535 bytes
  const std::string header = NpyHeader(DType::kUInt8, shape);
  EXPECT_EQ(header.substr(0, 8), std::string("\x93NUMPY\x02\x00", 8));
  uint32_t len;
  std::memcpy(&len, header.data() + 8, 4);
  EXPECT_EQ(len + 12, header.size());
  EXPECT_EQ(header.size() % 64, 0u);
  EXPECT_EQ(header.back(), '\n');
}

TEST(NpyHeaderTest, SameBytesAsNumpySave) {
  struct Case {
    DType dtype;
    std::vector<int64_t> shape;
  };
  const Case cases[] = {{DType::kFloat32, {2, 3}},
                        {DType::kBool, {}},
                        {DType::kInt64, {5}},
                        {DType::kComplex128, {0, 7, 1}},
                        {DType::kUInt16, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
                        {DType::kFloat16, {123456789, 0}},
                        {DType::kBFloat16, {3}}};
  std::string expected_hex, args;
  for (const Case& c : cases) {
    for (unsigned char ch : NpyHeader(c.dtype, c.shape)) {
      static constexpr char kDigits[] = "0123456789abcdef";
      expected_hex += kDigits[ch >> 4];
      expected_hex += kDigits[ch & 15];
    }
    expected_hex += "\n";
  }
  std::string script = "import io, numpy as np\ncases = [";
  for (const Case& c : cases) {
    script += "('" + std::string(NpyDescr(c.dtype)) + "', (";
    for (int64_t d : c.shape) script += std::to_string(d) + ",";
    script += ")),";
  }
  script += R"PY(]
for descr, shape in cases:
    b = io.BytesIO()
    a = np.lib.stride_tricks.as_strided(np.zeros(1, dtype=descr), shape=shape, strides=(0,) * len(shape))
    np.lib.format.write_array_header_1_0(b, np.lib.format.header_data_from_array_1_0(a))
    print(b.getvalue().hex())
)PY";
  const testing::CommandResult result = testing::RunPython(script);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, expected_hex);
}

TEST(NpyPayloadTest, BFloat16WidensExactly) {
  const uint16_t in[] = {0x3f80, 0xc000, 0x7fc0, 0xff80, 0x0001};
  std::vector<uint8_t> out = {0xAA};  // appends after existing content
  EncodeNpyPayload(DType::kBFloat16, reinterpret_cast<const uint8_t*>(in), 5, &out);
  ASSERT_EQ(out.size(), 1u + 20u);
  EXPECT_EQ(out[0], 0xAA);
  uint32_t bits[5];
  std::memcpy(bits, out.data() + 1, 20);
  EXPECT_EQ(bits[0], 0x3f800000u);
  EXPECT_EQ(bits[1], 0xc0000000u);
  EXPECT_EQ(bits[2], 0x7fc00000u);
  EXPECT_EQ(bits[3], 0xff800000u);
  EXPECT_EQ(bits[4], 0x00010000u);
}

TEST(NpyPayloadTest, Int4SignExtendsLowNibbleFirst) {
  const uint8_t in[] = {0x8f, 0x71, 0xe0};  // -1 -8, 1 7, 0 (high nibble -2 unused)
  std::vector<uint8_t> out;
  EncodeNpyPayload(DType::kInt4, in, 5, &out);
  const std::vector<int8_t> values(out.begin(), out.end());
  EXPECT_EQ(values, (std::vector<int8_t>{-1, -8, 1, 7, 0}));
  out.clear();
  EncodeNpyPayload(DType::kInt4, in, 6, &out);
  EXPECT_EQ(static_cast<int8_t>(out[5]), -2);
}

TEST(NpyPayloadTest, OtherTypesAreCopied) {
  const double in[] = {1.5, -2.25};
  std::vector<uint8_t> out;
  EncodeNpyPayload(DType::kFloat64, reinterpret_cast<const uint8_t*>(in), 2, &out);
  ASSERT_EQ(out.size(), 16u);
  EXPECT_EQ(std::memcmp(out.data(), in, 16), 0);
  for (DType dtype : kAllDTypes) {
    EXPECT_EQ(NpyPayloadIsIdentity(dtype), dtype != DType::kBFloat16 && dtype != DType::kInt4);
  }
}

}  // namespace
}  // namespace graphdump
