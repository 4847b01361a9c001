// graphdump-torch allgather: the collective of distributed analysis (docs/scale.md,
// "Distributed analysis"). `graphdump watch` and `graphdump compare --ranks`, run as the
// processes of one job, each start it once and exchange their summaries through it, so that
// the analysis itself (graphdump, without LibTorch) never loads LibTorch.
//
// It joins the job that RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT describe (gloo, through
// torch.distributed's c10d: ProcessGroup). On stdin it reads frames (an 8-byte little-endian
// length, then that many bytes); for each one it writes to stdout the frame of every process of
// the job, in rank order. It exits 0 at the end of stdin, 2 on a malformed environment and 3
// when the job cannot be joined or a collective fails (the reason on stderr).
#include <ATen/ATen.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "commands.h"
#include "graphdump/rank_environment.h"
#include "graphdump/torch/distributed.h"

namespace graphdump::tools {
namespace {

bool ReadExactly(std::FILE* in, void* data, size_t size) {
  return std::fread(data, 1, size, in) == size;
}

void WriteFrame(const std::string& bytes) {
  uint8_t header[8];
  for (int i = 0; i < 8; ++i) header[i] = static_cast<uint8_t>(uint64_t{bytes.size()} >> (8 * i));
  std::fwrite(header, 1, 8, stdout);
  std::fwrite(bytes.data(), 1, bytes.size(), stdout);
}

// Every process's bytes, in rank order: the lengths through one all-reduce, then each
// process's bytes broadcast from it.
StatusOr<std::vector<std::string>> AllGather(ProcessGroup& group, const std::string& mine) {
  const uint32_t n = group.world_size();
  std::vector<at::Tensor> lengths = {at::zeros({static_cast<int64_t>(n)}, at::kLong)};
  lengths[0][group.rank()] = static_cast<int64_t>(mine.size());
  GRAPHDUMP_RETURN_IF_ERROR(group.AllReduceSum(lengths));
  std::vector<std::string> all(n);
  for (uint32_t k = 0; k < n; ++k) {
    const int64_t size = lengths[0][k].item<int64_t>();
    if (size == 0) continue;
    std::vector<at::Tensor> buffer = {at::empty({size}, at::kByte)};
    if (k == group.rank()) std::memcpy(buffer[0].data_ptr(), mine.data(), mine.size());
    GRAPHDUMP_RETURN_IF_ERROR(group.Broadcast(buffer, k));
    all[k].assign(static_cast<const char*>(buffer[0].data_ptr()), static_cast<size_t>(size));
  }
  return all;
}

}  // namespace

int RunTorchAllGather(int, char**) {
  auto env = RankEnvironmentFromEnv();
  if (!env.ok()) {
    std::fprintf(stderr, "graphdump allgather: error: %s\n", env.status().message().c_str());
    return kExitUsage;
  }
  ProcessGroupOptions options;
  options.member = "process";  // the job's processes read dump ranks: "rank" would mislead
  auto group = ProcessGroup::Connect(*env, options);
  if (!group.ok()) {
    std::fprintf(stderr, "graphdump allgather: error: %s\n", group.status().message().c_str());
    return kExitFailure;
  }
  while (true) {
    uint8_t header[8];
    if (!ReadExactly(stdin, header, 8)) return kExitOk;
    uint64_t size = 0;
    for (int i = 0; i < 8; ++i) size |= uint64_t{header[i]} << (8 * i);
    std::string mine(size, '\0');
    if (size > 0 && !ReadExactly(stdin, mine.data(), size)) {
      std::fprintf(stderr, "graphdump allgather: error: stdin ended inside a frame\n");
      return kExitFailure;
    }
    auto all = AllGather(**group, mine);
    if (!all.ok()) {
      std::fprintf(stderr, "graphdump allgather: error: %s\n", all.status().message().c_str());
      return kExitFailure;
    }
    for (const std::string& bytes : *all) WriteFrame(bytes);
    std::fflush(stdout);
  }
}

}  // namespace graphdump::tools
