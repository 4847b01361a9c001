#include "graphdump/session.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <regex>
#include <thread>

#include "graphdump/internal/async_writer.h"
#include "graphdump/synthetic.h"
#include "graphdump_graph.pb.h"
#include "testing/fault_file_system.h"
#include "testing/testing.h"
#include "session_test_util.h"

namespace graphdump {
namespace {

using testing::ListFilesRecursive;
using testing::ReadFile;
using testing::TempDir;

TEST(SessionTest, SyncAndAsyncWriteTheSameFilesAndBytes) {
  TempDir sync_dir, async_dir;
  const std::string full = R"(, "saved_data": "full", "statistic_category": ["max", "min", "avg",
      "count", "negative zero count", "positive zero count", "nan count", "negative inf count",
      "positive inf count", "zero count", "md5", "l2norm"])";
  RunSynthetic(Parse(ConfigJson(sync_dir.path(), full)));
  RunSynthetic(Parse(ConfigJson(async_dir.path(), full, R"({"enable": false})")));

  auto sync_files = ListFilesRecursive(sync_dir.path());
  auto async_files = ListFilesRecursive(async_dir.path());
  ASSERT_EQ(WithoutTimestamps(sync_files), WithoutTimestamps(async_files));
  ASSERT_EQ(sync_files.size(), 3u * 30 + 7);  // 29 tensors + statistic.csv per iteration; 7 others
  std::sort(sync_files.begin(), sync_files.end(),
            [](auto& a, auto& b) { return WithoutTimestamps({a})[0] < WithoutTimestamps({b})[0]; });
  std::sort(async_files.begin(), async_files.end(),
            [](auto& a, auto& b) { return WithoutTimestamps({a})[0] < WithoutTimestamps({b})[0]; });
  for (size_t i = 0; i < sync_files.size(); ++i) {
    std::string a = ReadFile(sync_dir.Sub(sync_files[i]));
    std::string b = ReadFile(async_dir.Sub(async_files[i]));
    if (sync_files[i].find("statistic.csv") != std::string::npos) {
      EXPECT_EQ(StatisticWithoutTimestamps(a), StatisticWithoutTimestamps(b)) << sync_files[i];
    } else if (sync_files[i].find(".dump_metadata") == std::string::npos) {
      EXPECT_EQ(a, b) << sync_files[i];
    }
  }
}

