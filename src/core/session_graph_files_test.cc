// The graph files written on the session's own thread (SessionOptions::graph_files_in_background)
// hold what the host's thread writes itself, and their failures reach Close.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "graphdump/internal/helper_threads.h"
#include "graphdump/session.h"
#include "session_test_util.h"
#include "testing/fault_file_system.h"
#include "testing/testing.h"

namespace graphdump {
namespace {

using testing::ReadFile;
using testing::TempDir;

// Which threads created each graph file (the .ir, .pb and execution order files).
class ThreadRecordingFileSystem : public testing::FaultFileSystem {
 public:
  ThreadRecordingFileSystem() : FaultFileSystem(NewPosixFileSystem()) {}
  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    if (path.find("ms_output_trace_code_graph_") != std::string::npos ||
        path.find("ms_execution_order_graph_") != std::string::npos) {
      std::lock_guard<std::mutex> lock(mutex_);
      graph_file_threads_.push_back(std::this_thread::get_id());
    }
    return FaultFileSystem::NewWritableFile(path);
  }
  std::vector<std::thread::id> graph_file_threads() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return graph_file_threads_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::thread::id> graph_file_threads_;
};

struct GraphRun {
  std::map<std::string, std::string> files;  // graph file name -> bytes, after Close
  std::vector<std::thread::id> writers;      // the thread of each graph file write
};

// A host's run whose graph grows and changes: kernels found in each of three iterations (as an
// eager capture finds them), an update kernel's attributes changed between iterations, the
// files written at a step's end and at the iteration's.
GraphRun RunGrowingGraph(const std::string& dir, bool background) {
  auto fs = std::make_shared<ThreadRecordingFileSystem>();
  SessionOptions options;
  options.config = Parse(ConfigJson(dir));
  options.file_system = fs;
  options.graph_files_in_background = background;
  StatusOr<std::unique_ptr<DumpSession>> opened = DumpSession::Open(std::move(options));
  EXPECT_TRUE(opened.ok()) << opened.status().message();
  DumpSession& session = **opened;
  EXPECT_TRUE(session.OnGraphCompiled(NamedKernels({"Default/x-op0"})).ok());
  for (int step = 0; step < 3; ++step) {
    session.BeginIteration();
    session.BeginStep(0);
    for (int k = 0; k < 40; ++k) {
      KernelInfo kernel;
      kernel.full_name = "Default/layer" + std::to_string(step) + "/add-op" + std::to_string(k);
      kernel.source_trace = {{"model.py", 10 + k, 4, "y = x + b"}};
      kernel.outputs = {{DType::kFloat32, {2, k + 1}}};
      session.AddKernel(0, kernel);
    }
    session.EndStep(0);  // the forward's end: written with what was found so far
    session.UpdateAttributes(0, 0, {{"param_group", std::to_string(step)}});
    session.EndIteration();
  }
  EXPECT_TRUE(session.Close().ok());
  GraphRun run;
  for (const char* name : {"graphs/ms_output_trace_code_graph_0.ir",
                           "graphs/ms_output_trace_code_graph_0.pb",
                           "execution_order/ms_execution_order_graph_0.csv",
                           "execution_order/ms_global_execution_order_graph_0.csv"}) {
    run.files[name] = ReadFile(dir + "/rank_0/" + name);
  }
  run.writers = fs->graph_file_threads();
  return run;
}

TEST(SessionGraphFilesTest, WrittenOnTheSessionsThreadTheSameAsOnTheHosts) {
  TempDir on_host, in_background;
  const GraphRun host = RunGrowingGraph(on_host.path(), /*background=*/false);
  const GraphRun background = RunGrowingGraph(in_background.path(), /*background=*/true);
  // The last step's 120 kernels and the first's attributes replaced by the last's.
  const std::string& ir = host.files.at("graphs/ms_output_trace_code_graph_0.ir");
  EXPECT_NE(ir.find("Default/layer2/add-op39"), std::string::npos) << ir;
  EXPECT_NE(ir.find("param_group: 2"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("param_group: 1"), std::string::npos) << ir;
  EXPECT_EQ(host.files.at("execution_order/ms_global_execution_order_graph_0.csv"), "0\n1\n2\n");
  for (const auto& [name, bytes] : host.files) {
    EXPECT_FALSE(bytes.empty()) << name;
    EXPECT_EQ(background.files.at(name), bytes) << name;
  }
  // Each file is written once at the start, then again whenever its text changed: after each
  // step and each iteration of the three.
  EXPECT_EQ(host.writers.size(), background.writers.size());
  EXPECT_GE(host.writers.size(), 3u * 6u);
  const std::thread::id self = std::this_thread::get_id();
  for (std::thread::id writer : host.writers) EXPECT_EQ(writer, self);
  if (HelperThreadCount() > 1) {
    for (std::thread::id writer : background.writers) EXPECT_NE(writer, self);
  }
}

TEST(SessionGraphFilesTest, AFailureOnTheSessionsThreadReachesClose) {
  TempDir dir;
  auto fs = std::make_shared<testing::FaultFileSystem>(NewPosixFileSystem());
  fs->FailPathsContaining(".pb");
  SessionOptions options;
  options.config = Parse(ConfigJson(dir.path()));
  options.file_system = fs;
  options.graph_files_in_background = true;
  StatusOr<std::unique_ptr<DumpSession>> session = DumpSession::Open(std::move(options));
  ASSERT_TRUE(session.ok()) << session.status().message();
  ASSERT_TRUE((*session)->OnGraphCompiled(NamedKernels({"Default/a-op0"})).ok());
  const Status closed = (*session)->Close();
  EXPECT_EQ(closed.code(), StatusCode::kIOError);
  EXPECT_NE(closed.message().find("rank_0/graphs/ms_output_trace_code_graph_0.pb"),
            std::string::npos)
      << closed.message();
  // Written before the failure, and the run marked incomplete.
  EXPECT_NE(ReadFile(dir.Sub("rank_0/graphs/ms_output_trace_code_graph_0.ir")).find("a-op0"),
            std::string::npos);
  EXPECT_TRUE(std::ifstream(dir.Sub("rank_0/.dump_metadata/INCOMPLETE")).good());
}

}  // namespace
}  // namespace graphdump
