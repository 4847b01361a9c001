// Tests of the graph compiler, executor and trainer against a recording DumpSession double.
// Models come from examples/make_models.py (run with testing::Python()).
#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graphdump/config.h"
#include "graphdump/session.h"
#include "graphdump/torch/torch_model.h"
#include "graphdump/torch/trainer.h"
#include "testing/testing.h"

namespace graphdump {
namespace {

// Records what the executor hands over; wants every kernel.
class RecordingSession : public DumpSession {
 public:
  struct Done {
    std::string name;
    std::vector<TensorView> inputs, outputs;
  };
  Status OnGraphCompiled(const GraphInfo& graph) override {
    graph_ = graph;
    return Status::Ok();
  }
  uint32_t AddKernel(uint32_t, const KernelInfo& kernel) override {
    graph_.kernels.push_back(kernel);
    return graph_.kernels.back().index = static_cast<uint32_t>(graph_.kernels.size() - 1);
  }
  void UpdateKernels(uint32_t, const std::vector<KernelInfo>& kernels) override {
    for (size_t i = 0; i < kernels.size() && i < graph_.kernels.size(); ++i) {
      graph_.kernels[i].inputs = kernels[i].inputs;
      graph_.kernels[i].outputs = kernels[i].outputs;
      graph_.kernels[i].marked_for_dump = kernels[i].marked_for_dump;
    }
    ++updates_;
  }
  void UpdateAttributes(uint32_t, uint32_t, const std::map<std::string, std::string>&) override {}
  void AppendHyperparameters(const std::string&) override {}
  void BeginIteration() override {}
  void EndIteration() override {}
  bool IterationOpen() const override { return false; }
  void BeginStep(uint32_t) override { ++steps_; }
  uint64_t CurrentIteration() const override { return steps_ - 1; }
  bool StepDumps() const override { return true; }
  using DumpSession::Wants;
  bool Wants(uint32_t, uint32_t) const override { return true; }
  void OnKernelDone(const KernelInfo& k, const std::vector<TensorView>& in,
                    const std::vector<TensorView>& out) override {
    done_.push_back({k.full_name, in, out});
  }
  bool ReadsInput(const KernelInfo&, const TensorView&) override { return true; }
  void BeforeWrite(const void*) override {}
  void FinishReads() override {}
  bool ReadsQueued() const override { return false; }
  bool KeepsStatisticsAcrossSteps() const override { return false; }
  void ForgetAllStatistics() override {}
  void DeferReads(bool) override {}
  bool ReadInputNow(const KernelInfo&, const TensorView&) override { return false; }
  void ForgetStatistics(const void*) override {}
  void OnKernelFailed(const KernelInfo& k, const std::vector<TensorView>& in,
                      const std::string& error) override {
    failed_.push_back({k.full_name, in, {}});
    error_ = error;
  }
  bool WantsParameters() const override { return true; }
  void OnParameter(uint32_t, const std::string& name, const TensorView&) override {
    parameters_.push_back(name);
  }
  void OnConstant(uint32_t, uint32_t, const TensorView&) override { ++constants_; }
  void EndStep(uint32_t) override {}
  void SetDump(const std::string& path) override { set_dump_.push_back(path); }
  void OnRunFailed(const std::string&) override {}
  Status Close() override { return Status::Ok(); }
  DumpSummary Summary() const override { return {}; }
  const DumpConfig& config() const override { return config_; }

