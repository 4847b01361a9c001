// The table of watch checks is what --check parsing, its error messages and --help read: each
// row parses alone, with its default or a given threshold, and is listed where the allowed
// checks are. Nothing here names a check.
#include "graphdump/analysis/watch_checks.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

namespace graphdump::analysis {
namespace {

std::string Spelled(const WatchCheckInfo& info) {
  return std::string(info.name) + (info.has_threshold ? "[:T]" : "");
}

TEST(WatchCheckTableTest, EveryRowParsesAloneWithItsThreshold) {
  std::set<std::string> names;
  std::set<WatchKind> kinds;
  for (const WatchCheckInfo& info : WatchCheckTable()) {
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_TRUE(kinds.insert(info.kind).second) << info.name;
    auto alone = ParseWatchChecks(info.name);
    ASSERT_TRUE(alone.ok()) << info.name << ": " << alone.status().message();
    ASSERT_EQ(alone->size(), 1u);
    EXPECT_EQ((*alone)[0].kind, info.kind);
    EXPECT_EQ((*alone)[0].threshold, info.default_threshold);
    EXPECT_EQ((*alone)[0].text, info.has_threshold
                                    ? fmt::format("{}:{:g}", info.name, info.default_threshold)
                                    : std::string(info.name));
    auto with = ParseWatchChecks(std::string(" ") + info.name + ":2.5 ");
    if (info.has_threshold) {
      ASSERT_TRUE(with.ok()) << with.status().message();
      EXPECT_EQ((*with)[0].threshold, 2.5);
      EXPECT_EQ((*with)[0].text, std::string(info.name) + ":2.5");
    } else {
      ASSERT_FALSE(with.ok());
      EXPECT_NE(with.status().message().find(std::string(info.name) + " takes no threshold"),
                std::string::npos)
          << with.status().message();
    }
  }
}

TEST(WatchCheckTableTest, EveryRowIsListedAsAllowedAndInTheHelp) {
  const std::string allowed = WatchChecksAllowed(), help = WatchChecksHelp();
  auto unknown = ParseWatchChecks("nan,no-such-check");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  const std::string message = unknown.status().message();
  EXPECT_NE(message.find("unknown watchpoint 'no-such-check'"), std::string::npos) << message;
  std::string all;
  for (const WatchCheckInfo& info : WatchCheckTable()) {
    EXPECT_NE(allowed.find(Spelled(info)), std::string::npos) << info.name;
    EXPECT_NE(help.find(Spelled(info)), std::string::npos) << info.name;
    EXPECT_NE(message.find(Spelled(info)), std::string::npos) << info.name;
    all += std::string(all.empty() ? "" : ",") + info.name;
  }
  auto every = ParseWatchChecks(all);
  ASSERT_TRUE(every.ok()) << every.status().message();
  EXPECT_EQ(every->size(), WatchCheckTable().size());
  EXPECT_FALSE(ParseWatchChecks("nan,,inf").ok());
  EXPECT_FALSE(ParseWatchChecks("").ok());
}

}  // namespace
}  // namespace graphdump::analysis
