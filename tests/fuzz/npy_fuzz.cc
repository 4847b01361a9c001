// libFuzzer target: the .npy reader (docs/file-format.md) and the element loops of compare and
// watch. A file either opens (its header valid and the data as long as it promises) or gives an
// error; an opened file is summarised, compared with itself and reduced as statistic.csv would be.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "graphdump/analysis/npy_file.h"
#include "graphdump/analysis/tensor_math.h"
#include "graphdump/stats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace graphdump;
  auto npy = analysis::MappedNpy::FromBytes(std::vector<uint8_t>(data, data + size), "fuzz.npy");
  if (!npy.ok()) return 0;
  const analysis::MappedNpy& t = **npy;
  if (t.info().data_offset + t.info().data_bytes > size) std::abort();
  (void)analysis::SummarizeFinite(t);
  const analysis::PairMetrics m = analysis::ComparePair(t, t, 0, 0);
  if (m.allclose_failures != 0 || m.nonfinite_mismatches != 0) std::abort();  // equal to itself
  (void)analysis::DeltaBetween(t, t);
  StatsRequest request;
  request.md5 = true;
  StatsAccumulator stats(t.info().dtype, request);
  stats.Update(t.data(), t.info().data_bytes, t.NumElements());
  (void)stats.Finish();
  return 0;
}