  GraphInfo graph_;
  std::vector<Done> done_, failed_;
  std::vector<std::string> parameters_, set_dump_;
  std::string error_;
  int steps_ = 0, constants_ = 0, updates_ = 0;
  DumpConfig config_;
};

// Generates the named models once per test program, into a directory removed when it ends.
std::string ModelPath(const std::string& name) {
  static testing::TempDir dir;
  const std::string path = dir.Sub(name + ".pt");
  if (!std::ifstream(path)) {
    auto r = testing::RunCommand(testing::Python() + " " + testing::SourceDir() +
                                 "/examples/make_models.py " + dir.path() + " " + name);
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
  return path;
}

at::Tensor Output(const c10::IValue& v) { return v.toTensor(); }

void ExpectMatchesForward(const std::string& name, std::vector<int64_t> shape) {
  torch::NoGradGuard no_grad;
  auto model = TorchModel::Load(ModelPath(name), nullptr);
  ASSERT_TRUE(model.ok()) << model.status().message();
  torch::manual_seed(0);
  at::Tensor x = at::randn(shape);
  auto ours = (*model)->Forward({x});
  ASSERT_TRUE(ours.ok()) << ours.status().message();
  at::Tensor reference = (*model)->module().forward({x}).toTensor();
  EXPECT_TRUE(at::equal(Output(*ours), reference)) << name;
}

TEST(ExecutorTest, MatchesModuleForwardBitForBit) {
  ExpectMatchesForward("ifloop", {2, 8});
  ExpectMatchesForward("alexnet", {1, 3, 64, 64});
  // resnet18 and mobilenet_v2 are covered end to end (tests/e2e/test_run_fidelity.py).
}

TEST(CompilerTest, FullNamesModulePathsAndSourceLines) {
  auto model = TorchModel::Load(ModelPath("alexnet"), nullptr);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const auto& kernels = (*model)->graph().kernels;
  ASSERT_FALSE(kernels.empty());
  EXPECT_EQ(kernels[0].full_name, "Default/features-Sequential/0-Conv2d/conv2d-op0");
  EXPECT_EQ(kernels[0].op_type, "conv2d");
  EXPECT_EQ(kernels[0].module_path, "features.0");
  ASSERT_FALSE(kernels[0].source_trace.empty());
  EXPECT_NE(kernels[0].source_trace[0].file.find("conv.py"), std::string::npos);
  EXPECT_EQ(kernels[0].attributes.at("stride"), "[4, 4]");
  std::map<std::string, int> seen;
  for (const auto& k : kernels) EXPECT_EQ(++seen[k.full_name], 1) << k.full_name;
}

TEST(CompilerTest, ScriptedUserLinesAreExact) {
  auto model = TorchModel::Load(ModelPath("ifloop"), nullptr);
  ASSERT_TRUE(model.ok()) << model.status().message();
  bool found = false;
  for (const auto& k : (*model)->graph().kernels) {
    if (k.op_type != "relu") continue;
    found = true;
    ASSERT_FALSE(k.source_trace.empty());
    EXPECT_NE(k.source_trace[0].file.find("make_models.py"), std::string::npos);
    EXPECT_NE(k.source_trace[0].code.find("torch.relu(h)"), std::string::npos);
  }
  EXPECT_TRUE(found);
}

TEST(ExecutorTest, FailingKernelNamesItsLineAndHandsItsInputs) {
  RecordingSession session;
  auto model = TorchModel::Load(ModelPath("failing"), &session);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto out = (*model)->Forward({at::randn({2, 8})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("matmul-op"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("make_models.py:"), std::string::npos);
  EXPECT_NE(out.status().message().find("torch.matmul(h, self.weight)"), std::string::npos);
  ASSERT_EQ(session.failed_.size(), 1u);
  EXPECT_EQ(session.failed_[0].inputs.size(), 2u);
}

TEST(ExecutorTest, DumpsEveryKernelWithOutputsOfTheRightShape) {
  RecordingSession session;
  auto model = TorchModel::Load(ModelPath("mlp"), &session);
  ASSERT_TRUE(model.ok()) << model.status().message();
  ASSERT_TRUE((*model)->SetDump("fc1").ok());
  EXPECT_FALSE((*model)->SetDump("nope").ok());
  auto out = (*model)->Forward({at::randn({2, 12})});
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(session.graph_.kernels.size(), 3u);
  EXPECT_EQ(session.graph_.kernels[2].outputs.at(0).shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(session.done_.size(), 3u);
  EXPECT_EQ(session.done_[0].name, "Default/fc1-Linear/linear-op0");
  EXPECT_EQ(session.done_[2].outputs.at(0).shape, (std::vector<int64_t>{2, 3}));
  // set_dump marks fc1's kernel (and only it) in the graph handed to the session.
  EXPECT_TRUE(session.graph_.kernels[0].marked_for_dump);
  EXPECT_FALSE(session.graph_.kernels[2].marked_for_dump);
  EXPECT_EQ(session.parameters_.size(), 4u);
}

// Counts the ATen operators called on this thread while it lives, by name.
class OperatorCounter {
 public:
  OperatorCounter() {
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback([](const at::RecordFunction& fn)
                                       -> std::unique_ptr<at::ObserverContext> {
          Counts()[fn.name()]++;
          return nullptr;
        }).scopes({at::RecordScope::FUNCTION}));
  }
  ~OperatorCounter() { at::removeCallback(handle_); }
  static std::map<std::string, int>& Counts() {
    static thread_local std::map<std::string, int> counts;
    return counts;
  }
  int operator[](const std::string& name) const {
    auto it = Counts().find(name);
    return it == Counts().end() ? 0 : it->second;
  }

 private:
  at::CallbackHandle handle_;
};

TEST(TorchModelTest, FirstStepRunsTheGraphOnceAndCopiesNothing) {
  // A configuration that selects no kernel: registering the graph must add no work to the
  // first step (it once ran a whole probe forward on a deep copy of the module).
  testing::TempDir dir;
  StatusOr<ParsedConfig> parsed =
      ParseConfig(R"({"common_dump_settings": {"dump_mode": 1, "path": ")" + dir.path() +
                      R"(", "net_name": "Net", "iteration": "all", "input_output": 0,
          "kernels": ["no_such_kernel"], "support_device": [0]}})",
                  "test.json", "");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  SessionOptions options;
  options.config = parsed->config;
  auto session = DumpSession::Open(std::move(options));
  ASSERT_TRUE(session.ok() && *session) << session.status().message();
  auto model = TorchModel::Load(ModelPath("mlp"), session->get());
  ASSERT_TRUE(model.ok()) << model.status().message();
  torch::NoGradGuard no_grad;
  at::Tensor x = at::randn({2, 12});
  OperatorCounter counter;
  ASSERT_TRUE((*model)->Forward({x}).ok());
  EXPECT_EQ(counter["aten::linear"], 2);  // fc1 and fc2, once each
  EXPECT_EQ(counter["aten::relu"], 1);
  EXPECT_EQ(counter["aten::clone"], 0);  // no copy of the module or its parameters
  // The shapes learned in that step reach the graph files.
  ASSERT_TRUE((*session)->Close().ok());
  const std::string ir =
      testing::ReadFile(dir.Sub("rank_0/graphs/ms_output_trace_code_graph_0.ir"));
  EXPECT_NE(ir.find("-> (<Tensor[float32], (2, 3)>)"), std::string::npos) << ir;
}

TEST(TrainerTest, BackwardAndOptimizerKernelsAreDumped) {
  RecordingSession session;
  auto model = TorchModel::Load(ModelPath("mlp"), &session);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto trainer = Trainer::Create(model->get(), TrainerOptions{});
  ASSERT_TRUE(trainer.ok()) << trainer.status().message();
  at::Tensor x = at::randn({4, 12});
  at::Tensor y = at::tensor({0, 1, 2, 1}, at::kLong);
  for (int i = 0; i < 2; ++i) {
    auto loss = (*trainer)->Step(x, y);
    ASSERT_TRUE(loss.ok()) << loss.status().message();
  }
  int backward = 0, accumulate = 0, update = 0;
  for (const auto& d : session.done_) {
    if (d.name.rfind("Gradients/", 0) == 0) ++backward;
    if (d.name.find("AccumulateGrad") != std::string::npos) ++accumulate;
    if (d.name.find("optimizer-SGD") != std::string::npos) ++update;
  }
  EXPECT_GT(backward, 0);
  EXPECT_EQ(accumulate, 8);  // 4 parameters x 2 steps
  EXPECT_EQ(update, 8);
  // Backward kernels are registered once, not once per step.
  std::map<std::string, int> names;
  for (const auto& k : session.graph_.kernels) EXPECT_EQ(++names[k.full_name], 1) << k.full_name;
}

}  // namespace
}  // namespace graphdump
