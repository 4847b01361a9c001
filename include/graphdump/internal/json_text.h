// Internal: the two guards every JSON document graphdump reads or prints goes through. Not part
// of the public API.
//
// nlohmann::json recurses once per nesting level when it prints or compares a value, so a
// document nested 50,000 deep overflows the stack; and its dump() throws on a string that is
// not valid UTF-8 (a file name or a statistic.csv field can be any bytes).
#pragma once

#include <string>
#include <string_view>

#include "graphdump/status.h"

namespace graphdump::internal {

// The deepest nesting of arrays and objects CheckJsonDepth accepts. A dump configuration needs
// 3 levels; the rest is room for hand-written files.
inline constexpr int kMaxJsonDepth = 64;

// Scans `text` (linear, no recursion) and fails with kInvalidArgument when its arrays and
// objects nest deeper than kMaxJsonDepth. The message starts with "{file_name}: " (when given)
// and names the line and column where the limit is passed. Run it before parsing: nothing else
// about `text` is checked here (a malformed document passes and fails in the parser).
Status CheckJsonDepth(std::string_view text, const std::string& file_name);

// `value` as JSON text (`indent` as nlohmann::json::dump; -1 is one line), with every byte
// sequence that is not valid UTF-8 replaced by U+FFFD instead of throwing.
template <typename Json>
std::string JsonText(const Json& value, int indent = -1) {
  return value.dump(indent, ' ', false, Json::error_handler_t::replace);
}

// True when `text` is valid UTF-8 (RFC 3629: no overlong forms, surrogates or code points past
// U+10FFFF).
bool IsValidUtf8(std::string_view text);

// `text` with every byte sequence that is not valid UTF-8 replaced by U+FFFD exactly as JsonText
// replaces it, for text that leaves graphdump outside JSON (the report page, Python strings).
std::string ValidUtf8(std::string_view text);

}  // namespace graphdump::internal
