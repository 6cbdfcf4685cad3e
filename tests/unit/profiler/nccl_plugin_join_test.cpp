// NcclPluginJoin: each row meets the plugin's report of its call, whichever arrives first, by
// communicator (bound at init or by size and rank), op, count and order; rows on communicators
// with no plugin context, or of one rank, go at once; nothing waits forever.
#include "profiler/nccl_plugin_join.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace partrain::profiler {
namespace {

struct Delivered {
  NcclCallRecord row;
  std::optional<NcclPluginOp> report;
};

NcclCallRecord call(std::string_view op, uint64_t count, uint64_t correlation,
                    std::string comm = "nccl-a", int group_size = 2, int peer = -1) {
  NcclCallRecord record;
  record.correlation = correlation;
  record.event.comm_id = std::move(comm);
  record.event.op = op;
  record.event.count = count;
  record.event.group_size = group_size;
  record.event.rank = 0;
  record.event.peer = peer;
  return record;
}

NcclPluginOp report(std::string_view op, uint64_t count, int64_t start, uint64_t hash = 0x1,
                    int peer = -1) {
  NcclPluginOp result;
  result.comm_hash = hash;
  result.op = op;
  result.count = count;
  result.peer = peer;
  result.algorithm = "Ring";
  result.protocol = "Simple";
  result.channels = 2;
  result.gpu_start_ns = start;
  result.gpu_end_ns = start + 100;
  return result;
}

class NcclPluginJoinTest : public ::testing::Test {
 protected:
  std::vector<Delivered> delivered_;
  NcclPluginJoin join_{[this](const NcclCallRecord& row, const NcclPluginOp* op) {
    delivered_.push_back({row, op != nullptr ? std::optional(*op) : std::nullopt});
  }};
};

TEST_F(NcclPluginJoinTest, ARowWaitsForItsReportAndLeavesWithIt) {
  join_.bind(0x1, "nccl-a");
  join_.call_recorded(call("all_reduce", 1024, 5));
  join_.deliver(call("all_reduce", 1024, 5));
  EXPECT_TRUE(delivered_.empty());
  join_.op_reported(report("all_reduce", 1024, 7000));
  ASSERT_EQ(delivered_.size(), 1u);
  ASSERT_TRUE(delivered_[0].report);
  EXPECT_EQ(delivered_[0].report->gpu_start_ns, 7000);
  EXPECT_EQ(join_.stats().joined, 1u);
}

TEST_F(NcclPluginJoinTest, AReportBeforeItsCallIsKeptForIt) {
  join_.bind(0x1, "nccl-a");
  join_.op_reported(report("broadcast", 10, 300));  // the kernel ended before the call returned
  join_.call_recorded(call("broadcast", 10, 9));
  join_.deliver(call("broadcast", 10, 9));
  ASSERT_EQ(delivered_.size(), 1u);
  ASSERT_TRUE(delivered_[0].report);
  EXPECT_EQ(delivered_[0].report->gpu_start_ns, 300);
}

TEST_F(NcclPluginJoinTest, AGroupsTasksReorderedByNcclMeetTheirCallsByCount) {
  join_.bind(0x1, "nccl-a");
  // Three calls of one group (one correlation id); NCCL runs the largest first.
  join_.call_recorded(call("all_reduce", 8, 3));
  join_.call_recorded(call("all_reduce", 4096, 3));
  join_.call_recorded(call("send", 256, 3, "nccl-a", 2, 1));
  join_.op_reported(report("all_reduce", 4096, 100));
  join_.op_reported(report("send", 256, 200, 0x1, 1));
  join_.op_reported(report("all_reduce", 8, 300));
  join_.deliver(call("all_reduce", 8, 3));
  join_.deliver(call("all_reduce", 4096, 3));
  join_.deliver(call("send", 256, 3, "nccl-a", 2, 1));
  ASSERT_EQ(delivered_.size(), 3u);
  EXPECT_EQ(delivered_[0].report->gpu_start_ns, 300);
  EXPECT_EQ(delivered_[1].report->gpu_start_ns, 100);
  EXPECT_EQ(delivered_[2].report->gpu_start_ns, 200);
}

TEST_F(NcclPluginJoinTest, RowsWithNothingComingLeaveAtOnce) {
  join_.bind(0x1, "nccl-a");
  join_.call_recorded(call("all_reduce", 4, 1, "nccl-b"));     // no plugin context for it
  join_.call_recorded(call("all_reduce", 4, 2, "nccl-a", 1));  // one rank: no kernel
  join_.deliver(call("all_reduce", 4, 1, "nccl-b"));
  join_.deliver(call("all_reduce", 4, 2, "nccl-a", 1));
  join_.deliver(call("all_reduce", 4, 0));  // no correlation (gloo)
  ASSERT_EQ(delivered_.size(), 3u);
  for (const Delivered& row : delivered_) EXPECT_FALSE(row.report);
}

TEST_F(NcclPluginJoinTest, AnUnboundContextIsBoundByTheCommunicatorsSizeAndRank) {
  join_.context_created(0x77, 2, 0);
  join_.call_recorded(call("all_gather", 100, 4, "nccl-split"));
  join_.op_reported(report("all_gather", 100, 50, 0x77));
  join_.deliver(call("all_gather", 100, 4, "nccl-split"));
  ASSERT_EQ(delivered_.size(), 1u);
  EXPECT_TRUE(delivered_[0].report);
}

TEST_F(NcclPluginJoinTest, TwoUnboundContextsOfOneShapeAreNotGuessedBetween) {
  join_.context_created(0x77, 2, 0);
  join_.context_created(0x78, 2, 0);
  join_.call_recorded(call("all_gather", 100, 4, "nccl-x"));
  join_.deliver(call("all_gather", 100, 4, "nccl-x"));
  ASSERT_EQ(delivered_.size(), 1u);  // at once: no report is expected for it
  EXPECT_FALSE(delivered_[0].report);
  join_.op_reported(report("all_gather", 100, 50, 0x78));
  EXPECT_EQ(join_.stats().unmatched, 1u);
}

TEST_F(NcclPluginJoinTest, APyTorchRowTakesTheSpanOfItsCallsOnceAllHaveReported) {
  join_.bind(0x1, "nccl-a");
  join_.call_recorded(call("all_reduce", 10, 8));
  join_.call_recorded(call("all_reduce", 20, 8));
  NcclCallRecord torch_row = call("all_reduce", 30, 8);  // PyTorch's coalesced op
  torch_row.torch_op = 1;
  join_.deliver(torch_row);
  join_.op_reported(report("all_reduce", 10, 1000));
  EXPECT_TRUE(delivered_.empty());
  join_.op_reported(report("all_reduce", 20, 500));
  ASSERT_EQ(delivered_.size(), 1u);
  ASSERT_TRUE(delivered_[0].report);
  EXPECT_EQ(delivered_[0].report->gpu_start_ns, 500);
  EXPECT_EQ(delivered_[0].report->gpu_end_ns, 1100);
}

TEST_F(NcclPluginJoinTest, FlushSendsWhatStillWaitsWithHostTimes) {
  join_.bind(0x1, "nccl-a");
  join_.call_recorded(call("reduce_scatter", 50, 6));
  join_.deliver(call("reduce_scatter", 50, 6));
  join_.op_reported(report("all_reduce", 99, 1, 0x1));  // no call of it
  join_.op_reported(report("all_reduce", 99, 1, 0x5));  // no context of it
  EXPECT_TRUE(delivered_.empty());
  join_.flush();
  ASSERT_EQ(delivered_.size(), 1u);
  EXPECT_FALSE(delivered_[0].report);
  const NcclPluginJoinStats stats = join_.stats();
  EXPECT_EQ(stats.host_only, 1u);
  EXPECT_EQ(stats.unmatched, 2u);
}

TEST_F(NcclPluginJoinTest, RowsWaitingBeyondTheBoundLeaveOldestFirst) {
  join_.bind(0x1, "nccl-a");
  for (uint64_t id = 1; id <= NcclPluginJoin::kMaxWaiting + 1; ++id) {
    join_.call_recorded(call("all_reduce", 1, id));
    join_.deliver(call("all_reduce", 1, id));
  }
  ASSERT_EQ(delivered_.size(), 1u);
  EXPECT_EQ(delivered_[0].row.correlation, 1u);
  EXPECT_FALSE(delivered_[0].report);
}

}  // namespace
}  // namespace partrain::profiler
