// The --rank and --steps spellings shared by analyze, top and export.
#include "cli/trace_selection.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace partrain::cli {
namespace {

TEST(ParseRankList, TheFlagsListIsCoresSpelling) {
  EXPECT_EQ(*parse_rank_list("0-3,6"), (std::vector<int>{0, 1, 2, 3, 6}));
}

TEST(ParseRankList, MalformedListsNameTheFlag) {
  for (const char* text : {"", "0,,1", "3-1", "1 ,2"}) {
    auto ranks = parse_rank_list(text);
    ASSERT_FALSE(ranks.is_ok()) << text;
    EXPECT_EQ(ranks.status().message(),
              "--rank '" + std::string(text) +
                  "': write world ranks separated by commas, A-B for ranks A to B, e.g. 0,2 or "
                  "0-3,6")
        << text;
  }
}

TEST(ParseStepRange, EachSpellingAndTheMalformedOnes) {
  auto both = parse_step_range("2:4");
  ASSERT_TRUE(both.is_ok());
  EXPECT_EQ(both->first, 2);
  EXPECT_EQ(both->last, 4);
  auto open_end = parse_step_range("3:");
  ASSERT_TRUE(open_end.is_ok());
  EXPECT_EQ(open_end->first, 3);
  EXPECT_FALSE(open_end->last.has_value());
  auto alone = parse_step_range("7");
  ASSERT_TRUE(alone.is_ok());
  EXPECT_EQ(alone->first, 7);
  EXPECT_EQ(alone->last, 7);
  for (const char* text : {":", "4:2", "x", "1:y", "-1:3"}) {
    EXPECT_FALSE(parse_step_range(text).is_ok()) << text;
  }
}

}  // namespace
}  // namespace partrain::cli
