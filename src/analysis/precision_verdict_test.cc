#include "graphdump/analysis/precision_verdict.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace graphdump::analysis {
namespace {

TEST(PrecisionVerdictTest, RoundsToTheDtypeTiesToEven) {
  EXPECT_EQ(RoundToDtype(257, "bfloat16"), 256);  // a tie: to the even 256
  EXPECT_EQ(RoundToDtype(259, "bfloat16"), 260);  // a tie: to the even 260
  EXPECT_EQ(RoundToDtype(1.0 + 1.0 / 512, "bfloat16"), 1.0);
  EXPECT_EQ(RoundToDtype(1.0 + 3.0 / 512, "bfloat16"), 1.0 + 1.0 / 128);
  EXPECT_EQ(RoundToDtype(2049, "float16"), 2048);
  EXPECT_EQ(RoundToDtype(2051, "float16"), 2052);
  EXPECT_EQ(RoundToDtype(65519, "float16"), 65504);
  EXPECT_EQ(RoundToDtype(65520, "float16"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(RoundToDtype(std::ldexp(3.0, -26), "float16"), std::ldexp(1.0, -24));  // subnormal
  EXPECT_EQ(RoundToDtype(0.1, "float32"), static_cast<double>(0.1f));
  EXPECT_EQ(RoundToDtype(0.1, "float64"), 0.1);
  EXPECT_EQ(UnitRoundoff("BFloat16"), std::ldexp(1.0, -8));
  EXPECT_TRUE(LowerPrecision("bfloat16", "float32"));
  EXPECT_FALSE(LowerPrecision("float32", "float32"));
  EXPECT_FALSE(LowerPrecision("int64", "float32"));
}

PrecisionEvidence Compared(double in, double rounding, double out) {
  PrecisionEvidence e;
  e.significant = true;
  e.growth_floor = std::ldexp(1.0, -8);
  e.input_difference = in;
  e.input_rounding = rounding;
  e.output_error = out;
  return e;
}

TEST(PrecisionVerdictTest, TheRulesInOrder) {
  // The positional encoding's sin: inputs 1.7 times their rounding, output x118.
  PrecisionJudgement j = JudgePrecision(Compared(0.00294, 0.00172, 0.461));
  EXPECT_EQ(j.verdict, PrecisionVerdict::kAddsError);  // compare: own not measured
  EXPECT_TRUE(j.inputs_near_rounding && j.magnifies);
  EXPECT_NEAR(j.growth, 0.461 / 0.00391, 0.5);
  // Replay adds own, conditioning and inherited: a larger inherited share changes nothing.
  PrecisionEvidence replayed = Compared(0.00294, 0.00172, 0.461);
  replayed.own = 0.00136;
  replayed.conditioning = 0.369;
  replayed.inherited = 0.417;
  replayed.own_floor = 4 * std::ldexp(1.0, -8);
  EXPECT_EQ(JudgePrecision(replayed).verdict, PrecisionVerdict::kIllConditioned);
  // A dominant own error: inaccurate.
  replayed.own = 0.5;
  EXPECT_EQ(JudgePrecision(replayed).verdict, PrecisionVerdict::kInaccurate);
  // Inputs far above their rounding, passed on: inherits.
  j = JudgePrecision(Compared(0.46, 0.001, 0.459));
  EXPECT_EQ(j.verdict, PrecisionVerdict::kInherits);
  EXPECT_FALSE(j.inputs_near_rounding || j.magnifies);
  // Inputs far above their rounding but multiplied by 10 or more: magnifies.
  EXPECT_EQ(JudgePrecision(Compared(0.02, 0.001, 0.3)).verdict, PrecisionVerdict::kAddsError);
  // Inputs close (< 0.1), output far (> 0.5).
  EXPECT_EQ(JudgePrecision(Compared(0.09, 0.001, 0.6)).verdict, PrecisionVerdict::kAddsError);
  // No input measured: any significant error is the kernel's.
  EXPECT_EQ(JudgePrecision(Compared(std::nan(""), std::nan(""), 0.01)).verdict,
            PrecisionVerdict::kAddsError);
  // Not significant: accurate, whatever the numbers.
  PrecisionEvidence quiet = Compared(0.00294, 0.00172, 0.461);
  quiet.significant = false;
  EXPECT_EQ(JudgePrecision(quiet).verdict, PrecisionVerdict::kAccurate);
  // Exact inputs (rounding 0, difference 0) count as near their rounding.
  EXPECT_TRUE(JudgePrecision(Compared(0, 0, 1.0)).inputs_near_rounding);
  EXPECT_FALSE(JudgePrecision(Compared(0.0072, 0.00172, 0.1)).inputs_near_rounding);  // > 4x
}

TEST(PrecisionVerdictTest, DiscreteOutputs) {
  // topk's indices differ while its inputs carry their rounding: growth aside, it adds error.
  PrecisionEvidence topk = Compared(0.00311, 0.0039, 0.0035);
  EXPECT_EQ(JudgePrecision(topk).verdict, PrecisionVerdict::kInherits);  // as values
  topk.discrete = true;
  EXPECT_EQ(JudgePrecision(topk).verdict, PrecisionVerdict::kAddsError);
  topk.own = 0;
  topk.conditioning = 0.7;
  topk.inherited = 0.1;
  EXPECT_EQ(JudgePrecision(topk).verdict, PrecisionVerdict::kIllConditioned);  // replay
  // Its own dtype chooses otherwise than float64 on the same inputs: inaccurate.
  topk.own = 0.8;
  EXPECT_EQ(JudgePrecision(topk).verdict, PrecisionVerdict::kInaccurate);
  // nonzero on indices that already differ: inherits, whatever its growth.
  PrecisionEvidence nonzero = Compared(0.5, std::nan(""), INFINITY);
  nonzero.discrete = true;
  nonzero.discrete_upstream = true;
  EXPECT_EQ(JudgePrecision(nonzero).verdict, PrecisionVerdict::kInherits);
}

// A comparison of x -> cumsum -> mul(., freqs) -> sin, the parameter freqs rounded.
TensorComparison Tensor(bool input, uint32_t slot, const std::string& shape, double sum,
                        double error, const std::string& dtype_a = "bfloat16") {
  TensorComparison t;
  t.is_input = input;
  t.slot = slot;
  t.mode = "tensor";
  t.shape_b = shape;
  t.dtype_a = dtype_a;
  t.dtype_b = "float32";
  t.metrics.elements = 4;
  t.metrics.ref_sum = sum;
  t.metrics.ref_sum_sq = sum * sum;
  t.error = error;
  return t;
}

TEST(PrecisionVerdictTest, InputChainFollowsReferenceValues) {
  CompareResult r;
  auto kernel = [&](const std::string& name, KernelRole role, std::vector<TensorComparison> ts) {
    KernelComparison k;
    k.name_a = k.name_b = name;
    k.op_type = OpTypeFromFullName(name);
    k.role = role;
    k.source_line = "model.py:" + std::to_string(r.kernels.size() + 10);
    k.tensors = std::move(ts);
    r.kernels.push_back(std::move(k));
  };
  kernel("freqs", KernelRole::kParameter, {Tensor(false, 0, "[4]", 7, 0.002)});
  kernel("other", KernelRole::kParameter, {Tensor(false, 0, "[4]", 99, 0.002)});
  kernel("Default/cumsum-op0", KernelRole::kOperator,
         {Tensor(true, 0, "[4]", 4, 0), Tensor(false, 0, "[4]", 10, 0.001)});
  kernel("Default/relu-op1", KernelRole::kOperator,  // not on the chain
         {Tensor(true, 0, "[4]", 4, 0), Tensor(false, 0, "[4]", 11, 0.001)});
  kernel("Default/mul-op2", KernelRole::kOperator,
         {Tensor(true, 0, "[4]", 10, 0.001), Tensor(true, 1, "[4]", 7, 0.002),
          Tensor(false, 0, "[4]", 70, 0.003)});
  kernel("Default/sin-op3", KernelRole::kOperator,
         {Tensor(true, 0, "[4]", 70, 0.003), Tensor(false, 0, "[4]", 0.5, 0.46)});
  r.kernels[5].adds_error = true;
  r.kernels[5].error_origin = 5;
  const PrecisionChain chain = InputChain(r, 5);
  EXPECT_EQ(chain.kernels, (std::vector<int64_t>{2, 4, 5}));
  ASSERT_EQ(chain.parameters.size(), 1u);
  EXPECT_EQ(chain.parameters[0].source, 0);
  EXPECT_EQ(chain.parameters[0].consumer, 4);
  EXPECT_DOUBLE_EQ(chain.parameters[0].error, 0.002);
  EXPECT_EQ(chain.upstream, -1);
  EXPECT_EQ(KeepEntries(r, chain), (std::vector<std::string>{
                                       "Default/cumsum-op0", "Default/mul-op2",
                                       "Default/sin-op3", "freqs"}));
  const std::string text = PrecisionChainText(r, chain, "");
  EXPECT_NE(text.find("(3 kernels, 1 parameter)"), std::string::npos) << text;
  EXPECT_NE(text.find("parameter freqs: rounded to bfloat16 (norm rel err 0.002, within the "
                      "bfloat16 standard), read by Default/mul-op2 at model.py:14"),
            std::string::npos)
      << text;
  // A parameter the run did not round (float32 on both sides) is no rounded source.
  r.kernels[0].tensors[0].dtype_a = "float32";
  EXPECT_TRUE(InputChain(r, 5).parameters.empty());
}

}  // namespace
}  // namespace graphdump::analysis
