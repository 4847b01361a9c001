// watch's loss-spike check (docs/analysis.md, "graphdump watch"): each iteration's loss, the
// last one-element floating-point output of a forward kernel before the iteration's first
// Gradients/ kernel (the gradient backward() starts from, a ones_like, is not one), judged against the median of the losses of the iterations before it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>

namespace graphdump::analysis {

class LossSeries {
 public:
  // The loss is judged against the median of up to this many iterations before it.
  static constexpr size_t kHistory = 5;

  // A one-element output of a forward kernel (its call's place `sequence` among the calls of
  // its rank and iteration, watch's WatchHit::sequence), with its value; `task` is the caller's.
  void AddCandidate(uint32_t rank, uint32_t graph, int64_t iteration, uint64_t sequence,
                    size_t task, double value);
  // A call of a Gradients/ kernel: the iteration's backward starts at the first one.
  void AddGradient(uint32_t rank, uint32_t graph, int64_t iteration, uint64_t sequence);

  // Judges each iteration's loss, in iteration order per rank and graph: hit(task, detail) for
  // each one that is non-finite or more than `threshold` times its usual size (LossSpike).
  // Returns how many losses were judged (those with an earlier finite loss to compare with).
  int64_t Judge(double threshold, const std::function<void(size_t, std::string)>& hit) const;

 private:
  using Key = std::tuple<uint32_t, uint32_t, int64_t>;  // rank, graph, iteration
  struct Loss {
    uint64_t sequence = 0;
    size_t task = 0;
    double value = 0;
    bool found = false;
  };
  std::map<Key, std::multimap<uint64_t, std::pair<size_t, double>>> candidates_;
  std::map<Key, uint64_t> first_gradient_;
};

}  // namespace graphdump::analysis
