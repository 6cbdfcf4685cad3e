// The recording wrapper over real Gloo communicators: seq identical across ranks, per-peer
// transfer numbering, nccl-tests byte counts, states and times, sub-groups recorded too.
#include "runner/comm/recording_comm.h"

#include <gtest/gtest.h>

#include <array>
#include <mutex>

#include "tests/unit/runner/comm/gloo_world.h"

namespace partrain::comm {
namespace {

using profiler::CollectiveEvent;
using profiler::CollectiveState;

TEST(NcclTestsBytes, MatchesNcclTestsSizeColumn) {
  EXPECT_EQ(nccl_tests_bytes("all_reduce", 100, DType::kF32, 8), 400u);
  EXPECT_EQ(nccl_tests_bytes("broadcast", 100, DType::kBF16, 8), 200u);
  EXPECT_EQ(nccl_tests_bytes("all_gather", 100, DType::kF32, 8), 3200u);
  EXPECT_EQ(nccl_tests_bytes("reduce_scatter", 100, DType::kF32, 8), 3200u);
  EXPECT_EQ(nccl_tests_bytes("all_to_all", 100, DType::kI64, 4), 3200u);
  EXPECT_EQ(nccl_tests_bytes("send", 10, DType::kI64, 4), 80u);
  EXPECT_EQ(nccl_tests_bytes("barrier", 0, DType::kF32, 4), 0u);
}

TEST(RecordingComm, NumbersCollectivesAndTransfersAlikeOnEveryRank) {
  constexpr int kSize = 3;
  std::array<std::vector<CollectiveEvent>, kSize> events;
  std::mutex sink_mutex;
  std::array<int, kSize> sunk{};
  testing::run_world(kSize, [&](int rank, Comm& base) {
    profiler::FlightRecorder recorder(100, [&](const CollectiveEvent&) {
      std::lock_guard lock(sink_mutex);
      ++sunk[static_cast<size_t>(rank)];
    });
    {
      // Borrow the test world's communicator: wrap a split of it that holds every rank.
      StatusOr<std::unique_ptr<Comm>> whole = base.split(0, rank);
      ASSERT_TRUE(whole.is_ok());
      RecordingComm comm(std::move(*whole), recorder);
      std::vector<float> data(10, 1.0f), gathered(10 * kSize);
      ASSERT_TRUE(comm.all_reduce(data.data(), data.data(), 10, DType::kF32, ReduceOp::kSum).is_ok());
      ASSERT_TRUE(comm.all_gather(data.data(), gathered.data(), 10, DType::kF32).is_ok());
      ASSERT_TRUE(comm.reduce_scatter(gathered.data(), data.data(), 10, DType::kF32, ReduceOp::kAvg).is_ok());
      ASSERT_TRUE(comm.broadcast(data.data(), data.data(), 10, DType::kF32, 1).is_ok());
      ASSERT_TRUE(comm.barrier().is_ok());
      // Transfers: rank r sends twice to r+1 and receives twice from r-1.
      const int right = (rank + 1) % kSize, left = (rank + kSize - 1) % kSize;
      std::array<int64_t, 2> out = {rank, rank}, in = {0, 0};
      std::vector<WorkPtr> works;
      for (auto& v : out) works.push_back(comm.send_async(&v, 1, DType::kI64, right));
      for (auto& v : in) works.push_back(comm.recv_async(&v, 1, DType::kI64, left));
      for (auto& w : works) ASSERT_TRUE(w->wait().is_ok());
      // A failing op is recorded as failed.
      EXPECT_FALSE(comm.send(out.data(), 1, DType::kI64, rank).is_ok());
      // The sub-group of a recorded communicator is recorded, into the same recorder.
      StatusOr<std::unique_ptr<Comm>> sub = comm.split(rank == 0 ? 0 : 1, rank);
      ASSERT_TRUE(sub.is_ok());
      ASSERT_TRUE((*sub)->barrier().is_ok());
    }
    events[static_cast<size_t>(rank)] = recorder.snapshot();
  });

  for (int rank = 0; rank < kSize; ++rank) {
    const auto& mine = events[static_cast<size_t>(rank)];
    ASSERT_EQ(mine.size(), 11u) << "rank " << rank;
    const std::array<std::string_view, 5> ops = {"all_reduce", "all_gather", "reduce_scatter",
                                                 "broadcast", "barrier"};
    const std::array<uint64_t, 5> bytes = {40, 120, 120, 40, 0};
    for (size_t i = 0; i < ops.size(); ++i) {
      EXPECT_EQ(mine[i].op, ops[i]);
      EXPECT_EQ(mine[i].seq, i);
      EXPECT_EQ(mine[i].bytes, bytes[i]) << ops[i];
      EXPECT_EQ(mine[i].comm_id, "world/split0/color0");
      EXPECT_EQ(mine[i].state, CollectiveState::kCompleted);
      EXPECT_EQ(mine[i].rank, rank);
      EXPECT_EQ(mine[i].group_ranks, (std::vector<int>{0, 1, 2}));
      EXPECT_LE(mine[i].enqueue_ns, mine[i].start_ns);
      EXPECT_LE(mine[i].start_ns, mine[i].end_ns);
      if (i > 0) {
        EXPECT_LE(mine[i - 1].end_ns, mine[i].start_ns) << "issue order";
      }
    }
    EXPECT_EQ(mine[0].reduce_op, "sum");
    EXPECT_EQ(mine[2].reduce_op, "avg");
    EXPECT_EQ(mine[1].reduce_op, "");
    EXPECT_EQ(mine[3].peer, 1);  // the broadcast root
    EXPECT_EQ(mine[0].dtype, "float");
    // Per-peer, per-direction numbering: the n-th send to a peer and its n-th recv match.
    for (size_t i = 5; i < 9; ++i) {
      EXPECT_EQ(mine[i].op, i < 7 ? "send" : "recv");
      EXPECT_EQ(mine[i].seq, (i - 5) % 2);
      EXPECT_EQ(mine[i].peer, i < 7 ? (rank + 1) % kSize : (rank + kSize - 1) % kSize);
      EXPECT_EQ(mine[i].bytes, 8u);
      EXPECT_EQ(mine[i].state, CollectiveState::kCompleted);
    }
    EXPECT_EQ(mine[9].op, "send");
    EXPECT_EQ(mine[9].state, CollectiveState::kFailed);
    EXPECT_EQ(mine[10].op, "barrier");
    EXPECT_EQ(mine[10].seq, 0u);
    EXPECT_EQ(mine[10].comm_id, fmt::format("world/split0/color0/split0/color{}", rank == 0 ? 0 : 1));
    EXPECT_EQ(mine[10].state, CollectiveState::kCompleted);
    EXPECT_EQ(sunk[static_cast<size_t>(rank)], 11);
  }
  // seq and op agree across ranks: that is how collectives are matched.
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(events[0][i].seq, events[2][i].seq);
    EXPECT_EQ(events[0][i].op, events[2][i].op);
  }
}

TEST(RecordingComm, AsyncOpIsStartedOrCompletedWithoutWaiting) {
  testing::run_world(2, [&](int, Comm& base) {
    profiler::FlightRecorder recorder;
    StatusOr<std::unique_ptr<Comm>> whole = base.split(0, 0);
    ASSERT_TRUE(whole.is_ok());
    RecordingComm comm(std::move(*whole), recorder);
    std::vector<float> data(1 << 20, 1.0f);
    WorkPtr work = comm.all_reduce_async(data.data(), data.data(), data.size(), DType::kF32, ReduceOp::kSum);
    // The worker reports completion itself: poll the recorder, not the Work.
    for (int i = 0; i < 2000 && recorder.snapshot()[0].state != CollectiveState::kCompleted; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(recorder.snapshot()[0].state, CollectiveState::kCompleted);
    ASSERT_TRUE(work->wait().is_ok());
    EXPECT_EQ(data[0], 2.0f);
  });
}

}  // namespace
}  // namespace partrain::comm

