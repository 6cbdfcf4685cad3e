// NcclTracker: communicator ids every member computes alike, per-communicator numbering, nccl-tests
// sizes, NCCL's per-thread group semantics and calls NCCL rejected.
#include "profiler/nccl_tracker.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <thread>
#include <vector>

namespace partrain::profiler {
namespace {

ncclUniqueId unique_id(const char* text) {
  ncclUniqueId id{};
  std::strncpy(id.internal, text, sizeof(id.internal) - 1);
  return id;
}

ncclComm_t handle(uintptr_t value) { return reinterpret_cast<ncclComm_t>(value); }

class NcclTrackerTest : public ::testing::Test {
 protected:
  NcclTrackerTest()
      : tracker_([this](const NcclCallRecord& r) { calls_.push_back(r); },
                 [this](const NcclCommEvent& e) { comm_events_.push_back(e); },
                 /*world_rank=*/1, /*world_size=*/4) {}

  void init(ncclComm_t comm, const char* id, int nranks, int rank) {
    ncclUniqueId unique = unique_id(id);
    tracker_.comm_initialised(comm, std::span(&unique, 1), nranks, rank, "ncclCommInitRank", 10,
                              20, ncclSuccess);
  }
  void call(std::string_view op, ncclComm_t comm, size_t count, ncclDataType_t dtype,
            int peer = -1, ncclResult_t result = ncclSuccess, uint64_t correlation = 7) {
    tracker_.call_made({op, comm, count, dtype, std::nullopt, peer, -1, nullptr}, correlation, 100,
                       150, result);
  }