TEST(SessionTest, WritesMindSporeLayout) {
  TempDir dir;
  RunSynthetic(Parse(ConfigJson(dir.path(), R"(, "iteration": "0|2")")));
  const std::string rank = dir.Sub("rank_0");
  auto files = ListFilesRecursive(rank);

  EXPECT_EQ(ReadFile(rank + "/.dump_metadata/data_dump.json"),
            ConfigJson(dir.path(), R"(, "iteration": "0|2")"));
  EXPECT_NE(ReadFile(rank + "/.dump_metadata/config.json").find("\"device_target\": \"cpu\""),
            std::string::npos);
  // Iterations 0 and 2 only; 9 kernels with their inputs and outputs, 4 parameters.
  EXPECT_EQ(Matching(files, R"(^Net/0/1/)").size(), 0u);
  auto it0 = Matching(files, R"(^Net/0/0/.*\.npy$)");
  EXPECT_EQ(it0.size(), 16u + 9 + 4);  // inputs, outputs, parameters
  EXPECT_EQ(
      Matching(
          files,
          R"(^Net/0/0/MatMul\.Default_fc1-Dense_MatMul-op0\.0\.0\.\d{16}\.input\.1\.DefaultFormat\.float32\.npy$)")
          .size(),
      1u);
  EXPECT_EQ(
      Matching(
          files,
          R"(^Net/0/0/Cast\.Default_Cast-op5\.0\.0\.\d{16}\.output\.0\.DefaultFormat\.float16\.npy$)")
          .size(),
      1u);
  EXPECT_EQ(
      Matching(
          files,
          R"(^Net/0/2/Parameter\.fc1_weight\.0\.0\.\d{16}\.output\.0\.DefaultFormat\.float32\.npy$)")
          .size(),
      1u);
  EXPECT_EQ(
      Matching(
          files,
          R"(^Net/0/constants/Parameter\.data-0\.0\.0\.\d{16}\.output\.0\.DefaultFormat\.float32\.npy$)")
          .size(),
      1u);
  // saved_data "tensor": no statistic.csv.
  EXPECT_EQ(Matching(files, "statistic.csv").size(), 0u);

  EXPECT_EQ(ReadFile(rank + "/execution_order/ms_global_execution_order_graph_0.csv"), "0\n1\n2\n");
  const std::string order = ReadFile(rank + "/execution_order/ms_execution_order_graph_0.csv");
  EXPECT_EQ(order.rfind("NodeExecutionOrder-FullNameWithScope\nDefault/fc1-Dense/MatMul-op0\n", 0),
            0u);
  const std::string ir = ReadFile(rank + "/graphs/ms_output_trace_code_graph_0.ir");
  EXPECT_NE(ir.find("# Fullname with scope: (Default/fc2-Dense/MatMul-op3)\n"
                    "      # In file synthetic_mlp.py(14)/x = self.fc2(x)/"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("<Tensor[float32], (4, 8)>"), std::string::npos);
  proto::GraphProto graph;
  ASSERT_TRUE(graph.ParseFromString(ReadFile(rank + "/graphs/ms_output_trace_code_graph_0.pb")));
  ASSERT_EQ(graph.kernels_size(), 9);
  EXPECT_EQ(graph.kernels(5).full_name(), "Default/Cast-op5");
  EXPECT_EQ(graph.kernels(5).outputs(0).dtype(), "float16");
  EXPECT_EQ(graph.kernels(3).source_trace(0).line(), 14);

  struct stat st;
  ASSERT_EQ(::stat(dir.Sub("rank_0/Net/0/0").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((dir.Sub("rank_0/") + it0[0]).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0400u);
}

TEST(SessionTest, UpdatedAttributesReachTheGraphFilesAtTheIterationsEnd) {
  TempDir dir;
  auto session = OpenSession(Parse(ConfigJson(dir.path())));
  ASSERT_TRUE(session->OnGraphCompiled(NamedKernels({"Default/a-op0", "Default/b-op1"})).ok());
  const std::string ir_path = dir.Sub("rank_0/graphs/ms_output_trace_code_graph_0.ir");
  for (const std::string group : {"2", "5"}) {
    session->BeginIteration();
    session->UpdateAttributes(0, 1, {{"optimizer", "1"}, {"param_group", group}});
    session->UpdateAttributes(0, 9, {{"param_group", "3"}});  // no such kernel: left alone
    session->UpdateAttributes(7, 0, {{"param_group", "4"}});  // no such graph: left alone
    const std::string attributes = "{optimizer: 1, param_group: " + group + "}\n";
    // Rewritten when the iteration ends, not before.
    EXPECT_EQ(ReadFile(ir_path).find(attributes), std::string::npos);
    session->EndIteration();
    const std::string ir = ReadFile(ir_path);
    const size_t b = ir.find(attributes);
    ASSERT_NE(b, std::string::npos) << ir;
    EXPECT_LT(b, ir.find("# Fullname with scope: (Default/b-op1)"));
    EXPECT_GT(b, ir.find("# Fullname with scope: (Default/a-op0)"));
    EXPECT_EQ(ir.find("param_group: 3"), std::string::npos);
    EXPECT_EQ(ir.find("param_group: 4"), std::string::npos);
  }
  ASSERT_TRUE(session->Close().ok());
}

TEST(SessionTest, HyperparametersAreAppendedNotRewritten) {
  TempDir dir;
  auto session = OpenSession(Parse(ConfigJson(dir.path())));
  ASSERT_TRUE(session->OnGraphCompiled(NamedKernels({"Default/a-op0"})).ok());
  const std::string path = dir.Sub("rank_0/graphs/hyperparameters.jsonl");
  const std::string first = R"({"iteration":0,"optimizer":0,"param_group":0,"lr":0.5})" "\n";
  const std::string second = R"({"iteration":1,"optimizer":0,"param_group":0,"lr":0.25})" "\n";
  session->BeginIteration();
  session->AppendHyperparameters(first);
  session->EndIteration();
  session->BeginIteration();
  session->AppendHyperparameters("");  // nothing changed: nothing written
  session->AppendHyperparameters(second);
  session->EndIteration();
  EXPECT_EQ(ReadFile(path), first + second);
  ASSERT_TRUE(session->Close().ok());
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0400u);
}

TEST(SessionTest, DumpedValuesAreTheKernelsValues) {
  TempDir dir;
  RunSynthetic(Parse(ConfigJson(dir.path(), R"(, "iteration": "1")")));
  // fc1's MatMul output equals input0 @ input1 computed by NumPy from the dumped inputs.
  auto r = testing::RunPython(R"(
import glob, sys, numpy as np
d = sys.argv[1]
f = lambda p: np.load(glob.glob(d + '/MatMul.Default_fc1-Dense_MatMul-op0.*.' + p + '.*.npy')[0])
x, w, y = f('input.0'), f('input.1'), f('output.0')
print(x.shape, w.shape, y.shape, y.dtype, np.allclose(x @ w, y, rtol=1e-5, atol=1e-5))
h = np.load(glob.glob(d + '/Cast.Default_Cast-op5.*.output.0.*.npy')[0])
o = np.load(glob.glob(d + '/Cast.Default_Cast-op5.*.input.0.*.npy')[0])
print(h.dtype, np.array_equal(o.astype(np.float16), h))
)",
                              {dir.Sub("rank_0/Net/0/1")});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "(4, 8) (8, 16) (4, 16) float32 True\nfloat16 True\n");
}

