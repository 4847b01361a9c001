#include "graphdump/selector.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graphdump/config.h"

namespace graphdump {
namespace {

DumpConfig Config(const std::string& common_overrides, const std::string& e2e = "{}") {
  nlohmann::json config = nlohmann::json::parse(R"({
    "common_dump_settings": {
      "dump_mode": 0, "path": "/tmp/dump", "net_name": "Net", "iteration": "all",
      "input_output": 0, "kernels": [], "support_device": []
    }
  })");
  config["common_dump_settings"].update(nlohmann::json::parse(common_overrides));
  config["e2e_dump_settings"] = nlohmann::json::parse(e2e);
  StatusOr<ParsedConfig> parsed = ParseConfig(config.dump(), "", "");
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  return parsed.ok() ? parsed->config : DumpConfig{};
}

KernelInfo Kernel(const std::string& full_name, const std::string& module_path = "") {
  KernelInfo kernel;
  kernel.full_name = full_name;
  kernel.module_path = module_path;
  return kernel;
}

GraphInfo Graph() {
  GraphInfo graph;
  graph.kernels = {
      Kernel("Default/features-Sequential/0-Conv2d/conv2d-op3", "features.0"),
      Kernel("Default/features-Sequential/1-ReLU/relu_-op4", "features.1"),
      Kernel("Default/Conv-op12", ""),
      Kernel("Default/classifier-Linear/linear-op7", "classifier"),
      Kernel("Gradients/Default/features-Sequential/0-Conv2d/ConvolutionBackward0-op20",
             "features.0"),
  };
  return graph;
}

TEST(SelectorTest, DumpModeZeroSelectsEverything) {
  Selector selector(Config(R"({"kernels": ["conv"]})"));
  EXPECT_EQ(selector.SelectKernels(Graph()), std::vector<bool>(5, true));
  EXPECT_TRUE(selector.UnusedEntries().empty());
}

TEST(SelectorTest, DumpModeOneWithEmptyListSelectsEverything) {
  Selector selector(Config(R"({"dump_mode": 1, "kernels": ["", " "]})"));
  EXPECT_EQ(selector.SelectKernels(Graph()), std::vector<bool>(5, true));
  EXPECT_TRUE(selector.UnusedEntries().empty());
}

TEST(SelectorTest, DumpModeOneFullName) {
  Selector selector(Config(R"({"dump_mode": 1, "kernels": ["Default/Conv-op12"]})"));
  EXPECT_EQ(selector.SelectKernels(Graph()), (std::vector<bool>{false, false, true, false, false}));
  EXPECT_TRUE(selector.UnusedEntries().empty());
}

TEST(SelectorTest, DumpModeOneOpTypeIsCaseInsensitiveSubstringOfLastSegment) {
  Selector selector(Config(R"({"dump_mode": 1, "kernels": ["CONV"]})"));
  // conv2d-op3, Conv-op12 and ConvolutionBackward0-op20 match; "features-Sequential/0-Conv2d"
  // scope segments do not count for relu.
  EXPECT_EQ(selector.SelectKernels(Graph()), (std::vector<bool>{true, false, true, false, true}));
  Selector op_suffix(Config(R"({"dump_mode": 1, "kernels": ["op4"]})"));
  EXPECT_EQ(op_suffix.SelectKernels(Graph()), std::vector<bool>(5, false));
  EXPECT_EQ(op_suffix.UnusedEntries(), std::vector<std::string>{"op4"});
}

TEST(SelectorTest, DumpModeOneRegexMatchesWholeName) {
  Selector selector(Config(R"j({"dump_mode": 1, "kernels": ["name-regex(Default/.*-op\\d)"]})j"));
  EXPECT_EQ(selector.SelectKernels(Graph()), (std::vector<bool>{true, true, false, true, false}));
  Selector partial(Config(R"j({"dump_mode": 1, "kernels": ["name-regex(conv2d)"]})j"));
  EXPECT_EQ(partial.SelectKernels(Graph()), std::vector<bool>(5, false));
}

TEST(SelectorTest, UnusedEntriesCountEveryMatchingEntry) {
  Selector selector(Config(
      R"j({"dump_mode": 1, "kernels": ["name-regex(.*linear.*)", "Linear",
          "Default/classifier-Linear/linear-op7", "Softmax", "Default/Missing-op1",
          "name-regex(nothing)"]})j"));
  EXPECT_TRUE(selector.KernelSelected(Graph().kernels[3]));
  EXPECT_FALSE(selector.KernelSelected(Graph().kernels[1]));
  EXPECT_EQ(selector.UnusedEntries(),
            (std::vector<std::string>{"Softmax", "Default/Missing-op1", "name-regex(nothing)"}));
}

TEST(SelectorTest, UsedEntriesStayUsedAcrossGraphs) {
  Selector selector(Config(R"({"dump_mode": 1, "kernels": ["relu", "linear"]})"));
  GraphInfo first;
  first.kernels = {Kernel("Default/relu-op1")};
  GraphInfo second;
  second.kernels = {Kernel("Default/linear-op1")};
  EXPECT_EQ(selector.SelectKernels(first), std::vector<bool>{true});
  EXPECT_EQ(selector.UnusedEntries(), std::vector<std::string>{"linear"});
  EXPECT_EQ(selector.SelectKernels(second), std::vector<bool>{true});
  EXPECT_TRUE(selector.UnusedEntries().empty());
}

