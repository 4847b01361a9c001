#include "graphdump/layout.h"

#include <array>
#include <charconv>
#include <chrono>

#include <fmt/format.h>

namespace graphdump {

namespace {

// The characters SanitizeName replaces, by byte: one load per character (the index checks
// millions of kernel names).
constexpr std::array<bool, 256> kUnsafe = [] {
  std::array<bool, 256> unsafe{};
  for (size_t c = 0; c < 0x20; ++c) unsafe[c] = true;
  for (unsigned char c : {'/', '\\', '.', ' ', '\x7f'}) unsafe[c] = true;
  return unsafe;
}();

bool Unsafe(char c) { return kUnsafe[static_cast<unsigned char>(c)]; }

}  // namespace

std::string SanitizeName(std::string_view full_name) {
  std::string out(full_name);
  for (char& c : out) {
    if (Unsafe(c)) c = '_';
  }
  return out;
}

bool NeedsSanitizing(std::string_view full_name) {
  for (char c : full_name) {
    if (Unsafe(c)) return true;
  }
  return false;
}

std::string RankDir(const std::string& path, uint32_t rank) {
  std::string base = path;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  return fmt::format("{}/rank_{}", base, rank);
}

std::string IterationDir(const std::string& rank_dir, const std::string& net_name,
                         uint32_t graph_id, uint64_t iteration) {
  return fmt::format("{}/{}/{}/{}", rank_dir, net_name, graph_id, iteration);
}

std::string ConstantsDir(const std::string& rank_dir, const std::string& net_name,
                         uint32_t graph_id) {
  return fmt::format("{}/{}/{}/constants", rank_dir, net_name, graph_id);
}

std::string GraphFilePath(const std::string& rank_dir, uint32_t graph_id, const char* ext) {
  return fmt::format("{}/graphs/ms_output_trace_code_graph_{}.{}", rank_dir, graph_id, ext);
}

std::string ExecutionOrderPath(const std::string& rank_dir, uint32_t graph_id) {
  return fmt::format("{}/execution_order/ms_execution_order_graph_{}.csv", rank_dir, graph_id);
}

std::string GlobalExecutionOrderPath(const std::string& rank_dir, uint32_t graph_id) {
  return fmt::format("{}/execution_order/ms_global_execution_order_graph_{}.csv", rank_dir,
                     graph_id);
}

std::string HyperparametersPath(const std::string& rank_dir) {
  return rank_dir + "/graphs/hyperparameters.jsonl";
}

std::string TensorFileName::Basename() const {
  std::string name;
  name.reserve(op_type.size() + op_name.size() + format.size() + dtype.size() + 64);
  AppendBasename(&name);
  return name;
}

void TensorFileName::AppendBasename(std::string* out) const {
  // Appended piece by piece (a statistic dump names every tensor of every kernel; a format
  // string is parsed again for each).
  char number[24];
  auto append_number = [&](uint64_t value) {
    out->append(number, std::to_chars(number, number + sizeof number, value).ptr);
    out->push_back('.');
  };
  out->append(op_type).push_back('.');
  out->append(op_name).push_back('.');
  append_number(task_id);
  append_number(stream_id);
  append_number(timestamp);
  out->append(is_input ? "input." : "output.");
  append_number(slot);
  out->append(format).push_back('.');
  out->append(dtype).append(".npy");
}

uint64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace graphdump
