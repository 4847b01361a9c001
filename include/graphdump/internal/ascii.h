// ASCII text helpers shared by the analysis (dtype, format and operator names compared without
// regard to case).
#pragma once

#include <cctype>
#include <string_view>

namespace graphdump::internal {

// Whether `a` and `b` are equal but for ASCII case (no copy).
inline bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace graphdump::internal
