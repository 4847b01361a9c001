// What a session reads of a kernel's input that the kernel is about to write in place
// (DumpSession::ReadsInput, ReadInputNow): nothing when the input's bytes are in a file of the
// step already; a tensor dump writes the input's file (or queues a copy) before the write.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "graphdump/session.h"
#include "graphdump/synthetic.h"
#include "testing/testing.h"
#include "session_test_util.h"

namespace graphdump {
namespace {

using testing::TempDir;

// In a tensor dump, an input whose bytes already went to a file in this step is only linked:
// the session does not read it, so a kernel writing it in place needs no copy of it
// (ReadsInput false). Other bytes, a full dump (statistics read them) and a new step read it.
TEST(SessionTest, ATensorDumpReadsNoInputWhoseFileIsWrittenInTheStep) {
  for (const char* saved_data : {"tensor", "full"}) {
    TempDir dir;
    auto session = OpenSession(Parse(ConfigJson(
        dir.path(), std::string(R"(, "saved_data": ")") + saved_data + R"(", "input_output": 0)")));
    GraphInfo graph = SyntheticGraph({});
    ASSERT_TRUE(session->OnGraphCompiled(graph).ok());
    std::vector<float> data(16, 3.0f);
    auto storage = std::make_shared<int>(0);
    auto with_origin = [&](uint64_t version) {
      TensorView view = testing::MakeView(DType::kFloat32, {16}, {}, data.data());
      view.origin = TensorOrigin{storage, version, 0};
      return view;
    };
    KernelInfo k0 = graph.kernels[0], k1 = graph.kernels[1];
    session->BeginStep(0);
    EXPECT_TRUE(session->ReadsInput(k1, with_origin(1))) << saved_data;
    session->OnKernelDone(k0, {}, {with_origin(1)});
    const bool tensor_only = std::string(saved_data) == "tensor";
    EXPECT_EQ(session->ReadsInput(k1, with_origin(1)), !tensor_only) << saved_data;
    EXPECT_TRUE(session->ReadsInput(k1, with_origin(2))) << saved_data;  // other bytes
    // The input handed over uncopied and written since is still linked to the file.
    std::fill(data.begin(), data.end(), -1.0f);
    session->OnKernelDone(k1, {with_origin(1)}, {});
    session->EndStep(0);
    session->BeginStep(0);
    EXPECT_TRUE(session->ReadsInput(k1, with_origin(1))) << saved_data;  // a new step
    session->EndStep(0);
    ASSERT_TRUE(session->Close().ok());
    if (!tensor_only) continue;
    auto r = testing::RunPython(R"(
import glob, os, sys, numpy as np
files = sorted(glob.glob(sys.argv[1] + '/*.npy'))
print(len(files), [float(np.load(f)[0]) for f in files], len({os.stat(f).st_ino for f in files}))
)",
                                {dir.Sub("rank_0/Net/0/0")});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output, "2 [3.0, 3.0] 1\n");
  }
}

// A tensor dump writes an input the kernel is about to write in place at once (ReadInputNow
// true; the writer threads get a copy taken then), under the name and timestamp of the call's
// other files; the input handed to OnKernelDone afterwards, its bytes written since, is not
// written again.
class InPlaceInputTest : public ::testing::TestWithParam<bool> {};

TEST_P(InPlaceInputTest, ATensorDumpWritesAnInPlaceInputBeforeTheWrite) {
  const bool asynchronous = GetParam();
  TempDir dir;
  SessionOptions options;
  options.config = Parse(ConfigJson(dir.path(), "",
                                    asynchronous ? R"({"enable": false})" : R"({"enable": true})"));
  // Writes from the tensors' own memory where it can: never for an input about to be written.
  options.host_reports_writes = true;
  auto session = std::move(DumpSession::Open(std::move(options))).value();
  GraphInfo graph = SyntheticGraph({});
  ASSERT_TRUE(session->OnGraphCompiled(graph).ok());
  std::vector<float> state(8, 3.0f), grad(8, 0.5f);
  auto storage = std::make_shared<int>(0);
  auto state_view = [&](uint64_t version) {
    TensorView view = testing::MakeView(DType::kFloat32, {8}, {}, state.data());
    view.origin = TensorOrigin{storage, version, 0};
    view.keep_alive = storage;
    return view;
  };
  const KernelInfo& k1 = graph.kernels[1];
  session->BeginStep(0);
  // A call whose input 1 is written in place: its first call never ends (it raised), the
  // second does, with other bytes.
  for (float before : {3.0f, 4.0f}) {
    std::fill(state.begin(), state.end(), before);
    TensorView input = state_view(static_cast<uint64_t>(before));
    input.slot = 1;
    ASSERT_TRUE(session->ReadsInput(k1, input));
    EXPECT_TRUE(session->ReadInputNow(k1, input));
    std::fill(state.begin(), state.end(), -before);  // the kernel's write
    if (before == 3.0f) continue;
    TensorView unchanged = testing::MakeView(DType::kFloat32, {8}, {}, grad.data());
    unchanged.slot = 0;
    TensorView output = state_view(9);
    output.slot = 0;
    session->OnKernelDone(k1, {unchanged, input}, {output});
  }
  session->EndStep(0);
  ASSERT_TRUE(session->Close().ok());
  auto r = testing::RunPython(R"(
import glob, os, sys, numpy as np
files = [(os.path.basename(f).split('.'), f) for f in glob.glob(sys.argv[1] + '/*.npy')]
for name, f in sorted(files, key=lambda e: (e[0][5], e[0][6], e[0][4])):
    print(name[5], name[6], float(np.load(f)[0]))
stamps = lambda io: {name[4] for name, _ in files if name[5] + name[6] == io}
print(len(stamps('input1')), stamps('input0') == stamps('output0') < stamps('input1'))
)",
                              {dir.Sub("rank_0/Net/0/0")});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // Both calls' input 1 as it was before the write; one input 0 and one output, of the call
  // that ended, with its input 1's timestamp.
  EXPECT_EQ(r.output, "input 0 0.5\ninput 1 3.0\ninput 1 4.0\noutput 0 -4.0\n2 True\n");
}