TEST(SessionTest, WithReportedWritesAsyncWritesWithoutACopyAndBeforeWriteWaits) {
  TempDir dir;
  SessionOptions options;
  options.config = Parse(ConfigJson(dir.path(), "", R"({"enable": false})"));
  options.host_reports_writes = true;
  options.writer_threads = 1;
  auto session = std::move(DumpSession::Open(std::move(options))).value();
  GraphInfo graph;
  KernelInfo k;
  k.full_name = "Default/scale-op0";
  graph.kernels = {k};
  ASSERT_TRUE(session->OnGraphCompiled(graph).ok());
  HostTensor t{std::make_shared<std::vector<float>>(size_t{1} << 20, 1.5f)};
  session->BeginStep(0);
  k.index = session->AddKernel(0, k);
  session->OnKernelDone(k, {}, {t.View()});
  // The host is about to write the tensor in place: the file must still get 1.5.
  session->BeforeWrite(t.data.get());
  std::fill(t.data->begin(), t.data->end(), -7.0f);
  session->EndStep(0);
  ASSERT_TRUE(session->Close().ok());
  auto r = testing::RunPython(R"(
import glob, sys, numpy as np
a = np.load(glob.glob(sys.argv[1] + '/scale.*.output.0.*.npy')[0])
print(a.shape, np.unique(a))
)",
                              {dir.Sub("rank_0/Net/0/0")});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "(1048576,) [1.5]\n");
}

