// Which rank of a multi-process job this process is, from the environment variables that
// torchrun, cluster schedulers and graphdump's own launcher (launcher.h) set:
//
//   RANK         this process's rank, 0 <= RANK < WORLD_SIZE
//   WORLD_SIZE   the number of ranks in the job
//   MASTER_ADDR  host of rank 0, where the rendezvous store listens
//   MASTER_PORT  port of that store
//   LOCAL_RANK   (optional) rank on this machine; selects the CUDA device when there is one
//
// All four of RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set: one rank of a job. None of
// them set: a single-process run (rank 0 of 1). Anything in between is a usage error.
#pragma once

#include <cstdint>
#include <string>

#include "graphdump/status.h"

namespace graphdump {

inline constexpr char kRankEnv[] = "RANK";
inline constexpr char kWorldSizeEnv[] = "WORLD_SIZE";
inline constexpr char kMasterAddrEnv[] = "MASTER_ADDR";
inline constexpr char kMasterPortEnv[] = "MASTER_PORT";
inline constexpr char kLocalRankEnv[] = "LOCAL_RANK";
inline constexpr char kLocalWorldSizeEnv[] = "LOCAL_WORLD_SIZE";

struct RankEnvironment {
  uint32_t rank = 0;
  uint32_t world_size = 1;
  uint32_t local_rank = 0;
  std::string master_addr;  // empty for a single-process run
  uint16_t master_port = 0;

  // True when this process is one rank of a job with a rendezvous (the variables were set),
  // even when WORLD_SIZE is 1.
  bool distributed() const { return !master_addr.empty(); }
};

// Reads the variables above. Returns InvalidArgument naming the variable, its value and what is
// allowed when one is malformed (RANK not below WORLD_SIZE, a port outside 1..65535...) or when
// only some of the four required ones are set.
StatusOr<RankEnvironment> RankEnvironmentFromEnv();

// The same from explicit values (null for an unset variable), for tests and for hosts that
// get them elsewhere.
StatusOr<RankEnvironment> ParseRankEnvironment(const char* rank, const char* world_size,
                                               const char* master_addr, const char* master_port,
                                               const char* local_rank);

}  // namespace graphdump
