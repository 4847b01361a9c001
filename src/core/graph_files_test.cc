#include "graphdump/graph_files.h"

#include <gtest/gtest.h>

namespace graphdump {
namespace {

GraphInfo ConvGraph() {
  GraphInfo graph;
  graph.graph_id = 2;
  graph.name = "forward";
  KernelInfo k;
  k.graph_id = 2;
  k.full_name = "Default/conv-Conv2d/conv2d-op0";
  k.op_type = "conv2d";
  k.inputs = {{DType::kBFloat16, {1, 3, 8, 8}}, {DType::kBFloat16, {4, 3, 3, 3}}};
  k.outputs = {{DType::kBFloat16, {1, 4, 8, 8}}};
  k.source_trace = {{"model.py", 30, 8, "h = self.conv(x)"}};
  k.attributes = {{"groups", "1"}};
  k.schema =
      "aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1) -> Tensor";
  k.arguments = {
      {"input", "input.0"}, {"weight", "input.1"}, {"bias", "None"}, {"stride", "[1, 1]"}};
  graph.kernels.push_back(k);
  return graph;
}

TEST(GraphFilesTest, IrRecordsSchemaAndArguments) {
  const std::string ir = GenerateIrText(ConvGraph());
  EXPECT_NE(
      ir.find("      # In file model.py(30)/h = self.conv(x)/\n"
              "      # Schema: aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, "
              "int[2] stride=1) -> Tensor\n"
              "      # Arguments: (input=input.0, weight=input.1, bias=None, stride=[1, 1])\n"),
      std::string::npos)
      << ir;
}

TEST(GraphFilesTest, ProtoRoundTrips) {
  const GraphInfo graph = ConvGraph();
  auto parsed = ParseGraphProto(SerializeGraphProto(graph), "g.pb");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->graph_id, 2u);
  EXPECT_EQ(parsed->name, "forward");
  ASSERT_EQ(parsed->kernels.size(), 1u);
  const KernelInfo& k = parsed->kernels[0];
  EXPECT_EQ(k.full_name, graph.kernels[0].full_name);
  EXPECT_EQ(k.schema, graph.kernels[0].schema);
  ASSERT_EQ(k.arguments.size(), 4u);
  EXPECT_EQ(k.arguments[3].name, "stride");
  EXPECT_EQ(k.arguments[3].value, "[1, 1]");
  EXPECT_EQ(k.inputs[1].dtype, DType::kBFloat16);
  EXPECT_EQ(k.inputs[1].shape, (std::vector<int64_t>{4, 3, 3, 3}));
  EXPECT_EQ(k.source_trace[0].line, 30);
  EXPECT_EQ(k.attributes.at("groups"), "1");
}

TEST(GraphFilesTest, ParseRejectsWhatIsNotAGraph) {
  auto parsed = ParseGraphProto(std::string("\x0a\x05"
                                            "ab"),
                                "/d/graphs/g.pb");  // truncated
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(parsed.status().message().find("/d/graphs/g.pb"), std::string::npos);
}

}  // namespace
}  // namespace graphdump