TEST(SessionTest, HostDrivenIterationsSpanSeveralGraphSteps) {
  TempDir dir;
  auto session = OpenSession(Parse(ConfigJson(dir.path())));
  for (uint32_t id : {0u, 1u}) {
    GraphInfo graph;
    graph.graph_id = id;
    KernelInfo k;
    k.full_name = "Default/k-op0";
    graph.kernels = {k};
    ASSERT_TRUE(session->OnGraphCompiled(graph).ok());
  }
  HostTensor t{std::make_shared<std::vector<float>>(4, 1.0f)};
  for (int iteration = 0; iteration < 2; ++iteration) {
    session->BeginIteration();
    EXPECT_TRUE(session->IterationOpen());
    for (uint32_t id : {0u, 1u, 0u}) {  // graph 0 twice in one iteration
      session->BeginStep(id);
      EXPECT_EQ(session->CurrentIteration(), static_cast<uint64_t>(iteration));
      KernelInfo k;
      k.graph_id = id;
      k.full_name = "Default/k-op0";
      session->OnKernelDone(k, {}, {t.View()});
      session->EndStep(id);
    }
    session->EndIteration();
  }
  ASSERT_TRUE(session->Close().ok());
  EXPECT_EQ(ReadFile(dir.Sub("rank_0/execution_order/ms_global_execution_order_graph_0.csv")),
            "0\n0\n1\n1\n");
  EXPECT_EQ(ReadFile(dir.Sub("rank_0/execution_order/ms_global_execution_order_graph_1.csv")),
            "0\n1\n");
  auto files = ListFilesRecursive(dir.Sub("rank_0"));
  EXPECT_EQ(Matching(files, "^Net/0/1/k\\..*output").size(), 2u);  // both calls
  EXPECT_EQ(Matching(files, "^Net/1/1/k\\..*output").size(), 1u);
  EXPECT_EQ(Matching(files, "^Net/./2/").size(), 0u);
}

TEST(SessionTest, InitialIterationShiftsTheCounter) {
  TempDir dir;
  RunSynthetic(Parse(ConfigJson(dir.path(), R"(, "iteration": "11", "initial_iteration": 10)")));
  auto files = ListFilesRecursive(dir.Sub("rank_0"));
  EXPECT_GT(Matching(files, "^Net/0/11/").size(), 0u);
  EXPECT_EQ(Matching(files, "^Net/0/1[02]/").size(), 0u);
  EXPECT_EQ(ReadFile(dir.Sub("rank_0/execution_order/ms_global_execution_order_graph_0.csv")),
            "10\n11\n12\n");
}

TEST(SessionTest, RankOutsideSupportDeviceDumpsNothing) {
  TempDir dir;
  SessionOptions options;
  options.config = Parse(ConfigJson(dir.path(), R"(, "support_device": [1])"));
  options.rank = 0;
  auto session = DumpSession::Open(options);
  ASSERT_TRUE(session.ok());
  EXPECT_EQ(*session, nullptr);
  options.rank = 1;
  session = DumpSession::Open(options);
  ASSERT_TRUE(session.ok() && *session);
  EXPECT_EQ((*session)->Summary().root, dir.Sub("rank_1"));
}

