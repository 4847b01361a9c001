#include "graphdump/rank_environment.h"

#include <charconv>
#include <cstdlib>
#include <string_view>

namespace graphdump {
namespace {

// Parses a decimal unsigned number that must lie in [min, max].
StatusOr<uint64_t> ParseNumber(const char* name, const char* text, uint64_t min, uint64_t max,
                               const std::string& allowed) {
  std::string_view view(text);
  uint64_t value = 0;
  auto [end, error] = std::from_chars(view.data(), view.data() + view.size(), value);
  if (view.empty() || error != std::errc() || end != view.data() + view.size() || value < min ||
      value > max) {
    return Status::InvalidArgument(std::string(name) + "='" + text + "' is not valid: expected " +
                                   allowed);
  }
  return value;
}

}  // namespace

StatusOr<RankEnvironment> ParseRankEnvironment(const char* rank, const char* world_size,
                                               const char* master_addr, const char* master_port,
                                               const char* local_rank) {
  int set = (rank != nullptr) + (world_size != nullptr) + (master_addr != nullptr) +
            (master_port != nullptr);
  RankEnvironment env;
  if (set == 0) return env;
  if (set != 4) {
    std::string missing;
    auto note = [&missing](const char* value, const char* name) {
      if (value == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
    };
    note(rank, kRankEnv);
    note(world_size, kWorldSizeEnv);
    note(master_addr, kMasterAddrEnv);
    note(master_port, kMasterPortEnv);
    return Status::InvalidArgument(
        "incomplete rank environment: " + missing +
        " not set; a rank of a multi-process job needs RANK, WORLD_SIZE, MASTER_ADDR and "
        "MASTER_PORT (as torchrun sets them), a single-process run needs none of them");
  }
  GRAPHDUMP_ASSIGN_OR_RETURN(uint64_t size, ParseNumber(kWorldSizeEnv, world_size, 1, 1u << 20,
                                                        "a number of ranks from 1 to 1048576"));
  GRAPHDUMP_ASSIGN_OR_RETURN(
      uint64_t r, ParseNumber(kRankEnv, rank, 0, size - 1,
                              "a rank from 0 to WORLD_SIZE-1 = " + std::to_string(size - 1)));
  GRAPHDUMP_ASSIGN_OR_RETURN(uint64_t port, ParseNumber(kMasterPortEnv, master_port, 1, 65535,
                                                        "a TCP port from 1 to 65535"));
  if (std::string_view(master_addr).empty()) {
    return Status::InvalidArgument(std::string(kMasterAddrEnv) +
                                   " is empty: expected the host name or address of rank 0");
  }
  uint64_t local = 0;
  if (local_rank != nullptr && *local_rank != '\0') {
    GRAPHDUMP_ASSIGN_OR_RETURN(local, ParseNumber(kLocalRankEnv, local_rank, 0, size - 1,
                                                  "a rank on this machine below WORLD_SIZE"));
  }
  env.rank = static_cast<uint32_t>(r);
  env.world_size = static_cast<uint32_t>(size);
  env.local_rank = static_cast<uint32_t>(local);
  env.master_addr = master_addr;
  env.master_port = static_cast<uint16_t>(port);
  return env;
}

StatusOr<RankEnvironment> RankEnvironmentFromEnv() {
  return ParseRankEnvironment(std::getenv(kRankEnv), std::getenv(kWorldSizeEnv),
                              std::getenv(kMasterAddrEnv), std::getenv(kMasterPortEnv),
                              std::getenv(kLocalRankEnv));
}

}  // namespace graphdump
