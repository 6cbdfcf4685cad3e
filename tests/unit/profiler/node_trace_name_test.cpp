// The names of a run's per-node trace files, both ways: node N's file from node 0's, and node 0's
// from node N's (what merge and analyze name for a reader holding one file).
#include "profiler/node_trace_name.h"

#include <gtest/gtest.h>

namespace partrain::profiler {
namespace {

TEST(NodeTraceName, EachNodesFileBesideNodeZeros) {
  EXPECT_EQ(node_trace_path("runs/run.db", 0), "runs/run.db");
  EXPECT_EQ(node_trace_path("runs/run.db", 3), "runs/run.node3.db");
  EXPECT_EQ(node_trace_path("trace", 1), "trace.node1");
}

TEST(NodeTraceName, NodeZerosFileFromAnotherNodes) {
  EXPECT_EQ(node0_trace_path("runs/run.node3.db", 3), "runs/run.db");
  EXPECT_EQ(node0_trace_path("runs/run.db", 0), "runs/run.db");
  EXPECT_EQ(node0_trace_path("trace.node1", 1), "trace");
  // Renamed by hand: nothing to strip, the name is taken as node 0's.
  EXPECT_EQ(node0_trace_path("runs/mine.db", 2), "runs/mine.db");
  for (int node : {1, 2, 7}) {
    EXPECT_EQ(node0_trace_path(node_trace_path("a/b.c.db", node), node), "a/b.c.db");
  }
}

TEST(NodeTraceName, OtherNodesFilesAllNamedWhenFew) {
  EXPECT_EQ(other_node_files_text("r/run.db", 3, 1), "r/run.db, r/run.node2.db");
  EXPECT_EQ(node_files_merge_arguments("r/run.db", 3), "r/run.db r/run.node1.db r/run.node2.db");
}

// A trace whose run said 2e9 ranks of a 2-rank file: analyze and merge built one path per node
// (bad_alloc, or a 449 MB report for 2e7). A few are named and the rest counted.
TEST(NodeTraceName, OtherNodesFilesOfAHugeRunAreAFewAndACount) {
  const std::string text = other_node_files_text("r/run.db", 1'000'000'000, 0);
  EXPECT_EQ(text,
            "r/run.node1.db, r/run.node2.db, r/run.node3.db, r/run.node4.db, r/run.node5.db, "
            "r/run.node6.db, r/run.node7.db, r/run.node8.db, ... and 999999991 more");
  EXPECT_EQ(node_files_merge_arguments("r/run.db", 1'000'000'000), "r/run.db r/run.node*.db");
  EXPECT_FALSE(other_node_files_present("r/run.db", 1'000'000'000, 0));
}

}  // namespace
}  // namespace partrain::profiler