INSTANTIATE_TEST_SUITE_P(SyncAndAsync, InPlaceInputTest, ::testing::Bool());

// Where a call's tensors are written together (a .bin file), only once its outputs are known
// (an overflow dump) or with statistic rows in the call's order (saved_data "full"),
// ReadInputNow refuses: the host hands OnKernelDone a copy.
TEST(SessionTest, AnInPlaceInputIsWrittenEarlyOnlyByANpyTensorDump) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {R"(, "file_format": "bin")", R"({"enable": true})"},
      {R"(, "op_debug_mode": 3)", R"({"enable": true})"},
      {R"(, "saved_data": "full")", R"({"enable": true})"},
  };
  for (const auto& [common, e2e] : refused) {
    TempDir dir;
    auto session = OpenSession(Parse(ConfigJson(dir.path(), common, e2e)));
    GraphInfo graph = SyntheticGraph({});
    ASSERT_TRUE(session->OnGraphCompiled(graph).ok());
    std::vector<float> data(4, 1.0f);
    TensorView input = testing::MakeView(DType::kFloat32, {4}, {}, data.data());
    input.origin = TensorOrigin{std::make_shared<int>(0), 1, 0};
    input.slot = 0;
    session->BeginStep(0);
    ASSERT_TRUE(session->ReadsInput(graph.kernels[0], input)) << common << e2e;
    EXPECT_FALSE(session->ReadInputNow(graph.kernels[0], input)) << common << e2e;
    session->EndStep(0);
    ASSERT_TRUE(session->Close().ok());
  }
}

}  // namespace
}  // namespace graphdump
