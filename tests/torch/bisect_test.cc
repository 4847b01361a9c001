// Tests of BisectPrecision and RelativeL2Error on modules defined here (no Python needed).
#include "graphdump/torch/bisect.h"

#include <gtest/gtest.h>
#include <torch/script.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "graphdump/torch/torch_model.h"

namespace graphdump {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(RelativeL2ErrorTest, IsTheNormOfTheDifferenceOverTheReferenceNorm) {
  const at::Tensor ref = torch::tensor({3.0, 4.0});
  EXPECT_DOUBLE_EQ(RelativeL2Error(torch::tensor({3.0, 4.0}), ref), 0.0);
  EXPECT_DOUBLE_EQ(RelativeL2Error(torch::tensor({3.0, 5.0}), ref), 0.2);
  // Other dtypes are widened: a bfloat16 actual against a float32 reference.
  EXPECT_DOUBLE_EQ(
      RelativeL2Error(torch::tensor({3.0f, 5.0f}).to(at::kBFloat16), torch::tensor({3.0f, 4.0f})),
      0.2);
  // An all-zero reference: the absolute norm.
  EXPECT_DOUBLE_EQ(RelativeL2Error(torch::tensor({3.0, 4.0}), torch::zeros({2})), 5.0);
}

TEST(RelativeL2ErrorTest, NonFiniteValuesAndShapes) {
  const double nan = std::nan("");
  EXPECT_EQ(RelativeL2Error(torch::tensor({nan, 1.0}), torch::tensor({1.0, 1.0})), kInf);
  EXPECT_EQ(RelativeL2Error(torch::tensor({kInf, 1.0}), torch::tensor({1.0, 1.0})), kInf);
  // The same non-finite value where the reference has one counts as equal.
  EXPECT_DOUBLE_EQ(
      RelativeL2Error(torch::tensor({kInf, nan, 3.0}), torch::tensor({kInf, nan, 4.0})), 0.25);
  EXPECT_EQ(RelativeL2Error(torch::tensor({-kInf, 4.0}), torch::tensor({kInf, 4.0})), kInf);
  EXPECT_EQ(RelativeL2Error(torch::ones({2, 3}), torch::ones({3, 2})), kInf);
}

// forward: relu -> prod over 1,024 factors near 0.995 -> mul by 64 (exact in any precision).
// torch's CPU prod of bfloat16 multiplies in bfloat16, rounding each partial product (about 18%
// off here), while its sum, dot and matmul accumulate in float32 since torch 2.
std::unique_ptr<TorchModel> ProductModel() {
  torch::jit::Module m("ProductModel");
  m.define(R"(
def forward(self, x):
    h = torch.relu(x)
    p = torch.prod(h)
    return p * 64.0
)");
  auto model = TorchModel::FromModule(m, nullptr);
  EXPECT_TRUE(model.ok()) << model.status().message();
  return model.ok() ? std::move(*model) : nullptr;
}

// 1,024 values in [0.99, 1], each exact in bfloat16 so that rounding the input changes nothing.
at::Tensor NearOne() {
  torch::manual_seed(2);
  return (torch::rand({1024}) * 0.01 + 0.99).to(at::kBFloat16).to(at::kFloat);
}

size_t KernelNamed(const TorchModel& model, const std::string& op_type) {
  const auto& kernels = model.graph().kernels;
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (kernels[i].op_type == op_type) return i;
  }
  ADD_FAILURE() << "no kernel " << op_type;
  return 0;
}

