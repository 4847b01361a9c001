#include "graphdump/graph.h"

#include <set>

namespace graphdump {

bool AllocatesUninitialized(const std::string& op_type) {
  static const std::set<std::string> kEmpty = {
      "empty",         "empty_like",      "empty_strided",           "new_empty",
      "new_empty_strided", "empty_permuted", "_empty_affine_quantized",
      "_empty_per_channel_affine_quantized", "empty_quantized"};
  return kEmpty.count(op_type) > 0;
}

std::string OpTypeFromFullName(const std::string& full_name) {
  const size_t slash = full_name.rfind('/');
  std::string last = slash == std::string::npos ? full_name : full_name.substr(slash + 1);
  const size_t op = last.rfind("-op");
  if (op != std::string::npos && op + 3 < last.size() &&
      last.find_first_not_of("0123456789", op + 3) == std::string::npos) {
    last.resize(op);
  }
  return last;
}

bool IsTorchLibraryFile(const std::string& file) {
  for (const char* marker : {"/dist-packages/torch/", "/site-packages/torch/"}) {
    if (file.find(marker) != std::string::npos) return true;
  }
  return file.rfind("code/__torch__", 0) == 0;
}

const SourceLocation* UserFrame(const std::vector<SourceLocation>& trace) {
  for (const SourceLocation& loc : trace) {
    if (!IsTorchLibraryFile(loc.file)) return &loc;
  }
  return trace.empty() ? nullptr : &trace.front();
}

}  // namespace graphdump
