#include "graphdump/dtype.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace graphdump {
namespace {

TEST(DTypeTest, NamesRoundTrip) {
  std::set<std::string_view> names;
  for (DType dtype : kAllDTypes) {
    const std::string_view name = DTypeName(dtype);
    EXPECT_TRUE(names.insert(name).second) << "duplicate name " << name;
    ASSERT_TRUE(DTypeFromName(name).has_value()) << name;
    EXPECT_EQ(*DTypeFromName(name), dtype) << name;
  }
  EXPECT_EQ(DTypeName(DType::kFloat32), "float32");
  EXPECT_EQ(DTypeName(DType::kBFloat16), "bfloat16");
  EXPECT_EQ(DTypeName(DType::kBool), "bool");
  EXPECT_EQ(DTypeName(DType::kUInt8), "uint8");
  EXPECT_EQ(DTypeName(DType::kComplex128), "complex128");
  EXPECT_EQ(DTypeName(DType::kInt4), "int4");
}

TEST(DTypeTest, MindSporeCpuSpellings) {
  EXPECT_EQ(DTypeFromName("Float32"), DType::kFloat32);
  EXPECT_EQ(DTypeFromName("Float16"), DType::kFloat16);
  EXPECT_EQ(DTypeFromName("Int64"), DType::kInt64);
  EXPECT_EQ(DTypeFromName("Bool"), DType::kBool);
  EXPECT_EQ(DTypeFromName("BFloat16"), DType::kBFloat16);
  EXPECT_EQ(DTypeFromName("UInt8"), DType::kUInt8);
  EXPECT_EQ(DTypeFromName("Complex64"), DType::kComplex64);
  EXPECT_EQ(DTypeFromName("Int4"), DType::kInt4);
  EXPECT_FALSE(DTypeFromName("FLOAT32").has_value());
  EXPECT_FALSE(DTypeFromName("float31").has_value());
  EXPECT_FALSE(DTypeFromName("").has_value());
}

TEST(DTypeTest, Bits) {
  EXPECT_EQ(DTypeBits(DType::kBool), 8u);
  EXPECT_EQ(DTypeBits(DType::kInt4), 4u);
  EXPECT_EQ(DTypeBits(DType::kBFloat16), 16u);
  EXPECT_EQ(DTypeBits(DType::kComplex128), 128u);
  EXPECT_EQ(DTypeStorageBytes(DType::kInt4, 5), 3u);
  EXPECT_EQ(DTypeStorageBytes(DType::kInt4, 4), 2u);
  EXPECT_EQ(DTypeStorageBytes(DType::kFloat64, 3), 24u);
  EXPECT_EQ(DTypeStorageBytes(DType::kFloat64, 0), 0u);
}

TEST(DTypeTest, NpyDescrs) {
  const std::pair<DType, std::string_view> expected[] = {
      {DType::kBool, "|b1"},    {DType::kInt8, "|i1"},      {DType::kInt16, "<i2"},
      {DType::kInt32, "<i4"},   {DType::kInt64, "<i8"},     {DType::kUInt8, "|u1"},
      {DType::kUInt16, "<u2"},  {DType::kUInt32, "<u4"},    {DType::kUInt64, "<u8"},
      {DType::kFloat16, "<f2"}, {DType::kBFloat16, "<f4"},  {DType::kFloat32, "<f4"},
      {DType::kFloat64, "<f8"}, {DType::kComplex64, "<c8"}, {DType::kComplex128, "<c16"},
      {DType::kInt4, "|i1"}};
  for (const auto& [dtype, descr] : expected) {
    EXPECT_EQ(NpyDescr(dtype), descr) << DTypeName(dtype);
    ASSERT_TRUE(DTypeFromNpyDescr(descr).has_value()) << descr;
    EXPECT_EQ(*DTypeFromNpyDescr(descr), NpyStoredDType(dtype)) << descr;
  }
  EXPECT_EQ(NpyStoredDType(DType::kBFloat16), DType::kFloat32);
  EXPECT_EQ(NpyStoredDType(DType::kInt4), DType::kInt8);
  EXPECT_EQ(NpyStoredDType(DType::kFloat16), DType::kFloat16);
}

TEST(DTypeTest, NpyDescrVariants) {
  EXPECT_EQ(DTypeFromNpyDescr("<u1"), DType::kUInt8);  // byte order is irrelevant for 1 byte
  EXPECT_EQ(DTypeFromNpyDescr(">i1"), DType::kInt8);
  EXPECT_EQ(DTypeFromNpyDescr("<E2"), DType::kBFloat16);  // MindSpore's raw bfloat16
  EXPECT_FALSE(DTypeFromNpyDescr(">f4").has_value());
  EXPECT_FALSE(DTypeFromNpyDescr(">i8").has_value());
  EXPECT_FALSE(DTypeFromNpyDescr("|f4").has_value());
  EXPECT_FALSE(DTypeFromNpyDescr("<f16").has_value());
  EXPECT_FALSE(DTypeFromNpyDescr("<U5").has_value());
  EXPECT_FALSE(DTypeFromNpyDescr("f4").has_value());
  EXPECT_FALSE(DTypeFromNpyDescr("").has_value());
}

TEST(DTypeTest, Kinds) {
  for (DType dtype : kAllDTypes) {
    const bool floating = dtype == DType::kFloat16 || dtype == DType::kBFloat16 ||
                          dtype == DType::kFloat32 || dtype == DType::kFloat64;
    EXPECT_EQ(IsFloatingPoint(dtype), floating) << DTypeName(dtype);
    EXPECT_EQ(IsComplex(dtype), dtype == DType::kComplex64 || dtype == DType::kComplex128)
        << DTypeName(dtype);
  }
}

}  // namespace
}  // namespace graphdump