TEST(BisectTest, FindsTheProductAndTheSetReproducesAfterOtherSets) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(2);
  const at::Tensor x = NearOne();
  auto model = ProductModel();
  ASSERT_TRUE(model);
  const at::Tensor reference = torch::relu(x).prod() * 64.0;

  std::vector<BisectRound> seen;
  auto result = BisectPrecision(*model, {x}, BisectOptions{},
                                [&](const BisectRound& round) { seen.push_back(round); });
  ASSERT_TRUE(result.ok()) << result.status().message();
  const size_t prod = KernelNamed(*model, "prod");
  EXPECT_EQ(result->outcome, BisectResult::Outcome::kFound);
  EXPECT_EQ(result->keep, std::vector<size_t>{prod});
  EXPECT_GT(result->error_none, 0.01);
  EXPECT_LE(result->error, 0.01);
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen.size(), result->rounds.size());
  EXPECT_EQ(seen[0].phase, BisectRound::Phase::kNone);
  EXPECT_EQ(seen[1].phase, BisectRound::Phase::kAll);
  EXPECT_EQ(seen[1].kept, result->candidates);

  // The model is left in bfloat16; the kept set changes between runs without reloading, and
  // each run gives the error bisect saw for that set.
  auto error_with = [&](const std::vector<size_t>& keep) {
    KeepSet set;
    for (size_t id : keep) {
      (id < result->kernel_count ? set.kernels : set.states)
          .push_back(id < result->kernel_count ? id : id - result->kernel_count);
    }
    model->SetKeepFp32(set);
    auto out = model->Forward({x});
    EXPECT_TRUE(out.ok());
    EXPECT_EQ(out->toTensor().scalar_type(), at::kBFloat16);
    return RelativeL2Error(out->toTensor(), reference);
  };
  EXPECT_DOUBLE_EQ(error_with(result->keep), result->error);
  EXPECT_DOUBLE_EQ(error_with({}), result->error_none);
  EXPECT_DOUBLE_EQ(error_with(result->keep), result->error);
}

TEST(BisectTest, OutcomesWithoutASet) {
  torch::NoGradGuard no_grad;
  const at::Tensor x = NearOne();
  BisectOptions loose;
  loose.tolerance = 100;
  auto model = ProductModel();
  auto matches = BisectPrecision(*model, {x}, loose);
  ASSERT_TRUE(matches.ok()) << matches.status().message();
  EXPECT_EQ(matches->outcome, BisectResult::Outcome::kAlreadyMatches);
  EXPECT_TRUE(matches->keep.empty());
  EXPECT_EQ(matches->rounds.size(), 1u);

  BisectOptions strict;
  strict.tolerance = 1e-7;  // the result itself is rounded to bfloat16
  model = ProductModel();
  auto unreachable = BisectPrecision(*model, {x}, strict);
  ASSERT_TRUE(unreachable.ok()) << unreachable.status().message();
  EXPECT_EQ(unreachable->outcome, BisectResult::Outcome::kUnreachable);
  EXPECT_GT(unreachable->error_all, 1e-7);
  EXPECT_EQ(unreachable->rounds.size(), 2u);
}

TEST(BisectTest, BadOptions) {
  const at::Tensor x = NearOne();
  BisectOptions fp32;
  fp32.dtype = at::kFloat;
  auto model = ProductModel();
  EXPECT_EQ(BisectPrecision(*model, {x}, fp32).status().code(), StatusCode::kInvalidArgument);
  BisectOptions negative;
  negative.tolerance = -1;
  EXPECT_EQ(BisectPrecision(*model, {x}, negative).status().code(), StatusCode::kInvalidArgument);
  BisectOptions target;
  target.target = "conv2d";
  auto none = BisectPrecision(*model, {x}, target);
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("--target 'conv2d' selects no kernel"), std::string::npos)
      << none.status().message();
}

TEST(BisectTest, TheLowPrecisionRunCastsTheModelsOwnValues) {
  // A float64 parameter: the float32 reference casts it to float32, and the bfloat16 run must
  // cast the original as `run --precision bf16` does, not the float32 rounding (1 + 2^-8 +
  // 2^-30 is 1 + 2^-8 in float32, a tie that bfloat16 rounds to 1, while a direct rounding
  // gives 1 + 2^-7; LibTorch 1.13 itself rounds float64 through float32, a later one may not).
  torch::NoGradGuard no_grad;
  const at::Tensor original =
      torch::tensor({1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30)}, at::kDouble);
  torch::jit::Module m("Scale");
  m.register_parameter("w", original.clone(), false);
  m.define(R"(
def forward(self, x):
    return x * self.w
)");
  auto model = TorchModel::FromModule(m, nullptr);
  ASSERT_TRUE(model.ok());
  auto result = BisectPrecision(**model, {torch::ones({1})}, BisectOptions{});
  ASSERT_TRUE(result.ok()) << result.status().message();
  const at::Tensor w = (*model)->module().attr("w").toTensor();
  EXPECT_EQ(w.scalar_type(), at::kBFloat16);
  EXPECT_EQ(w.item<float>(), original.to(at::kBFloat16).item<float>());
}

}  // namespace
}  // namespace graphdump
