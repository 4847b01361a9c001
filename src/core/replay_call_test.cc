#include "graphdump/replay_call.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>

namespace graphdump {
namespace {

KernelInfo Kernel(const std::string& full_name, const std::string& schema,
                  std::vector<KernelArgument> arguments) {
  KernelInfo k;
  k.full_name = full_name;
  k.op_type = OpTypeFromFullName(full_name);
  k.schema = schema;
  k.arguments = std::move(arguments);
  return k;
}

KernelInfo Add(const std::string& alpha = "1") {
  return Kernel("Default/net-Net/add-op0",
                "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
                {{"self", "input.0"}, {"other", "input.1"}, {"alpha", alpha}});
}

std::string Refusal(const KernelInfo& k, size_t inputs) {
  auto plan = PlanReplayCall(k, inputs);
  const auto* why = std::get_if<std::string>(&plan);
  return why ? *why : std::string();
}

TEST(ReplayCallTest, PlansTheKernelsOwnOperator) {
  auto plan = PlanReplayCall(Add("2.5"), 2);
  ASSERT_TRUE(std::holds_alternative<ReplayCallPlan>(plan)) << std::get<std::string>(plan);
  const ReplayCallPlan& p = std::get<ReplayCallPlan>(plan);
  EXPECT_EQ(p.op.name, "aten::add");
  EXPECT_EQ(p.op.overload, "Tensor");
  EXPECT_EQ(p.input_slots, 2u);
  ASSERT_EQ(p.arguments.size(), 3u);
  EXPECT_EQ(p.arguments[1].kind, ReplayLiteral::kInput);
  EXPECT_EQ(p.arguments[1].i, 1);
  EXPECT_EQ(p.arguments[2].kind, ReplayLiteral::kFloat);
  EXPECT_EQ(p.arguments[2].f, 2.5);
}

TEST(ReplayCallTest, RefusesAnotherOperatorThanTheOpType) {
  // A relu kernel recording aten::save: the schema names another operator than the kernel's.
  KernelInfo save = Kernel("Default/net-Net/relu-op0", "aten::save(t item, str filename) -> ()",
                           {{"item", "input.0"}, {"filename", "\"/tmp/owned\""}});
  EXPECT_EQ(Refusal(save, 1),
            "its recorded schema names aten::save and the kernel's op type is 'relu': replay "
            "runs only a kernel's own operator");
  // Named after its op type, save is still no operator replay runs.
  save.full_name = "Default/net-Net/save-op0";
  save.op_type = "save";
  EXPECT_EQ(Refusal(save, 1),
            "aten::save is not among the operators replay runs (computations without side "
            "effects: docs/precision.md, \"Replay\")");
  // The proto's op_type must agree with the full name too.
  KernelInfo add = Add();
  add.op_type = "save";
  EXPECT_NE(Refusal(add, 2).find("replay runs only a kernel's own operator"), std::string::npos);
  KernelInfo prim = Add();
  prim.schema = "prim::Print(...) -> ()";
  EXPECT_NE(Refusal(prim, 2).find("does not name an ATen operator"), std::string::npos);
}

TEST(ReplayCallTest, AllowList) {
  EXPECT_TRUE(IsReplayableOperator("relu"));
  EXPECT_TRUE(IsReplayableOperator("relu_"));
  EXPECT_TRUE(IsReplayableOperator("conv2d"));
  EXPECT_TRUE(IsReplayableOperator("__and__"));
  for (const char* name : {"save", "load", "empty", "as_strided", "set_", "resize_", "copy_",
                           "rand", "normal_", "bernoulli", "__and___", "_", "", "warn"}) {
    EXPECT_FALSE(IsReplayableOperator(name)) << name;
  }
}

TEST(ReplayCallTest, RandomOperatorsAreRefusedSayingSo) {
  KernelInfo dropout = Kernel("Default/net-Net/dropout-op0",
                              "aten::dropout(Tensor input, float p, bool train) -> Tensor",
                              {{"input", "input.0"}, {"p", "0.5"}, {"train", "True"}});
  EXPECT_NE(Refusal(dropout, 1).find("it is a random operator"), std::string::npos);
  dropout.arguments[2].value = "False";  // eval mode returns its input
  EXPECT_EQ(Refusal(dropout, 1), "");
}

TEST(ReplayCallTest, BoundsLiteralsBeforeParsing) {
  // 50,000 nested lists would overflow a recursive parser's stack.
  const std::string deep = std::string(50000, '[') + "1" + std::string(50000, ']');
  EXPECT_EQ(Refusal(Add(deep), 2).substr(0, 22), "its argument 'alpha': ");
  EXPECT_NE(Refusal(Add(deep), 2).find("is refused: it is 100001 bytes long"), std::string::npos);
  const std::string nested = "[[[[[1]]]]]";
  EXPECT_NE(Refusal(Add(nested), 2).find("its lists nest deeper than 4"), std::string::npos);
  std::string wide = "[";
  for (int i = 0; i < 5000; ++i) wide += "1,";
  wide += "1]";
  EXPECT_NE(Refusal(Add(wide), 2).find("it has more than 4096 items"), std::string::npos);
  // Within the bounds: parsed.
  EXPECT_EQ(Refusal(Add("[[[[1]]]]"), 2), "");
}

TEST(ReplayCallTest, ValidatesInputSlots) {
  KernelInfo add = Add();
  add.arguments[1].value = "input.99999999999999999999999";
  EXPECT_EQ(Refusal(add, 2),
            "its argument 'other': it has an unreadable value: 'input.99999999999999999999999'");
  add.arguments[1].value = "input.7";
  EXPECT_EQ(Refusal(add, 2), "it reads input slot 7 and the dump holds 2 inputs of it");
  EXPECT_EQ(Refusal(Add(), 3),
            "its call reads 2 tensors and the dump holds 3 inputs (an optional tensor that was "
            "None at run time)");
  EXPECT_NE(Refusal(Add(), 0).find("the dump holds no input tensors of it"), std::string::npos);
}

TEST(ReplayCallTest, ParsesLiterals) {
  auto parsed = ParseReplayLiteral("[1, -2.5e3, True, None, \"a\\\"b\", inf, [input.3]]");
  ASSERT_TRUE(std::holds_alternative<ReplayLiteral>(parsed));
  const ReplayLiteral& v = std::get<ReplayLiteral>(parsed);
  ASSERT_EQ(v.list.size(), 7u);
  EXPECT_EQ(v.list[0].i, 1);
  EXPECT_EQ(v.list[1].f, -2500);
  EXPECT_TRUE(v.list[2].b);
  EXPECT_EQ(v.list[3].kind, ReplayLiteral::kNone);
  EXPECT_EQ(v.list[4].s, "a\"b");
  EXPECT_EQ(v.list[6].list[0].i, 3);
  for (const char* bad : {"", "[", "1 2", "99999999999999999999", "\"open", "Truex", "input."}) {
    EXPECT_TRUE(std::holds_alternative<std::string>(ParseReplayLiteral(bad))) << bad;
  }
}

}  // namespace
}  // namespace graphdump