TEST(SessionTest, KernelSelectionByTypeRegexAndSetDump) {
  TempDir dir;
  std::vector<std::string> log;
  RunSynthetic(
      Parse(ConfigJson(dir.path(), R"json(, "dump_mode": 1, "iteration": "0", "input_output": 2,
      "kernels": ["relu", "name-regex(Default/fc2-Dense/.+)", "Default/Cast-op5", "NoSuchOp"])json")),
      {}, &log);
  auto files = Matching(ListFilesRecursive(dir.Sub("rank_0/Net/0/0")), R"(\.npy$)");
  files = Matching(files, "^(?!Parameter)");
  EXPECT_EQ(WithoutTimestamps(files),
            (std::vector<std::string>{
                "BiasAdd.Default_fc2-Dense_BiasAdd-op4.0.0.T.output.0.DefaultFormat.float32.npy",
                "Cast.Default_Cast-op5.0.0.T.output.0.DefaultFormat.float16.npy",
                "MatMul.Default_fc2-Dense_MatMul-op3.0.0.T.output.0.DefaultFormat.float32.npy",
                "ReLU.Default_relu-ReLU_ReLU-op2.0.0.T.output.0.DefaultFormat.float32.npy"}));
  EXPECT_NE(std::find(log.begin(), log.end(), "unused kernel in config: NoSuchOp"), log.end());

  TempDir marked;
  auto session = OpenSession(
      Parse(ConfigJson(marked.path(), R"(, "dump_mode": 2, "iteration": "0", "input_output": 2)")));
  session->SetDump("fc2");
  ASSERT_TRUE(RunSyntheticGraph(*session, {}).ok());
  ASSERT_TRUE(session->Close().ok());
  files = Matching(ListFilesRecursive(marked.Sub("rank_0/Net/0/0")), R"(^(?!Parameter).*\.npy$)");
  EXPECT_EQ(files.size(), 3u);  // fc2's MatMul, BiasAdd and the MatMulGrad under Gradients/
  EXPECT_EQ(Matching(files, "fc2").size(), 3u);
}

// A tensor dumped again in the same step with the same bytes (same origin and version: the
// previous kernel's output read as this kernel's input) is a second name for the first file, in
// both modes and with statistics too; new bytes (a new version) and a new step get their own.
class LinkedFilesTest : public ::testing::TestWithParam<std::tuple<bool, const char*>> {};

TEST_P(LinkedFilesTest, TheSameBytesInOneStepAreOneFile) {
  const auto [asynchronous, saved_data] = GetParam();
  TempDir dir;
  auto session = OpenSession(Parse(ConfigJson(
      dir.path(), std::string(R"(, "saved_data": ")") + saved_data + R"(", "input_output": 0,
      "statistic_category": ["max", "min"])",
      asynchronous ? R"({"enable": false})" : R"({"enable": true})")));
  GraphInfo graph = SyntheticGraph({});
  ASSERT_TRUE(session->OnGraphCompiled(graph).ok());
  std::vector<float> first(3000, 1.5f), second(3000, -2.0f);
  auto storage = std::make_shared<int>(0);
  auto with_origin = [&](std::vector<float>& data, uint64_t version) {
    return FloatsWithOrigin(data, storage, version);
  };
  KernelInfo k0 = graph.kernels[0], k1 = graph.kernels[1], k2 = graph.kernels[2];
  for (int step = 0; step < 2; ++step) {
    session->BeginStep(0);
    session->OnKernelDone(k0, {}, {with_origin(first, 1)});
    session->OnKernelDone(k1, {with_origin(first, 1)}, {});   // the same bytes: linked
    session->OnKernelDone(k2, {with_origin(second, 2)}, {});  // written since: its own file
    session->EndStep(0);
  }
  ASSERT_TRUE(session->Close().ok());
  EXPECT_EQ(session->Summary().files, 6u);
  auto r = testing::RunPython(R"(
import glob, os, sys, numpy as np
inodes = []
for step in ('0', '1'):
    d = os.path.join(sys.argv[1], step)
    one = lambda k: glob.glob(d + '/*.' + k + '.*.npy')
    files = one('output.0') + one('input.0')
    assert len(files) == 3, files
    out, = [f for f in files if '.output.0.' in f]
    ins = sorted((f for f in files if '.input.0.' in f), key=lambda f: np.load(f)[0])
    print(step, [float(np.load(f)[0]) for f in [out] + ins],
          os.stat(out).st_ino == os.stat(ins[1]).st_ino,
          os.stat(out).st_ino == os.stat(ins[0]).st_ino, os.stat(out).st_nlink)
    inodes.append(os.stat(out).st_ino)
    if os.path.exists(d + '/statistic.csv'):
        print(sorted(l.split(',')[-3] for l in open(d + '/statistic.csv').read().splitlines()[1:]))
print('steps share a file:', inodes[0] == inodes[1])
)",
                              {dir.Sub("rank_0/Net/0")});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string rows = std::string(saved_data) == "full" ? "['-2', '1.5', '1.5']\n" : "";
  EXPECT_EQ(r.output, "0 [1.5, -2.0, 1.5] True False 2\n" + rows +
                          "1 [1.5, -2.0, 1.5] True False 2\n" + rows +
                          "steps share a file: False\n");
}

