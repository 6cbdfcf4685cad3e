// Which ranks a per-rank table prints: all of a few, the ones that stand out of many.
#include "analyzers/rank_rows.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace partrain::analyzers {
namespace {

// `n` ranks with figures {step 100, late 0}.
struct Table {
  std::vector<int> ranks;
  std::vector<std::vector<double>> figures;
  explicit Table(int n) {
    for (int r = 0; r < n; ++r) {
      ranks.push_back(r);
      figures.push_back({100.0, 0.0});
    }
  }
  std::vector<int> printed(const RankRowOptions& options, std::string& note) const {
    std::vector<int> out;
    for (size_t i : rank_rows_to_print(ranks, figures, options, note)) out.push_back(ranks[i]);
    return out;
  }
};

TEST(RankRows, AFewRanksArePrintedInFull) {
  Table t(kRanksPrintedInFull);
  t.figures[3] = {500.0, 40.0};
  std::string note = "stale";
  EXPECT_EQ(t.printed({}, note).size(), kRanksPrintedInFull);
  EXPECT_EQ(note, "");
}

// 1,024 ranks: rank 13 is 5 ms late (a column whose median is 0), rank 700 runs a 10% longer
// step, rank 900 only 2% longer (like the others), and a finding names rank 643.
TEST(RankRows, ManyRanksPrintWhatStandsOutAndWhatFindingsName) {
  Table t(1024);
  t.figures[13] = {100.0, 5.0};
  t.figures[700] = {110.0, 0.0};
  t.figures[900] = {102.0, 0.0};
  std::string note;
  EXPECT_EQ(t.printed({.named = {643}}, note), (std::vector<int>{0, 13, 643, 700}));
  EXPECT_EQ(note,
            "  ... 1020 of 1024 ranks not printed: each within 5% of the median in every column; "
            "rank 0 is the one nearest the median (`--rank` prints the ranks it selects, `--json` "
            "every rank)\n");
}

TEST(RankRows, PastTheOutlierLimitTheNoteCountsWhatItLeftOut) {
  Table t(100);
  for (int r = 50; r < 50 + static_cast<int>(kOutlierRanksPrinted) + 3; ++r) {
    t.figures[r] = {100.0 + r, 0.0};  // 50% and more
  }
  std::string note;
  const std::vector<int> printed = t.printed({}, note);
  ASSERT_EQ(printed.size(), kOutlierRanksPrinted + 1);
  EXPECT_EQ(printed.front(), 0);  // the typical rank
  // The farthest first: ranks 53-60 (58% to 60%) over 50-52.
  EXPECT_EQ(printed[1], 53);
  EXPECT_EQ(printed.back(), 60);
  EXPECT_NE(note.find("91 of 100 ranks not printed: 3 of them more than 5% from the median"),
            std::string::npos)
      << note;
}

TEST(RankRows, RanksTheUserSelectedAreAllPrinted) {
  Table t(200);
  t.figures[7] = {300.0, 0.0};
  std::string note;
  EXPECT_EQ(t.printed({.every_rank = true}, note).size(), 200u);
  EXPECT_EQ(note, "");
}

}  // namespace
}  // namespace partrain::analyzers