namespace partrain::comm {
namespace {

// An exchange (send right, receive left, in one call) is two recorder entries numbered per
// peer like lone transfers, and a ring of exchanges with large buffers completes.
TEST(RecordingComm, SendRecvExchangeIsASendAndARecv) {
  constexpr int kSize = 3;
  constexpr size_t kCount = 1 << 18;  // 1 MiB of floats: larger than any socket buffer
  testing::run_world(kSize, [&](int rank, Comm& base) {
    profiler::FlightRecorder recorder;
    StatusOr<std::unique_ptr<Comm>> whole = base.split(0, rank);
    ASSERT_TRUE(whole.is_ok());
    RecordingComm comm(std::move(*whole), recorder);
    const int right = (rank + 1) % kSize, left = (rank + kSize - 1) % kSize;
    std::vector<float> out(kCount, static_cast<float>(rank)), in(kCount, -1.0f);
    for (int round = 0; round < 2; ++round) {
      ASSERT_TRUE(comm.send_recv(out.data(), right, in.data(), left, kCount, DType::kF32).is_ok());
      EXPECT_EQ(in.front(), static_cast<float>(left));
      EXPECT_EQ(in.back(), static_cast<float>(left));
    }
    std::vector<CollectiveEvent> events = recorder.snapshot();
    ASSERT_EQ(events.size(), 4u);
    for (size_t i = 0; i < events.size(); ++i) {
      const CollectiveEvent& e = events[i];
      EXPECT_EQ(e.op, i % 2 == 0 ? "send" : "recv");
      EXPECT_EQ(e.peer, i % 2 == 0 ? right : left);
      EXPECT_EQ(e.seq, i / 2);  // the n-th send to right, the n-th recv from left
      EXPECT_EQ(e.bytes, kCount * sizeof(float));
      EXPECT_EQ(e.state, CollectiveState::kCompleted);
    }
  });
}

}  // namespace
}  // namespace partrain::comm