INSTANTIATE_TEST_SUITE_P(Modes, LinkedFilesTest,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Values("tensor", "full")));

TEST(SessionTest, OverflowModeDumpsOnlyOverflowingKernels) {
  TempDir dir;
  SyntheticOptions options;
  options.input_scale = 1e5f;  // the float16 cast of fc2's output overflows
  RunSynthetic(Parse(ConfigJson(
                   dir.path(), R"(, "op_debug_mode": 3, "overflow_number": 2, "input_output": 2)")),
               options);
  auto files = Matching(ListFilesRecursive(dir.Sub("rank_0/Net")), R"(\.npy$)");
  files = Matching(files, "^(?!0/constants)");
  // Two overflowing kernels (overflow_number) in iterations 0 and 1, inputs and outputs both.
  EXPECT_EQ(WithoutTimestamps(files),
            (std::vector<std::string>{
                "0/0/Cast.Default_Cast-op5.0.0.T.input.0.DefaultFormat.float32.npy",
                "0/0/Cast.Default_Cast-op5.0.0.T.output.0.DefaultFormat.float16.npy",
                "0/1/Cast.Default_Cast-op5.0.0.T.input.0.DefaultFormat.float32.npy",
                "0/1/Cast.Default_Cast-op5.0.0.T.output.0.DefaultFormat.float16.npy"}));
}

TEST(SessionTest, ExceptionModeDumpsTheFailedKernelsInputs) {
  TempDir dir;
  std::vector<std::string> log;
  auto session =
      OpenSession(Parse(ConfigJson(dir.path(), R"(, "op_debug_mode": 4, "iteration": "5")")), &log);
  GraphInfo graph = SyntheticGraph({});
  ASSERT_TRUE(session->OnGraphCompiled(graph).ok());
  session->BeginStep(0);
  KernelInfo k = graph.kernels[3];
  k.index = 3;
  EXPECT_FALSE(session->Wants(k));
  std::vector<float> a(6, 1.5f), b(3, -2.0f);
  TensorView va = testing::MakeView(DType::kFloat32, {2, 3}, {}, a.data());
  TensorView vb = testing::MakeView(DType::kFloat32, {3}, {}, b.data());
  session->OnKernelFailed(k, {va, vb}, "shape mismatch");
  session->EndStep(0);
  ASSERT_TRUE(session->Close().ok());
  auto files = ListFilesRecursive(dir.Sub("rank_0/Net/0/0"));
  EXPECT_EQ(WithoutTimestamps(files),
            (std::vector<std::string>{
                "MatMul.Default_fc2-Dense_MatMul-op3.0.0.T.input.0.DefaultFormat.float32.npy",
                "MatMul.Default_fc2-Dense_MatMul-op3.0.0.T.input.1.DefaultFormat.float32.npy"}));
  EXPECT_NE(log[0].find("Default/fc2-Dense/MatMul-op3 failed"), std::string::npos);
}

TEST(SessionTest, SampleModeKeepsTheFirstElements) {
  TempDir dir;
  RunSynthetic(Parse(ConfigJson(dir.path(), R"(, "iteration": "0")",
                                R"({"enable": true, "sample_mode": 1, "sample_num": 5})")));
  auto r = testing::RunPython(R"(
import glob, sys, numpy as np
d = sys.argv[1]
x = np.load(glob.glob(d + '/MatMul.Default_fc1-Dense_MatMul-op0.*.input.0.*.npy')[0])
w = np.load(glob.glob(d + '/MatMul.Default_fc1-Dense_MatMul-op0.*.input.1.*.npy')[0])
b = np.load(glob.glob(d + '/Parameter.fc2_bias.*.npy')[0])
print(x.shape, w.shape, b.shape)
)",
                              {dir.Sub("rank_0/Net/0/0")});
  EXPECT_EQ(r.output, "(5,) (5,) (4,)\n");
}

