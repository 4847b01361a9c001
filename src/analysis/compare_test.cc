// compare's precision standards (verdicts per dtype, the small-value rule) and its error
// attribution, on dumps written here file by file (docs/precision.md states the rules).
#include "graphdump/analysis/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

#include "graphdump/analysis/dump_index.h"
#include "graphdump/npy.h"
#include "testing/testing.h"

namespace graphdump::analysis {
namespace {

using testing::TempDir;

// float -> float16 bits, for values float16 holds exactly (the tests' values are).
uint16_t HalfBits(float f) {
  if (f == 0) return 0;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint32_t sign = (bits >> 16) & 0x8000;
  const int exp = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
  const uint32_t mant = (bits >> 13) & 0x3ff;
  return static_cast<uint16_t>(sign | (exp << 10) | mant);
}

// One tensor of a kernel: values, and how the file stores them.
struct Tensor {
  std::string io = "output";
  int slot = 0;
  std::string dtype = "float32";  // the file name's dtype; bfloat16 is stored as float32
  std::vector<float> values;
};

struct Kernel {
  std::string full_name;  // "Default/net-Net/Add-op1"; "Parameter.w" for a parameter
  std::vector<Tensor> tensors;
};

void WriteNpy(const std::string& path, const Tensor& t) {
  const bool half = t.dtype == "float16";
  const int64_t n = static_cast<int64_t>(t.values.size());
  std::string bytes = NpyHeader(half ? DType::kFloat16 : DType::kFloat32, {n});
  for (float v : t.values) {
    if (half) {
      const uint16_t h = HalfBits(v);
      bytes.append(reinterpret_cast<const char*>(&h), 2);
    } else {
      bytes.append(reinterpret_cast<const char*>(&v), 4);
    }
  }
  testing::WriteFile(path, bytes);
}

// {op_type}.{op_name}.0.0.{ts}.{io}.{slot}.DefaultFormat.{dtype}.npy in `dir`.
std::string TensorPath(const std::string& dir, const std::string& type, const std::string& name,
                       const Tensor& t) {
  return dir + "/" + type + "." + name + ".0.0.1700000000000000." + t.io + "." +
         std::to_string(t.slot) + ".DefaultFormat." + t.dtype + ".npy";
}

// A one-rank, one-iteration dump of `kernels` (execution order as given) under `dir`.
DumpIndex WriteDump(const TempDir& dir, const std::vector<Kernel>& kernels) {
  const std::string rank = dir.Sub("rank_0");
  std::filesystem::create_directories(rank + "/execution_order");
  std::filesystem::create_directories(rank + "/Net/0/0");
  std::string order = "NodeExecutionOrder-FullNameWithScope\n";
  for (const Kernel& k : kernels) {
    const bool parameter = k.full_name.rfind("Parameter.", 0) == 0;
    if (!parameter) order += k.full_name + "\n";
    const size_t slash = k.full_name.rfind('/');
    const std::string type =
        parameter ? "Parameter"
                  : k.full_name.substr(slash + 1, k.full_name.rfind("-op") - slash - 1);
    const std::string name = parameter ? k.full_name.substr(10) : FileKernelName(k.full_name);
    for (const Tensor& t : k.tensors) WriteNpy(TensorPath(rank + "/Net/0/0", type, name, t), t);
  }
  testing::WriteFile(rank + "/execution_order/ms_execution_order_graph_0.csv", order);
  auto index = IndexDump(dir.path());
  EXPECT_TRUE(index.ok()) << index.status().message();
  return std::move(index).value();
}

CompareResult Compare(const std::vector<Kernel>& a, const std::vector<Kernel>& b, bool user = false,
                      double atol = 1e-8, double rtol = 1e-5) {
  TempDir da, db;
  CompareOptions options;
  options.progress = false;
  options.threads = 1;
  options.user_tolerances = user;
  options.atol = atol;
  options.rtol = rtol;
  return CompareDumps(WriteDump(da, a), WriteDump(db, b), options);
}

const TensorComparison& Output(const KernelComparison& k) {
  for (const TensorComparison& t : k.tensors)
    if (!t.is_input) return t;
  ADD_FAILURE() << k.name_a << " has no output";
  return k.tensors.front();
}

TEST(CompareStandardTest, TheLowerPrecisionOfThePairDecides) {
  EXPECT_EQ(StandardFor("bfloat16", "float32").dtype, "bfloat16");
  EXPECT_EQ(StandardFor("float32", "bfloat16").rtol, std::ldexp(1.0, -8));
  EXPECT_EQ(StandardFor("bfloat16", "float32").small_value, std::ldexp(1.0, -8));
  EXPECT_EQ(StandardFor("float16", "float32").rtol, std::ldexp(1.0, -10));
  EXPECT_EQ(StandardFor("float16", "float32").small_value, std::ldexp(1.0, -11));
  EXPECT_EQ(StandardFor("float16", "bfloat16").dtype, "bfloat16");
  EXPECT_EQ(StandardFor("Float32", "float32").rtol, std::ldexp(1.0, -20));  // MindSpore's CPU name
  EXPECT_EQ(StandardFor("float32", "float32").small_value, std::ldexp(1.0, -14));
  EXPECT_EQ(StandardFor("float64", "float32").dtype, "float32");
  EXPECT_EQ(StandardFor("float64", "float64").rtol, std::ldexp(1.0, -49));
  EXPECT_EQ(StandardFor("int64", "int64").dtype, "exact");
  EXPECT_EQ(StandardFor("int64", "int64").rtol, 0);
  EXPECT_EQ(StandardFor("int32", "float16").dtype, "float16");
  EXPECT_EQ(StandardFor("", "").dtype, "float32");
}

// For each dtype, a reference [near zero, one] against the run under test [0, 1]: errors at
// 0.75x the allowed bound pass and at 1.25x fail, near zero (bound rtol*small_value) as at one
// (bound rtol*|b|); relative errors near zero divide by the small value, not by |b|.
TEST(CompareStandardTest, VerdictsFollowEachDtypesThresholdsNearZeroAndAtOne) {
  for (const std::string dtype : {"float16", "bfloat16", "float32"}) {
    const PrecisionStandard s = StandardFor(dtype, "float32");
    const float near_bound = static_cast<float>(s.rtol * s.small_value);
    const float one_bound = static_cast<float>(s.rtol);
    const std::vector<Kernel> under_test = {
        {"Default/net-Net/Add-op0", {{"output", 0, dtype, {0, 1}}}}};
    auto with = [&](float near, float at_one) {
      return std::vector<Kernel>{
          {"Default/net-Net/Add-op0", {{"output", 0, "float32", {near, 1 - at_one}}}}};
    };
    // Near zero inside, one inside: pass, and the bfloat16 vs float32 dtypes are no warning.
    CompareResult r = Compare(under_test, with(0.75f * near_bound, 0.75f * one_bound));
    ASSERT_EQ(r.kernels.size(), 1u) << dtype;
    EXPECT_EQ(r.kernels[0].verdict, Verdict::kPass) << dtype << ": " << r.kernels[0].reason;
    EXPECT_EQ(Output(r.kernels[0]).standard, dtype);
    EXPECT_EQ(r.first_failure, -1);
    // max rel err of the near-zero element: 0.75*rtol*small / small, not 0.75*rtol*small / eps.
    EXPECT_NEAR(Output(r.kernels[0]).metrics.max_rel_err, 0.75 * s.rtol, 0.02 * s.rtol) << dtype;
    // Near zero beyond the bound: error at flat index 0, and the reason names the standard.
    r = Compare(under_test, with(1.25f * near_bound, 0.75f * one_bound));
    EXPECT_EQ(r.kernels[0].verdict, Verdict::kError) << dtype;
    EXPECT_EQ(Output(r.kernels[0]).metrics.allclose_failures, 1) << dtype;
    EXPECT_EQ(Output(r.kernels[0]).metrics.first_failure, 0) << dtype;
    EXPECT_NE(r.kernels[0].reason.find("the " + dtype + " standard"), std::string::npos)
        << r.kernels[0].reason;
    EXPECT_EQ(r.first_failure, 0);
    EXPECT_EQ(r.first_adding_error, 0);  // no input dumped: an output failure adds error
    // At one beyond the bound: error at flat index 1.
    r = Compare(under_test, with(0.75f * near_bound, 1.25f * one_bound));
    EXPECT_EQ(r.kernels[0].verdict, Verdict::kError) << dtype;
    EXPECT_EQ(Output(r.kernels[0]).metrics.first_failure, 1) << dtype;
    // --atol/--rtol replace the standard (and its small-value floor) for every pair.
    r = Compare(under_test, with(0.75f * near_bound, 0.75f * one_bound), true, 0, 1e-6);
    EXPECT_EQ(Output(r.kernels[0]).standard, "user");
    EXPECT_EQ(r.kernels[0].verdict, Verdict::kError) << dtype;
  }
}

TEST(CompareStandardTest, DtypesThatDifferOnlyInPrecisionAreNoWarningButIntegersAre) {
  CompareResult r = Compare({{"Default/net-Net/Cast-op0", {{"output", 0, "bfloat16", {1, 2}}}}},
                            {{"Default/net-Net/Cast-op0", {{"output", 0, "float32", {1, 2}}}}});
  EXPECT_EQ(r.kernels[0].verdict, Verdict::kPass) << r.kernels[0].reason;
  r = Compare({{"Default/net-Net/Cast-op0", {{"output", 0, "float32", {1, 2}}}}},
              {{"Default/net-Net/Cast-op0", {{"output", 0, "float64", {1, 2}}}}});
  EXPECT_EQ(r.kernels[0].verdict, Verdict::kPass) << r.kernels[0].reason;
}

// x -> Mul (exact) -> Sub (cancels: adds error) -> Mul (inherits) -> Add (a small added error
// below the growth limit); a parameter and the graph input differ and are reported apart.
TEST(CompareAttributionTest, TheFirstKernelThatAddsErrorIsNamedNotTheOnesThatInheritIt) {
  const std::vector<float> x = {1, 2, 3, 4}, w = {0.5f, 0.5f, 0.5f, 0.5f};
  const std::vector<float> x_bf = {1, 2, 3, 4.0078125f};  // the graph input rounded
  const std::vector<float> w_bf = {0.5f, 0.5f, 0.5f, 0.5f};
  const std::vector<float> y = {0.5f, 1, 1.5f, 2}, y_bf = {0.5f, 1, 1.5f, 2.00390625f};
  const std::vector<float> d = {0.01f, -0.02f, 0.03f, 0.04f}, d_bf = {0, 0, 0, 0.05f};
  const std::vector<float> e = {0.02f, -0.04f, 0.06f, 0.08f}, e_bf = {0, 0, 0, 0.1f};
  const std::vector<float> f = {1.02f, 0.96f, 1.06f, 1.08f}, f_bf = {1, 1, 1, 1.1f};
  auto net = [](const std::vector<float>& x, const std::vector<float>& w,
                const std::vector<float>& y, const std::vector<float>& d,
                const std::vector<float>& e, const std::vector<float>& f, const std::string& dt) {
    return std::vector<Kernel>{
        {"Parameter.w", {{"output", 0, dt, w}}},
        {"Default/net-Net/Mul-op0",
         {{"input", 0, dt, x}, {"input", 1, dt, w}, {"output", 0, dt, y}}},
        {"Default/net-Net/Sub-op1", {{"input", 0, dt, y}, {"output", 0, dt, d}}},
        {"Default/net-Net/Mul-op2", {{"input", 0, dt, d}, {"output", 0, dt, e}}},
        {"Default/net-Net/Add-op3", {{"input", 0, dt, e}, {"output", 0, dt, f}}}};
  };
  std::vector<Kernel> bf = net(x_bf, w_bf, y_bf, d_bf, e_bf, f_bf, "bfloat16");
  bf[0].tensors[0].values = {0.5f, 0.5f, 0.5f, 0.75f};  // the parameter differs
  const CompareResult r = Compare(bf, net(x, w, y, d, e, f, "float32"));
  ASSERT_EQ(r.kernels.size(), 5u);
  std::map<std::string, const KernelComparison*> by_name;
  for (const KernelComparison& k : r.kernels) by_name[k.name_a] = &k;
  const KernelComparison& mul = *by_name.at("Default/net-Net/Mul-op0");
  const KernelComparison& sub = *by_name.at("Default/net-Net/Sub-op1");
  const KernelComparison& mul2 = *by_name.at("Default/net-Net/Mul-op2");
  const KernelComparison& add = *by_name.at("Default/net-Net/Add-op3");
  EXPECT_FALSE(mul.adds_error) << mul.reason;
  EXPECT_EQ(mul.verdict, Verdict::kPass) << mul.reason;  // its inputs fail; it does not
  EXPECT_TRUE(sub.adds_error);
  EXPECT_EQ(sub.verdict, Verdict::kError);
  EXPECT_NE(sub.reason.find("adds error: output 0 norm rel err"), std::string::npos) << sub.reason;
  EXPECT_GE(sub.growth, kGrowthLimit);
  EXPECT_NEAR(sub.input_error, Output(mul).error, 1e-12);
  EXPECT_FALSE(mul2.adds_error);
  EXPECT_EQ(mul2.verdict, Verdict::kWarning);
  EXPECT_NE(mul2.reason.find("inherits error"), std::string::npos) << mul2.reason;
  EXPECT_NEAR(mul2.growth, 1.0, 1e-6);
  EXPECT_FALSE(add.adds_error);  // 0.1/1.0 in, ~0.06 out
  ASSERT_GE(r.first_failure, 0);
  EXPECT_EQ(r.kernels[r.first_failure].name_a, "Default/net-Net/Sub-op1");
  EXPECT_EQ(r.first_adding_error, r.first_failure);
  ASSERT_EQ(r.contributors.size(), 1u);
  EXPECT_EQ(r.kernels[r.contributors[0]].name_a, "Default/net-Net/Sub-op1");
  EXPECT_EQ(sub.contribution_rank, 1);
  EXPECT_EQ(mul.contribution_rank, 0);
  // The parameter is a source: error, listed apart, never the first divergence.
  ASSERT_EQ(r.differing_sources.size(), 1u);
  EXPECT_EQ(r.kernels[r.differing_sources[0]].role, KernelRole::kParameter);
  EXPECT_EQ(r.kernels[r.differing_sources[0]].verdict, Verdict::kError);
  // Mul-op0's input 0 (the graph input) differs and no kernel produced it; its input 1 is the
  // parameter's value, Sub-op1's input is Mul-op0's output.
  ASSERT_EQ(r.differing_graph_inputs.size(), 0u);  // x rounded is within bfloat16's standard
}

TEST(CompareAttributionTest, GraphInputsThatDifferAreListedApart) {
  const std::vector<Kernel> a = {
      {"Default/net-Net/Relu-op0",
       {{"input", 0, "float32", {1, 2, 5}}, {"output", 0, "float32", {1, 2, 5}}}},
      {"Default/net-Net/Neg-op1",
       {{"input", 0, "float32", {1, 2, 5}}, {"output", 0, "float32", {-1, -2, -5}}}}};
  const std::vector<Kernel> b = {
      {"Default/net-Net/Relu-op0",
       {{"input", 0, "float32", {1, 2, 3}}, {"output", 0, "float32", {1, 2, 3}}}},
      {"Default/net-Net/Neg-op1",
       {{"input", 0, "float32", {1, 2, 3}}, {"output", 0, "float32", {-1, -2, -3}}}}};
  const CompareResult r = Compare(a, b);
  ASSERT_EQ(r.differing_graph_inputs.size(), 1u);  // Neg's input is Relu's output
  EXPECT_EQ(r.kernels[r.differing_graph_inputs[0].first].name_a, "Default/net-Net/Relu-op0");
  EXPECT_EQ(r.differing_graph_inputs[0].second, 0u);
  EXPECT_EQ(r.first_adding_error, -1);  // both kernels pass the error on unchanged
  EXPECT_EQ(r.first_failure, -1);
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.warnings, 2);
}

// A backward kernel's dumped inputs (the incoming gradient) agree, but it computes from what
// its forward kernel saved: the forward scope's error counts as its input error.
TEST(CompareAttributionTest, BackwardKernelsInheritTheirForwardScopesError) {
  auto net = [](const std::vector<float>& y, const std::vector<float>& dx) {
    return std::vector<Kernel>{
        {"Default/net-Net/loss-Loss/LogSoftmax-op0",
         {{"input", 0, "float32", {1, 2, 3}}, {"output", 0, "float32", y}}},
        {"Gradients/Default/net-Net/loss-Loss/LogSoftmaxBackward0-op1",
         {{"input", 0, "float32", {1, 1, 1}}, {"output", 0, "float32", dx}}}};
  };
  const CompareResult r = Compare(net({-2, -1, 0.5f}, {0.5f, 0.2f, -0.7f}),
                                  net({-2.4f, -1.4f, -0.4f}, {0.8f, 0.1f, -0.9f}));
  ASSERT_EQ(r.kernels.size(), 2u);
  const KernelComparison& forward = r.kernels[0];
  const KernelComparison& backward = r.kernels[1];
  EXPECT_TRUE(forward.adds_error) << forward.reason;
  EXPECT_NEAR(backward.input_error, Output(forward).error, 1e-12);  // its dumped input: 0
  EXPECT_FALSE(backward.adds_error) << backward.reason;
  EXPECT_EQ(backward.verdict, Verdict::kWarning) << backward.reason;
  EXPECT_EQ(r.contributors, std::vector<int64_t>{0});
}

}  // namespace
}  // namespace graphdump::analysis