TEST(SelectorTest, DumpModeTwoUsesMarksAndModulePaths) {
  Selector selector(Config(R"({"dump_mode": 2, "kernels": ["Softmax"]})"));
  GraphInfo graph = Graph();
  EXPECT_EQ(selector.SelectKernels(graph), std::vector<bool>(5, false));
  graph.kernels[3].marked_for_dump = true;
  EXPECT_EQ(selector.SelectKernels(graph), (std::vector<bool>{false, false, false, true, false}));
  selector.SetDump("features.0");
  EXPECT_EQ(selector.SelectKernels(graph), (std::vector<bool>{true, false, false, true, true}));
  EXPECT_TRUE(selector.UnusedEntries().empty()) << "kernels are not used in dump_mode 2";
}

TEST(SelectorTest, SetDumpCoversSubmodulesButNotNamePrefixes) {
  Selector selector(Config(R"({"dump_mode": 2})"));
  selector.SetDump("features");
  EXPECT_TRUE(selector.KernelSelected(Kernel("a/b-op1", "features")));
  EXPECT_TRUE(selector.KernelSelected(Kernel("a/b-op1", "features.3.conv")));
  EXPECT_FALSE(selector.KernelSelected(Kernel("a/b-op1", "features2")));
  EXPECT_FALSE(selector.KernelSelected(Kernel("a/b-op1", "classifier")));
  EXPECT_FALSE(selector.KernelSelected(Kernel("a/b-op1", "")));
  selector.SetDump("");
  EXPECT_TRUE(selector.KernelSelected(Kernel("a/b-op1", "classifier")));
  EXPECT_TRUE(selector.KernelSelected(Kernel("a/b-op1", "")));
}

TEST(SelectorTest, MarkKernelsUnderMarksSubmodulesAndKeepsEarlierMarks) {
  std::vector<KernelInfo> kernels = {Kernel("a-op0", "features.3"), Kernel("b-op1", "features2"),
                                     Kernel("c-op2", "classifier")};
  kernels[2].marked_for_dump = true;
  MarkKernelsUnder({"features"}, &kernels);
  EXPECT_TRUE(kernels[0].marked_for_dump);
  EXPECT_FALSE(kernels[1].marked_for_dump);
  EXPECT_TRUE(kernels[2].marked_for_dump);
}

TEST(SelectorTest, RankSelection) {
  Selector all(Config(R"({"support_device": []})"));
  EXPECT_TRUE(all.RankDumps(0));
  EXPECT_TRUE(all.RankDumps(77));
  Selector some(Config(R"({"support_device": [0, 2]})"));
  EXPECT_TRUE(some.RankDumps(0));
  EXPECT_FALSE(some.RankDumps(1));
  EXPECT_TRUE(some.RankDumps(2));
  EXPECT_FALSE(some.RankDumps(3));
}

TEST(SelectorTest, IterationSelection) {
  Selector selector(Config(R"({"iteration": "0|5-8"})"));
  EXPECT_TRUE(selector.IterationDumps(0));
  EXPECT_FALSE(selector.IterationDumps(1));
  EXPECT_TRUE(selector.IterationDumps(5));
  EXPECT_TRUE(selector.IterationDumps(8));
  EXPECT_FALSE(selector.IterationDumps(9));
}

TEST(SelectorTest, ExceptionModeDumpsEveryIterationAndOnlyInputs) {
  DumpConfig config = Config(R"({"iteration": "3", "input_output": 2})");
  config.op_debug_mode = 4;  // set directly: the selector forces modes by itself too
  Selector selector(config);
  EXPECT_TRUE(selector.IterationDumps(0));
  EXPECT_TRUE(selector.IterationDumps(1000));
  EXPECT_TRUE(selector.DumpInputs());
  EXPECT_FALSE(selector.DumpOutputs());
}

TEST(SelectorTest, InputOutputSelection) {
  Selector both(Config(R"({"input_output": 0})"));
  EXPECT_TRUE(both.DumpInputs());
  EXPECT_TRUE(both.DumpOutputs());
  Selector inputs(Config(R"({"input_output": 1})"));
  EXPECT_TRUE(inputs.DumpInputs());
  EXPECT_FALSE(inputs.DumpOutputs());
  Selector outputs(Config(R"({"input_output": 2})"));
  EXPECT_FALSE(outputs.DumpInputs());
  EXPECT_TRUE(outputs.DumpOutputs());
}

TEST(SelectorTest, OverflowModeForcesBothSlotsAndAllKernels) {
  DumpConfig config = Config(R"({"dump_mode": 1, "kernels": ["Softmax"], "input_output": 1})");
  config.op_debug_mode = 3;  // bypasses the parser's forcing on purpose
  Selector selector(config);
  EXPECT_TRUE(selector.DumpInputs());
  EXPECT_TRUE(selector.DumpOutputs());
  EXPECT_EQ(selector.SelectKernels(Graph()), std::vector<bool>(5, true));
  EXPECT_TRUE(selector.UnusedEntries().empty());
}

TEST(SelectorTest, ManyKernelsManyEntries) {
  std::string kernels = "[";
  for (int i = 0; i < 200; ++i) {
    kernels += (i ? ",\"" : "\"") + std::string("Default/k-op") + std::to_string(i * 2) + "\"";
  }
  kernels += "]";
  Selector selector(Config(R"({"dump_mode": 1, "kernels": )" + kernels + "}"));
  GraphInfo graph;
  for (int i = 0; i < 1000; ++i)
    graph.kernels.push_back(Kernel("Default/k-op" + std::to_string(i)));
  std::vector<bool> selected = selector.SelectKernels(graph);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(selected[i], i < 400 && i % 2 == 0) << i;
  EXPECT_TRUE(selector.UnusedEntries().empty());
}

}  // namespace
}  // namespace graphdump
