#include "graphdump/graph.h"

namespace graphdump {

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

}  // namespace graphdump
