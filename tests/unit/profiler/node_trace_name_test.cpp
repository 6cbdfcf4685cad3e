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

}  // namespace
}  // namespace partrain::profiler
