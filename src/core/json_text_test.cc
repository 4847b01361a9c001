#include "graphdump/internal/json_text.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace graphdump::internal {
namespace {

TEST(Utf8Test, ValidTextIsKept) {
  for (const std::string text : {"", "plain", "caf\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
                                 "\xF4\x8F\xBF\xBF", "\xED\x9F\xBF"}) {
    EXPECT_TRUE(IsValidUtf8(text)) << text;
    EXPECT_EQ(ValidUtf8(text), text);
  }
}

TEST(Utf8Test, InvalidSequencesAreReplacedAsJsonTextReplacesThem) {
  // A lone continuation byte, an invalid lead byte, an overlong form, a surrogate, a code point
  // past U+10FFFF, a sequence cut short in the middle and at the end.
  for (const std::string text :
       {"layer\xFF" "1", "a\x80z", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80",
        "x\xE2\x82y", "end\xF0\x9F\x98"}) {
    EXPECT_FALSE(IsValidUtf8(text)) << text;
    const std::string replaced = ValidUtf8(text);
    EXPECT_TRUE(IsValidUtf8(replaced)) << replaced;
    EXPECT_NE(replaced.find("\xEF\xBF\xBD"), std::string::npos) << replaced;
    // The same text as the JSON output carries.
    EXPECT_EQ(nlohmann::json::parse(JsonText(nlohmann::json(text))).get<std::string>(), replaced);
  }
  EXPECT_EQ(ValidUtf8("layer\xFF" "1"), "layer\xEF\xBF\xBD" "1");
}

}  // namespace
}  // namespace graphdump::internal
