// watch's loss-spike check (watch_loss.h).
#include "watch_loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "graphdump/analysis/watch_checks.h"

namespace graphdump::analysis {

void LossSeries::AddCandidate(uint32_t rank, uint32_t graph, int64_t iteration, uint64_t sequence,
                              size_t task, double value) {
  candidates_[{rank, graph, iteration}].emplace(sequence, std::make_pair(task, value));
}

void LossSeries::AddGradient(uint32_t rank, uint32_t graph, int64_t iteration,
                             uint64_t sequence) {
  auto [it, inserted] = first_gradient_.try_emplace({rank, graph, iteration}, sequence);
  if (!inserted) it->second = std::min(it->second, sequence);
}

int64_t LossSeries::Judge(double threshold,
                          const std::function<void(size_t, std::string)>& hit) const {
  int64_t judged = 0;
  std::pair<uint32_t, uint32_t> series{UINT32_MAX, UINT32_MAX};
  std::vector<std::pair<int64_t, double>> before;  // (iteration, |loss|) of the series so far
  for (const auto& [key, calls] : candidates_) {
    const auto& [rank, graph, iteration] = key;
    if (std::make_pair(rank, graph) != series) {
      series = {rank, graph};
      before.clear();
    }
    auto backward = first_gradient_.find(key);
    if (backward == first_gradient_.end()) continue;  // no backward: no loss in it
    auto last = calls.lower_bound(backward->second);
    if (last == calls.begin()) continue;
    --last;  // the last one-element output before the backward
    const auto [task, loss] = last->second;
    if (!before.empty()) {
      const size_t n = std::min(before.size(), kHistory);
      std::vector<double> recent;
      for (size_t i = before.size() - n; i < before.size(); ++i) recent.push_back(before[i].second);
      std::sort(recent.begin(), recent.end());
      const double usual =
          n % 2 ? recent[n / 2] : (recent[n / 2 - 1] + recent[n / 2]) / 2;
      if (usual > 0) {
        ++judged;
        std::string detail = LossSpike(loss, usual, n, before[before.size() - n].first, threshold);
        if (!detail.empty()) hit(task, std::move(detail));
      }
    }
    if (std::isfinite(loss)) before.emplace_back(iteration, std::fabs(loss));
  }
  return judged;
}

}  // namespace graphdump::analysis
