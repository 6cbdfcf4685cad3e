#include "cli/suggestions.h"

#include <gtest/gtest.h>

namespace partrain::cli {
namespace {

const std::vector<std::string> kCommands = {"launch", "trace", "bench", "memory", "export",
                                            "merge", "import", "analyze", "top", "recommend"};

TEST(EditDistance, CountsInsertionsDeletionsReplacementsAndSwaps) {
  EXPECT_EQ(edit_distance("launch", "launch"), 0u);
  EXPECT_EQ(edit_distance("lauch", "launch"), 1u);
  EXPECT_EQ(edit_distance("luanch", "launch"), 1u);  // a swap is one edit, as git counts it
  EXPECT_EQ(edit_distance("lxunch", "launch"), 1u);
  EXPECT_EQ(edit_distance("", "top"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(ClosestNames, ATypoFindsItsCommand) {
  EXPECT_EQ(closest_names("lauch", kCommands), std::vector<std::string>{"launch"});
  EXPECT_EQ(closest_names("analyse", kCommands), std::vector<std::string>{"analyze"});
  EXPECT_EQ(closest_names("--nproc-per-nod", {"--nnodes", "--nproc-per-node", "--node-rank"}),
            std::vector<std::string>{"--nproc-per-node"});
  EXPECT_EQ(closest_names("rec", kCommands), std::vector<std::string>{"recommend"});
}

TEST(ClosestNames, NothingCloseSuggestsNothing) {
  EXPECT_TRUE(closest_names("frobnicate", kCommands).empty());
  EXPECT_TRUE(closest_names("", kCommands).empty());
}

TEST(DidYouMean, NamesEachSuggestion) {
  EXPECT_EQ(did_you_mean({}), "");
  EXPECT_EQ(did_you_mean({"launch"}), " (did you mean `launch`?)");
  EXPECT_EQ(did_you_mean({"a", "b", "c"}), " (did you mean `a`, `b` or `c`?)");
}

}  // namespace
}  // namespace partrain::cli
