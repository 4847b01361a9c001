#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "graphdump/npy.h"
#include "testing/testing.h"

namespace graphdump {
namespace {

// A .npy preamble + dict as numpy writes it (padded to 64 bytes).
std::string MakeNpy(const std::string& dict, int major = 1) {
  std::string header = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const size_t n = header.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major != 1) {
    out += static_cast<char>((n >> 16) & 0xff);
    out += static_cast<char>((n >> 24) & 0xff);
  }
  return out + header;
}

StatusOr<NpyInfo> Parse(const std::string& bytes) {
  return ParseNpyHeader(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "x.npy");
}

TEST(NpyReaderTest, ParsesEveryDescrOfSpec) {
  const std::vector<std::pair<std::string, DType>> cases = {
      {"|b1", DType::kBool},      {"|i1", DType::kInt8},       {"|u1", DType::kUInt8},
      {"<i2", DType::kInt16},     {"<u2", DType::kUInt16},     {"<i4", DType::kInt32},
      {"<u4", DType::kUInt32},    {"<i8", DType::kInt64},      {"<u8", DType::kUInt64},
      {"<f2", DType::kFloat16},   {"<f4", DType::kFloat32},    {"<f8", DType::kFloat64},
      {"<c8", DType::kComplex64}, {"<c16", DType::kComplex128}};
  for (const auto& [descr, dtype] : cases) {
    auto info =
        Parse(MakeNpy("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (2, 3), }"));
    ASSERT_TRUE(info.ok()) << descr << ": " << info.status().message();
    EXPECT_EQ(info->dtype, dtype) << descr;
    EXPECT_EQ(info->descr, descr);
    EXPECT_EQ(info->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(info->data_offset % 64, 0u);
    EXPECT_EQ(info->data_bytes, 6 * DTypeBits(dtype) / 8) << descr;
  }
}

TEST(NpyReaderTest, ShapesScalarsAndFortranOrder) {
  auto scalar = Parse(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }"));
  ASSERT_TRUE(scalar.ok());
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->data_bytes, 4u);
  auto one = Parse(MakeNpy("{'descr': '<f8', 'fortran_order': True, 'shape': (5,), }"));
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(one->fortran_order);
  EXPECT_EQ(one->shape, (std::vector<int64_t>{5}));
  // MindSpore's writer: every dim followed by a comma, no spaces; keys in another order.
  auto ms = Parse(MakeNpy("{\"shape\": (2,3,), 'descr': '<i8', 'fortran_order': False}"));
  ASSERT_TRUE(ms.ok()) << ms.status().message();
  EXPECT_EQ(ms->shape, (std::vector<int64_t>{2, 3}));
  auto empty = Parse(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 7), }"));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->data_bytes, 0u);
}

TEST(NpyReaderTest, Versions2And3) {
  for (int major : {2, 3}) {
    auto info = Parse(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", major));
    ASSERT_TRUE(info.ok()) << info.status().message();
    EXPECT_EQ(info->major_version, major);
    EXPECT_EQ(info->data_offset % 64, 0u);
  }
}

void ExpectCorrupt(const std::string& bytes, const std::string& fragment) {
  auto info = Parse(bytes);
  ASSERT_FALSE(info.ok()) << "expected an error containing: " << fragment;
  EXPECT_EQ(info.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(info.status().message().find("x.npy"), std::string::npos) << info.status().message();
  EXPECT_NE(info.status().message().find(fragment), std::string::npos) << info.status().message();
}

TEST(NpyReaderTest, ErrorsNameTheFileAndTheProblem) {
  const std::string good = MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }");
  ExpectCorrupt("", "fewer than the 10");
  ExpectCorrupt("NUMPYxxxxxxxxxxxxxxxxxxxx", "magic");
  std::string v4 = good;
  v4[6] = 4;
  ExpectCorrupt(v4, "version 4.0 is not supported");
  ExpectCorrupt(good.substr(0, 30), "exceeds");
  ExpectCorrupt(MakeNpy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }"), "big-endian");
  ExpectCorrupt(MakeNpy("{'descr': '<U8', 'fortran_order': False, 'shape': (2,), }"),
                "'<U8' is not supported");
  // The allowed descrs listed include '<E2' (raw bfloat16), which is read.
  ExpectCorrupt(MakeNpy("{'descr': '|E2', 'fortran_order': False, 'shape': (2,), }"),
                "'|E2' is not supported (allowed: |b1 |i1 |u1 <i2 <u2 <i4 <u4 <i8 <u8 <f2 <f4 "
                "<f8 <c8 <c16, and <E2 for raw bfloat16)");
  ExpectCorrupt(MakeNpy("{'descr': '<f4', 'shape': (2,), }"), "lacks 'fortran_order'");
  ExpectCorrupt(MakeNpy("{'descr': '<f4', 'fortran_order': maybe, 'shape': (2,), }"),
                "'fortran_order' is not True or False");
  ExpectCorrupt(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,-1), }"), "'shape'");
  ExpectCorrupt(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}"),
                "unexpected header key 'x'");
  ExpectCorrupt(MakeNpy("['descr']"), "does not start with '{'");
}

TEST(NpyReaderTest, EveryPrefixAndByteFlipIsHandled) {
  const std::string good =
      MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }") + std::string(24, 'x');
  for (size_t n = 0; n < good.size(); ++n) {
    auto info = Parse(good.substr(0, n));
    if (!info.ok()) {
      EXPECT_EQ(info.status().code(), StatusCode::kCorrupt) << n;
    } else {
      EXPECT_LE(info->data_offset, n);  // a prefix may hold the header but not the data
    }
  }
  for (size_t i = 0; i < 64; ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = good;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      auto info = Parse(flipped);
      if (!info.ok()) {
        EXPECT_EQ(info.status().code(), StatusCode::kCorrupt);
      }
    }
  }
}

TEST(NpyReaderTest, ReadsWhatNumpyWrites) {
  testing::TempDir dir;
  auto result = testing::RunPython(R"(
import numpy as np, sys
d = sys.argv[1]
np.save(d + '/a.npy', np.zeros((3, 4), np.float16))
np.save(d + '/b.npy', np.asfortranarray(np.ones((2, 5), np.int64)))
np.save(d + '/c.npy', np.array(True))
np.save(d + '/d.npy', np.zeros((2,), np.complex128))
print('ok')
)",
                                   {dir.path()});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  struct Case {
    const char* file;
    DType dtype;
    std::vector<int64_t> shape;
    bool fortran;
  };
  for (const Case& c :
       {Case{"a.npy", DType::kFloat16, {3, 4}, false}, Case{"b.npy", DType::kInt64, {2, 5}, true},
        Case{"c.npy", DType::kBool, {}, false}, Case{"d.npy", DType::kComplex128, {2}, false}}) {
    const std::string bytes = testing::ReadFile(dir.Sub(c.file));
    auto info =
        ParseNpyHeader(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), c.file);
    ASSERT_TRUE(info.ok()) << info.status().message();
    EXPECT_EQ(info->dtype, c.dtype) << c.file;
    EXPECT_EQ(info->shape, c.shape) << c.file;
    EXPECT_EQ(info->fortran_order, c.fortran) << c.file;
    EXPECT_EQ(info->data_offset + info->data_bytes, bytes.size()) << c.file;
  }
}

}  // namespace
}  // namespace graphdump
