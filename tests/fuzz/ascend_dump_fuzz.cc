// libFuzzer target: the Ascend dump file reader and the device-format converter (docs/ascend.md). A
// file parses (every tensor within the file, shapes whose counts fit int64) or gives an error;
// every tensor of a parsed file with a device format is converted to host layout when its plan
// checks out, into a buffer exactly as large as the host shape.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <vector>

#include "graphdump/analysis/ascend_dump.h"
#include "graphdump/analysis/ascend_format.h"
#include "graphdump/shape.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace graphdump;
  StatusOr<AscendDumpFile> file = ParseAscendDump(data, size, "fuzz.bin");
  if (!file.ok()) return 0;
  for (const auto* list : {&file->inputs, &file->outputs}) {
    for (const AscendTensor& t : *list) {
      if (t.offset + t.size > size) std::abort();
      std::optional<DType> dtype = AscendDataTypeToDType(t.data_type);
      if (!dtype || DTypeBits(*dtype) % 8 != 0 || !IsConvertibleAscendFormat(t.format)) continue;
      DeviceTensorDesc desc{t.format, DTypeBits(*dtype) / 8, t.shape, t.original_shape,
                            t.sub_format};
      StatusOr<HostRows> rows = AscendHostRows(desc);
      if (!rows.ok()) continue;
      const std::optional<int64_t> host = ShapeBytes(desc.original_shape, DTypeBits(*dtype));
      if (!host) std::abort();
      if (*host > (int64_t{64} << 20)) continue;  // a real file this large converts the same way
      std::vector<uint8_t> out(static_cast<size_t>(*host));
      if (!ConvertToHostLayout(desc, data + t.offset, out.data()).ok()) std::abort();
    }
  }
  return 0;
}
