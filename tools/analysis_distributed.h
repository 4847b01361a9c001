// Distributed analysis (docs/scale.md, "Distributed analysis"): `graphdump watch` and
// `graphdump compare --ranks` as one job of several processes, each reading the ranks whose
// directories it sees, their summaries combined through torch.distributed (gloo) by the
// graphdump-torch allgather helper, so that graphdump itself never links LibTorch.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graphdump/status.h"

namespace graphdump::tools {

// True when RANK, WORLD_SIZE, MASTER_ADDR or MASTER_PORT is set: this process is one of a job
// (torchrun's, or one that `--nproc` started).
bool InDistributedJob();

// Runs this command line (argv[0] "graphdump watch", the command's arguments after it) as
// `nproc` processes of one job on this machine, without --nproc: rank 0's output is this
// command's output, unprefixed; the others' lines carry "[rank k] ". Returns rank 0's exit
// status, or a failed process's (its failure told on stderr).
int LaunchAnalysisJob(const std::string& command, int nproc, int argc, char** argv);

// What a process of a distributed analysis is asked to do. Every process of a job must be
// asked the same: their parts are merged as one answer.
struct JobCommand {
  std::string command;  // "watch", "compare --ranks"
  std::string dir;      // DIR as given
  // The options that choose the answer, by name, with their values as given ("--check",
  // "nan,inf"); options that only shape process 0's output (--json, -q, -j) are left out.
  std::vector<std::pair<std::string, std::string>> options;
};

// One process of a distributed analysis.
class AnalysisJob {
 public:
  // Joins the job of the environment: starts graphdump-torch allgather. Null after telling
  // stderr (*exit_code set) when that fails.
  static std::unique_ptr<AnalysisJob> Join(const std::string& command, int* exit_code);
  ~AnalysisJob();

  uint32_t rank() const { return rank_; }
  uint32_t world_size() const { return world_size_; }

  // Every process's bytes, in rank order (all processes call it, as often).
  StatusOr<std::vector<std::string>> AllGather(const std::string& mine);

  // The rendezvous of the job's processes (one collective): each tells the others its command,
  // the rank_{id} directories of its DIR and what wrote them. Returns, by rank id, the
  // processes that see its directory (ascending). Errors from what the processes told, the same
  // on every process (*shared set true: process 0 alone need print them): kInvalidArgument
  // naming the first process whose command (the command, DIR, an option of `mine.options`) or
  // kind of dump (the graphdump version in its lowest rank's .dump_metadata/config.json, or
  // none: MindSpore's) differs from process 0's, and what differs; kIOError naming the first
  // process that cannot list its DIR, with the path and the system's reason. An IOError of
  // this process alone (*shared false) when the exchange itself fails.
  StatusOr<std::map<uint32_t, std::vector<uint32_t>>> Rendezvous(const JobCommand& mine,
                                                                 bool* shared);

 private:
  AnalysisJob() = default;
  std::string command_;
  uint32_t rank_ = 0, world_size_ = 1;
  pid_t helper_ = -1;
  int to_helper_ = -1, from_helper_ = -1;
};

// Which process reads each rank: among the processes that see its directory (`seen`), and for
// a rank in `with` also that rank's, the (i mod n)-th for the i-th rank in ascending order (on
// a shared file system, rank i goes to process i mod N). A rank no process can read with its
// `with` rank is missing from the result.
std::map<uint32_t, uint32_t> AssignRanks(const std::map<uint32_t, std::vector<uint32_t>>& seen,
                                         const std::vector<uint32_t>& need_with = {},
                                         std::optional<uint32_t> with = std::nullopt);

// The rank ids in the order a single-process index lists their skipped files: by directory
// name (rank_10 before rank_2).
std::vector<uint32_t> ByDirectoryName(std::vector<uint32_t> ranks);

}  // namespace graphdump::tools
