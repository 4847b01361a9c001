// Helpers shared by the session's tests (session_test.cc, session_statistics_test.cc,
// session_faults_test.cc): configurations, sessions and host tensors.
#pragma once

#include <algorithm>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "graphdump/config.h"
#include "graphdump/session.h"
#include "graphdump/synthetic.h"
#include "testing/testing.h"

// In graphdump itself: only the session's tests include this.
namespace graphdump {

inline std::string ConfigJson(const std::string& path, const std::string& common_extra = "",
                       const std::string& e2e = R"({"enable": true, "trans_flag": true})") {
  return R"({"common_dump_settings": {"dump_mode": 0, "path": ")" + path +
         R"(", "net_name": "Net", "iteration": "all", "input_output": 0, "kernels": [],
         "support_device": [0,1,2,3,4,5,6,7])" +
         common_extra + R"(}, "e2e_dump_settings": )" + e2e + "}";
}

inline DumpConfig Parse(const std::string& json) {
  StatusOr<ParsedConfig> parsed = ParseConfig(json, "test.json", "");
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  DumpConfig config = parsed->config;
  config.source_bytes = json;
  return config;
}

inline std::unique_ptr<DumpSession> OpenSession(const DumpConfig& config,
                                         std::vector<std::string>* log = nullptr) {
  SessionOptions options;
  options.config = config;
  options.writer_threads = 3;
  options.queue_bytes = 4096;  // small: forces the executor to wait on the writers
  options.log = [log](const std::string& m) {
    if (log) log->push_back(m);
  };
  StatusOr<std::unique_ptr<DumpSession>> session = DumpSession::Open(std::move(options));
  EXPECT_TRUE(session.ok()) << session.status().message();
  return std::move(session).value();
}

inline void RunSynthetic(const DumpConfig& config, SyntheticOptions options = {},
                  std::vector<std::string>* log = nullptr) {
  auto session = OpenSession(config, log);
  ASSERT_TRUE(session);
  ASSERT_TRUE(RunSyntheticGraph(*session, options).ok());
  ASSERT_TRUE(session->Close().ok());
}

// File names with the 16-digit microsecond timestamps replaced by "T".
inline std::vector<std::string> WithoutTimestamps(const std::vector<std::string>& files) {
  std::vector<std::string> out;
  for (const std::string& f : files)
    out.push_back(std::regex_replace(f, std::regex(R"(\.\d{16}\.)"), ".T."));
  std::sort(out.begin(), out.end());
  return out;
}

inline std::string StatisticWithoutTimestamps(const std::string& csv) {
  return std::regex_replace(csv, std::regex(R"(,\d{16},)"), ",T,");
}

inline std::vector<std::string> Matching(const std::vector<std::string>& files, const std::string& re) {
  std::vector<std::string> out;
  for (const std::string& f : files)
    if (std::regex_search(f, std::regex(re))) out.push_back(f);
  return out;
}

// A float32 vector the host owns, with the origin a host that reports writes gives it.
struct HostTensor {
  std::shared_ptr<std::vector<float>> data;
  TensorView View() const {
    TensorView v;
    v.dtype = DType::kFloat32;
    v.shape = {static_cast<int64_t>(data->size())};
    v.data = data->data();
    v.keep_alive = data;
    v.origin.storage = data;
    return v;
  }
};

// A float tensor over `data` whose bytes come from `storage` at `version` (TensorOrigin).
inline TensorView FloatsWithOrigin(std::vector<float>& data, std::shared_ptr<const void> storage,
                                   uint64_t version) {
  TensorView view = testing::MakeView(DType::kFloat32, {static_cast<int64_t>(data.size())}, {},
                                      data.data());
  view.origin = TensorOrigin{std::move(storage), version, 0};
  return view;
}

// A graph of kernels with these full names, indexed in order.
inline GraphInfo NamedKernels(const std::vector<std::string>& names) {
  GraphInfo graph;
  for (const std::string& name : names) {
    KernelInfo k;
    k.full_name = name;
    k.index = static_cast<uint32_t>(graph.kernels.size());
    graph.kernels.push_back(k);
  }
  return graph;
}

}  // namespace graphdump
