// The rank-list spelling: what --rank and the dashboard read, and what every message prints.
#include "core/rank_list.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace partrain {
namespace {

TEST(ParseRankList, ListsAndRangesSortedWithoutDuplicates) {
  EXPECT_EQ(*parse_rank_list("0,2"), (std::vector<int>{0, 2}));
  EXPECT_EQ(*parse_rank_list("0-3,6"), (std::vector<int>{0, 1, 2, 3, 6}));
  EXPECT_EQ(*parse_rank_list("5,1-2,2"), (std::vector<int>{1, 2, 5}));
  EXPECT_EQ(*parse_rank_list("4-4"), (std::vector<int>{4}));
}

TEST(ParseRankList, MalformedListsNameTheSpelling) {
  for (const char* text :
       {"", "0,,1", "a", "-1", "3-1", "1-", "-", "0-2-4", "1 ,2", "0-99999999999", "0-2000000"}) {
    auto ranks = parse_rank_list(text);
    ASSERT_FALSE(ranks.is_ok()) << text;
    EXPECT_EQ(ranks.status().message(),
              "'" + std::string(text) +
                  "': write world ranks separated by commas, A-B for ranks A to B, e.g. 0,2 or "
                  "0-3,6")
        << text;
  }
}

TEST(FormatRankList, RunsOfThreeOrMoreAsRanges) {
  EXPECT_EQ(format_rank_list({3, 0, 1, 2}), "0-3");
  EXPECT_EQ(format_rank_list({0, 1, 3}), "0,1,3");
  EXPECT_EQ(format_rank_list({7, 0, 2, 5, 6, 6}), "0,2,5-7");
  EXPECT_EQ(format_rank_list({4}), "4");
  EXPECT_EQ(format_rank_list({}), "");
}

TEST(FormatRankList, WhatIsPrintedParsesBackToTheSameRanks) {
  const std::vector<int> ranks = {0, 1, 4, 5, 6, 9, 11, 12, 13, 14, 1023};
  EXPECT_EQ(*parse_rank_list(format_rank_list(ranks)), ranks);
}

TEST(RanksPhrase, SingularAndPlural) {
  EXPECT_EQ(ranks_phrase({3}), "rank 3");
  EXPECT_EQ(ranks_phrase({2, 0, 1}), "ranks 0-2");
}

TEST(AbsentRanks, TheGapsOfTheWorldAsRanksPhraseWritesThem) {
  EXPECT_EQ(absent_ranks({0, 1}, 2).count, 0);
  EXPECT_EQ(absent_ranks({0, 1}, 2).phrase, "");
  EXPECT_EQ(absent_ranks({1}, 2).phrase, "rank 0");
  const AbsentRanks some = absent_ranks({5, 0, 3}, 9);
  EXPECT_EQ(some.count, 6);
  EXPECT_EQ(some.phrase, "ranks 1,2,4,6-8");
  EXPECT_EQ(some.phrase, ranks_phrase({1, 2, 4, 6, 7, 8}));
}

// A trace's header claimed 2e9 ranks of a 2-rank file: the merge listed every absent rank in a
// vector of them (GBs, or bad_alloc). The gaps are found without walking the world.
TEST(AbsentRanks, AHugeWorldIsOneRangeNotAListOfItsRanks) {
  const AbsentRanks absent = absent_ranks({0, 1}, 2'000'000'000);
  EXPECT_EQ(absent.count, 1'999'999'998);
  EXPECT_EQ(absent.phrase, "ranks 2-1999999999");
  EXPECT_EQ(absent_ranks({0, 1, 7}, 4).phrase, "ranks 2,3");  // a rank past the world is not one
}

}  // namespace
}  // namespace partrain
