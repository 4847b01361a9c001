// How a DumpSession stops: the first write error (reported once, marked in
// `.dump_metadata/INCOMPLETE`, and ending all dumping without interrupting the host), a start
// that failed, and a host run that failed (docs/reliability.md).
#include <fmt/format.h>

#include <mutex>

#include "session_impl.h"

namespace graphdump::session_internal {

void SessionImpl::AbandonStart(const Status& why) {
  closed_ = true;
  if (created_root_ && fs_->RemoveTree(root_).ok()) return;
  // A directory this run never claimed (its lock was not taken) is another run's: untouched.
  if (!lock_) return;
  if (fs_->CreateDirectories(root_ + "/.dump_metadata").ok()) {
    (void)fs_->WriteWholeFile(IncompletePath(),
                              "This dump was never started: " + why.message() + "\n");
  }
}

void SessionImpl::OnRunFailed(const std::string& reason) {
  if (closed_ || run_failed_ || InChild()) return;
  run_failed_ = true;
  Status marker = fs_->AppendToFile(
      IncompletePath(), "The run stopped with an error, so the dump ends there: " + reason + "\n");
  if (!marker.ok()) Log("could not write the INCOMPLETE marker: " + marker.message());
}

Status SessionImpl::FirstError() {
  std::lock_guard<std::mutex> lock(mu_);
  return first_error_;
}

void SessionImpl::Fail(const Status& status) {
  if (InChild()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_) return;
    failed_ = true;
    first_error_ = status;
  }
  Log(
      fmt::format("dumping stopped: {}. Files written before this error are complete; "
                  "nothing more is dumped in this run (see {}/.dump_metadata/INCOMPLETE).",
                  status.message(), root_));
  // Appended to the marker Start wrote: its last block has room for a few lines, so this
  // needs no new space on a full disk.
  const std::string text = fmt::format(
      "graphdump stopped dumping (the run was at iteration {}).\nerror: {}\nEvery file under "
      "its final name is complete; tensors after this error were not written.\n",
      iteration_, status.message());
  Status marker = fs_->AppendToFile(IncompletePath(), text);
  if (!marker.ok()) Log("could not write the INCOMPLETE marker: " + marker.message());
}

}  // namespace graphdump::session_internal