TEST(SessionTest, SaveKernelArgsWritesJson) {
  TempDir dir;
  RunSynthetic(Parse(ConfigJson(dir.path(), R"(, "iteration": "0")",
                                R"({"enable": true, "save_kernel_args": true})")));
  EXPECT_EQ(ReadFile(dir.Sub("rank_0/Net/0/0/MatMul.Default_fc1-Dense_MatMul-op0.json")),
            "{\n    \"transpose_a\": \"False\",\n    \"transpose_b\": \"False\"\n}\n");
}

TEST(SessionTest, AnEntryIsUsedOnlyWhenAKernelItSelectedWasDumped) {
  // Three kernels: "ran" is dumped; "branch" is in the graph but never runs (a branch not
  // taken); "late" runs only in iteration 1, which is not dumped.
  TempDir dir;
  std::vector<std::string> log;
  auto session = OpenSession(Parse(ConfigJson(dir.path(), R"json(, "dump_mode": 1, "iteration": "0",
          "kernels": ["Default/Ran-op0", "branch", "name-regex(.*Late.*)"])json")),
                             &log);
  GraphInfo graph = NamedKernels({"Default/Ran-op0", "Default/Branch-op1", "Default/Late-op2"});
  ASSERT_TRUE(session->OnGraphCompiled(graph).ok());
  std::vector<int32_t> v = {1};
  for (uint32_t step = 0; step < 2; ++step) {
    session->BeginStep(0);
    const KernelInfo& k = graph.kernels[step == 0 ? 0 : 2];
    if (session->Wants(k)) {
      session->OnKernelDone(k, {}, {testing::MakeView(DType::kInt32, {1}, {}, v.data())});
    }
    session->EndStep(0);
  }
  ASSERT_TRUE(session->Close().ok());
  EXPECT_EQ(session->Summary().unused_kernel_entries,
            (std::vector<std::string>{"branch", "name-regex(.*Late.*)"}));
  EXPECT_EQ(std::count(log.begin(), log.end(), "unused kernel in config: branch"), 1);
}

TEST(SessionTest, ViewsKeepTheirSlotsInNpyAndBinDumps) {
  // Outputs 1 and 2 of a kernel whose output 0 does not exist (an undefined gradient).
  for (const char* format : {"npy", "bin"}) {
    TempDir dir;
    auto session = OpenSession(Parse(ConfigJson(
        dir.path(), std::string(R"(, "saved_data": "full", "file_format": ")") + format + "\"")));
    GraphInfo graph;
    KernelInfo k;
    k.full_name = "Gradients/Default/conv-Conv2d/ConvolutionBackward0-op0";
    graph.kernels.push_back(k);
    ASSERT_TRUE(session->OnGraphCompiled(graph).ok());
    session->BeginStep(0);
    std::vector<float> weight = {1, 2}, bias = {3};
    std::vector<TensorView> outputs = {testing::MakeView(DType::kFloat32, {2}, {}, weight.data()),
                                       testing::MakeView(DType::kFloat32, {1}, {}, bias.data())};
    outputs[0].slot = 1;
    outputs[1].slot = 2;
    session->OnKernelDone(graph.kernels[0], {}, outputs);
    session->EndStep(0);
    ASSERT_TRUE(session->Close().ok());
    std::vector<std::string> files = WithoutTimestamps(
        Matching(ListFilesRecursive(dir.Sub("rank_0/Net/0/0")), "^ConvolutionBackward0"));
    const std::string base =
        "ConvolutionBackward0.Gradients_Default_conv-Conv2d_ConvolutionBackward0-op0.0.0.T";
    if (std::string(format) == "npy") {
      EXPECT_EQ(files, (std::vector<std::string>{base + ".output.1.DefaultFormat.float32.npy",
                                                 base + ".output.2.DefaultFormat.float32.npy"}));
    } else {
      // One dump file, its name ending in the timestamp; the slots inside: ascend tests.
      ASSERT_EQ(files.size(), 1u);
      EXPECT_EQ(files[0].rfind(base.substr(0, base.size() - 1), 0), 0u) << files[0];
    }
    const std::string csv = ReadFile(dir.Sub("rank_0/Net/0/0/statistic.csv"));
    EXPECT_NE(csv.find(",output,1,8,float32,\"(2)\","), std::string::npos) << csv;
    EXPECT_NE(csv.find(",output,2,4,float32,\"(1)\","), std::string::npos) << csv;
  }
}

// A graph with one kernel of the given name, dumped once with a small tensor.
std::vector<std::string> DumpKernelNamed(const std::string& root, const std::string& full_name) {
  auto session = OpenSession(Parse(ConfigJson(root)));
  GraphInfo graph;
  KernelInfo k;
  k.full_name = full_name;
  graph.kernels.push_back(k);
  EXPECT_TRUE(session->OnGraphCompiled(graph).ok());
  session->BeginStep(0);
  k.index = 0;
  std::vector<int32_t> v = {1, 2, 3};
  session->OnKernelDone(k, {}, {testing::MakeView(DType::kInt32, {3}, {}, v.data())});
  session->EndStep(0);
  EXPECT_TRUE(session->Close().ok());
  return ListFilesRecursive(root);
}

TEST(SessionTest, LongNamesGoThroughMappingCsv) {
  TempDir dir;
  const std::string name = "Default/" + std::string(300, 'a') + "/MatMul-op7";
  auto files = DumpKernelNamed(dir.path(), name);
  EXPECT_EQ(Matching(files, R"(^rank_0/Net/0/0/0\.npy$)").size(), 1u);
  const std::string mapping = ReadFile(dir.Sub("rank_0/Net/0/0/mapping.csv"));
  EXPECT_TRUE(std::regex_match(
      mapping,
      std::regex(
          R"(0\.npy,MatMul\.Default_a{300}_MatMul-op7\.0\.0\.\d{16}\.output\.0\.DefaultFormat\.int32\.npy\n)")))
      << mapping;
}

TEST(SessionTest, HostileKernelNamesStayInsideTheDumpRoot) {
  TempDir dir;
  const std::string root = dir.Sub("root");
  for (const std::string& name :
       {std::string("../../x"), std::string("a/../../../../etc/passwd-op1"),
        std::string("..\\..\\evil"), std::string("/abs/..")}) {
    TempDir fresh;
    auto files = DumpKernelNamed(fresh.Sub("root"), name);
    auto outside = ListFilesRecursive(fresh.path());
    for (const std::string& f : outside) EXPECT_EQ(f.rfind("root/rank_0/", 0), 0u) << f;
    EXPECT_EQ(Matching(files, R"(Net/0/0/.*\.output\.0\.DefaultFormat\.int32\.npy$)").size(), 1u)
        << name;
  }
}

TEST(AsyncWriterTest, BoundsTheBytesInFlightAndRunsEveryJob) {
  std::atomic<int> ran{0};
  {
    AsyncWriter writer(2, 1000);
    for (int i = 0; i < 50; ++i) {
      writer.Submit(300, [&] {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        ++ran;
      });
    }
    writer.Drain();
    EXPECT_EQ(ran.load(), 50);
    EXPECT_LE(writer.PeakBytes(), 900u);
    writer.Submit(5000, [&] { ++ran; });  // larger than the budget: admitted alone
  }
  EXPECT_EQ(ran.load(), 51);
}

}  // namespace
}  // namespace graphdump