  std::vector<NcclCallRecord> calls_;
  std::vector<NcclCommEvent> comm_events_;
  NcclTracker tracker_;
};

TEST(NcclNames, CommIdIsTheSameForTheSameUniqueIdAndDiffersOtherwise) {
  ncclUniqueId a = unique_id("job-a");
  ncclUniqueId a_again = unique_id("job-a");
  ncclUniqueId b = unique_id("job-b");
  EXPECT_EQ(nccl_comm_id(std::span(&a, 1)), nccl_comm_id(std::span(&a_again, 1)));
  EXPECT_NE(nccl_comm_id(std::span(&a, 1)), nccl_comm_id(std::span(&b, 1)));
  EXPECT_EQ(nccl_comm_id(std::span(&a, 1)).size(), 5u + 16u);  // "nccl-" + 16 hex digits
  EXPECT_EQ(nccl_dtype_name(ncclBfloat16), "bfloat16");
  EXPECT_EQ(nccl_dtype_bytes(ncclFloat8e5m2), 1u);
  EXPECT_EQ(nccl_dtype_bytes(static_cast<ncclDataType_t>(12)), 0u);
  EXPECT_EQ(nccl_reduce_op_name(static_cast<ncclRedOp_t>(5)), "other");  // a PreMulSum op
  EXPECT_EQ(nccl_result_name(ncclRemoteError), "ncclRemoteError");
}

TEST_F(NcclTrackerTest, NumbersCollectivesPerCommunicatorAndTransfersPerPeer) {
  init(handle(0x10), "world", 4, 1);
  init(handle(0x20), "pair", 2, 0);
  call("all_reduce", handle(0x10), 100, ncclFloat32);
  call("all_gather", handle(0x10), 100, ncclFloat16);
  call("all_reduce", handle(0x20), 8, ncclFloat64);
  call("send", handle(0x10), 10, ncclInt32, 2);
  call("send", handle(0x10), 10, ncclInt32, 2);
  call("send", handle(0x10), 10, ncclInt32, 3);
  call("recv", handle(0x10), 10, ncclInt32, 2);
  ASSERT_EQ(calls_.size(), 7u);
  EXPECT_EQ(calls_[0].event.seq, 0u);
  EXPECT_EQ(calls_[1].event.seq, 1u);
  EXPECT_EQ(calls_[2].event.seq, 0u);  // its own communicator
  EXPECT_EQ(calls_[3].event.seq, 0u);
  EXPECT_EQ(calls_[4].event.seq, 1u);
  EXPECT_EQ(calls_[5].event.seq, 0u);  // another peer
  EXPECT_EQ(calls_[6].event.seq, 0u);  // receives count apart from sends
  // nccl-tests sizes: all_gather counts the gathered buffer (4 ranks x 100 x 2 bytes).
  EXPECT_EQ(calls_[0].event.bytes, 400u);
  EXPECT_EQ(calls_[1].event.bytes, 800u);
  EXPECT_EQ(calls_[3].event.bytes, 40u);
  // The world communicator (size WORLD_SIZE, rank = world rank) has known members; others not.
  EXPECT_EQ(calls_[0].event.group_ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(calls_[2].event.group_ranks.empty());
  EXPECT_EQ(calls_[2].event.group_size, 2);
  EXPECT_EQ(calls_[0].event.state, CollectiveState::kCompleted);
  EXPECT_EQ(calls_[0].event.enqueue_ns, 100);
  EXPECT_EQ(calls_[0].event.end_ns, 150);
}

TEST_F(NcclTrackerTest, GroupCallsAreIssuedByTheOutermostGroupEndWithItsCorrelation) {
  init(handle(0x10), "world", 4, 1);
  tracker_.group_started();
  tracker_.group_started();
  call("send", handle(0x10), 4, ncclFloat32, 2, ncclSuccess, 11);
  tracker_.group_ended(12, 200, ncclSuccess);
  EXPECT_TRUE(calls_.empty());  // still inside the outer group
  call("recv", handle(0x10), 4, ncclFloat32, 0, ncclSuccess, 13);
  tracker_.group_ended(14, 300, ncclSuccess);
  ASSERT_EQ(calls_.size(), 2u);
  for (const NcclCallRecord& record : calls_) {
    EXPECT_EQ(record.correlation, 14u);  // the kernels are launched inside the outer GroupEnd
    EXPECT_EQ(record.event.end_ns, 300);
    EXPECT_EQ(record.event.state, CollectiveState::kCompleted);
  }
  tracker_.group_ended(15, 400, ncclSuccess);  // unmatched: ignored
  EXPECT_EQ(calls_.size(), 2u);
}

// What the interposition asks before linking a call's kernels: whether the thread is in a group
// (its calls launch nothing), and the smallest communicator among the calls its end issues.
TEST_F(NcclTrackerTest, AThreadsOpenGroupIsKnownWithItsSmallestCommunicator) {
  init(handle(0x10), "world", 4, 1);
  init(handle(0x20), "alone", 1, 0);
  EXPECT_EQ(tracker_.launching_comm_nranks(handle(0x10)), 4);  // not in a group
  EXPECT_EQ(tracker_.open_group_fewest_ranks(), std::numeric_limits<int>::max());
  EXPECT_EQ(tracker_.launching_comm_nranks(handle(0x20)), 1);
  EXPECT_EQ(tracker_.launching_comm_nranks(handle(0x30)), 0);  // never seen
  tracker_.group_started();
  EXPECT_EQ(tracker_.launching_comm_nranks(handle(0x10)), std::nullopt);  // in a group
  call("all_reduce", handle(0x10), 4, ncclFloat32);
  EXPECT_EQ(tracker_.open_group_fewest_ranks(), 4);
  call("all_reduce", handle(0x20), 4, ncclFloat32);
  EXPECT_EQ(tracker_.open_group_fewest_ranks(), 1);
  std::thread([this] {
    // another thread's group is not this one's
    EXPECT_EQ(tracker_.launching_comm_nranks(handle(0x10)), 4);
    EXPECT_EQ(tracker_.open_group_fewest_ranks(), std::numeric_limits<int>::max());
  }).join();
  tracker_.group_ended(9, 500, ncclSuccess);
  EXPECT_EQ(tracker_.launching_comm_nranks(handle(0x10)), 4);  // the group ended
}

TEST_F(NcclTrackerTest, GroupDepthIsPerThreadAndAFailedGroupFailsItsCalls) {
  init(handle(0x10), "world", 4, 1);
  tracker_.group_started();
  call("all_reduce", handle(0x10), 4, ncclFloat32);
  std::thread([this] { call("all_reduce", handle(0x10), 4, ncclFloat32); }).join();
  ASSERT_EQ(calls_.size(), 1u);  // the other thread was in no group
  EXPECT_EQ(calls_[0].event.seq, 1u);
  tracker_.group_ended(9, 500, ncclRemoteError);
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(calls_[1].event.seq, 0u);
  EXPECT_EQ(calls_[1].event.state, CollectiveState::kFailed);
}

TEST_F(NcclTrackerTest, ARejectedCallTakesNoNumberAndIsNoCollective) {
  init(handle(0x10), "world", 4, 1);
  call("all_reduce", handle(0x10), 4, ncclFloat32, -1, ncclInvalidArgument);
  call("all_reduce", handle(0x10), 4, ncclFloat32);
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(calls_[0].event.seq, 0u);
  ASSERT_EQ(comm_events_.size(), 2u);  // the init, then the rejection
  EXPECT_EQ(comm_events_[1].call, "all_reduce");
  EXPECT_EQ(comm_events_[1].result, ncclInvalidArgument);
}

TEST_F(NcclTrackerTest, SplitChildrenAreNamedAlikeOnEveryMember) {
  init(handle(0x10), "world", 4, 1);
  tracker_.comm_split(handle(0x10), 3, handle(0x30), 2, 0, 0, 1, ncclSuccess);
  tracker_.comm_split(handle(0x10), 3, handle(0x40), 2, 0, 0, 1, ncclSuccess);
  tracker_.comm_split(handle(0x10), PARTRAIN_NCCL_SPLIT_NOCOLOR, nullptr, 0, 0, 0, 1, ncclSuccess);
  const std::string world = tracker_.comm_info(handle(0x10))->id;
  EXPECT_EQ(tracker_.comm_info(handle(0x30))->id, world + ".split0.c3");
  EXPECT_EQ(tracker_.comm_info(handle(0x40))->id, world + ".split1.c3");
  EXPECT_EQ(comm_events_.back().comm_id, world);  // no colour: shown on the parent
  tracker_.comm_ended(handle(0x30), "ncclCommDestroy", 0, 1, ncclSuccess);
  EXPECT_FALSE(tracker_.knows(handle(0x30)));
  tracker_.comm_ended(handle(0x40), "ncclCommFinalize", 0, 1, ncclSuccess);
  EXPECT_TRUE(tracker_.knows(handle(0x40)));  // valid until ncclCommDestroy
}

TEST_F(NcclTrackerTest, UnknownHandlesAreAdoptedUnderAnIdOfThisRank) {
  tracker_.comm_adopted(handle(0x50), 8, 5);
  call("all_reduce", handle(0x50), 2, ncclInt64);
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(calls_[0].event.comm_id.rfind("nccl-r1-", 0), 0u) << calls_[0].event.comm_id;
  EXPECT_EQ(calls_[0].event.group_size, 8);
  EXPECT_EQ(calls_[0].event.rank, 5);
}

TEST_F(NcclTrackerTest, GroupCallsOfAProgramThatNeverEndsItsGroupAreFlushedAsEnqueued) {
  init(handle(0x10), "world", 4, 1);
  tracker_.group_started();
  call("all_reduce", handle(0x10), 4, ncclFloat32);
  tracker_.flush_open_groups(999);
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(calls_[0].event.state, CollectiveState::kEnqueued);
  EXPECT_EQ(calls_[0].event.end_ns, 999);
}

}  // namespace
}  // namespace partrain::profiler
