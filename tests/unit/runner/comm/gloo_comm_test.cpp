// Every Gloo collective against a host reference, for world sizes 1-4, every dtype and reduce
// op, counts 0, 1 and 1023, in place and out of place; plus sub-groups, async overlap, p2p and
// errors. Ranks are threads sharing an InMemoryStore.
#include "runner/comm/gloo_comm.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <numeric>
#include <thread>

#include "core/clock.h"
#include "tests/unit/runner/comm/gloo_world.h"

namespace partrain::comm {
namespace {

using testing::get;
using testing::is_float;
using testing::kAllDTypes;
using testing::kAllOps;
using testing::put;
using testing::run_world;
using testing::tolerance;

constexpr size_t kCounts[] = {0, 1, 1023};

// Small integers: exact in every dtype, and so are their sums over four ranks.
double value(int rank, size_t i) { return static_cast<double>((rank * 7 + static_cast<int>(i % 1000) * 3) % 11) - 5; }

double reference(ReduceOp op, DType dtype, int size, size_t i, size_t offset = 0) {
  double sum = 0, max = -1e30, min = 1e30;
  for (int r = 0; r < size; ++r) {
    const double v = value(r, offset + i);
    sum += v;
    max = std::max(max, v);
    min = std::min(min, v);
  }
  switch (op) {
    case ReduceOp::kSum: return sum;
    case ReduceOp::kAvg: return is_float(dtype) ? sum / size : std::trunc(sum / size);
    case ReduceOp::kMax: return max;
    case ReduceOp::kMin: return min;
  }
  return 0;
}

std::vector<uint8_t> filled(DType dtype, int rank, size_t count) {
  std::vector<uint8_t> buffer(std::max<size_t>(count, 1) * dtype_size(dtype));
  for (size_t i = 0; i < count; ++i) put(dtype, buffer, i, value(rank, i));
  return buffer;
}

class GlooCollectives : public ::testing::TestWithParam<int> {};

TEST_P(GlooCollectives, AllReduceEveryOpDtypeCountAndPlacement) {
  const int size = GetParam();
  run_world(size, [&](int rank, Comm& comm) {
    for (DType dtype : kAllDTypes) {
      for (ReduceOp op : kAllOps) {
        for (size_t count : kCounts) {
          for (bool in_place : {false, true}) {
            std::vector<uint8_t> send = filled(dtype, rank, count);
            std::vector<uint8_t> recv(send.size(), 0xAB);
            void* out = in_place ? send.data() : recv.data();
            Status status = comm.all_reduce(send.data(), out, count, dtype, op);
            ASSERT_TRUE(status.is_ok()) << status.message();
            const auto& result = in_place ? send : recv;
            for (size_t i = 0; i < count; ++i) {
              const double expected = reference(op, dtype, size, i);
              ASSERT_NEAR(get(dtype, result, i), expected, tolerance(dtype, expected))
                  << dtype_name(dtype) << " " << reduce_op_name(op) << " count " << count
                  << " in_place " << in_place << " i " << i;
            }
          }
        }
      }
    }
  });
}

TEST_P(GlooCollectives, ReduceScatterEveryOpDtypeCountAndPlacement) {
  const int size = GetParam();
  run_world(size, [&](int rank, Comm& comm) {
    for (DType dtype : kAllDTypes) {
      for (ReduceOp op : kAllOps) {
        for (size_t count : kCounts) {
          // 0: separate recv; 1: recv is this rank's block of send (NCCL's in place); 2: recv == send.
          for (int placement : {0, 1, 2}) {
            const size_t elt = dtype_size(dtype);
            std::vector<uint8_t> send = filled(dtype, rank, count * static_cast<size_t>(size));
            std::vector<uint8_t> recv(std::max<size_t>(count, 1) * elt, 0xAB);
            uint8_t* out = placement == 0 ? recv.data()
                           : placement == 1 ? send.data() + static_cast<size_t>(rank) * count * elt
                                            : send.data();
            Status status = comm.reduce_scatter(send.data(), out, count, dtype, op);
            ASSERT_TRUE(status.is_ok()) << status.message();
            std::vector<uint8_t> result(out, out + count * elt);
            const size_t offset = static_cast<size_t>(rank) * count;
            for (size_t i = 0; i < count; ++i) {
              const double expected = reference(op, dtype, size, i, offset);
              ASSERT_NEAR(get(dtype, result, i), expected, tolerance(dtype, expected))
                  << dtype_name(dtype) << " " << reduce_op_name(op) << " count " << count
                  << " placement " << placement << " i " << i;
            }
          }
        }
      }
    }
  });
}

TEST_P(GlooCollectives, AllGatherEveryDtypeCountAndPlacement) {
  const int size = GetParam();
  run_world(size, [&](int rank, Comm& comm) {
    for (DType dtype : kAllDTypes) {
      for (size_t count : kCounts) {
        for (bool in_place : {false, true}) {
          const size_t elt = dtype_size(dtype);
          std::vector<uint8_t> recv(std::max<size_t>(count * static_cast<size_t>(size), 1) * elt, 0);
          std::vector<uint8_t> send = filled(dtype, rank, count);
          const void* input = send.data();
          if (in_place) {  // the input already sits in this rank's block of the output
            std::copy(send.begin(), send.begin() + static_cast<std::ptrdiff_t>(count * elt),
                      recv.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(rank) * count * elt));
            input = recv.data() + static_cast<size_t>(rank) * count * elt;
          }
          Status status = comm.all_gather(input, recv.data(), count, dtype);
          ASSERT_TRUE(status.is_ok()) << status.message();
          for (int r = 0; r < size; ++r) {
            for (size_t i = 0; i < count; ++i) {
              ASSERT_EQ(get(dtype, recv, static_cast<size_t>(r) * count + i), value(r, i))
                  << dtype_name(dtype) << " count " << count << " block " << r;
            }
          }
        }
      }
    }
  });
}

TEST_P(GlooCollectives, BroadcastFromEveryRoot) {
  const int size = GetParam();
  run_world(size, [&](int rank, Comm& comm) {
    for (DType dtype : kAllDTypes) {
      for (int root = 0; root < size; ++root) {
        for (size_t count : kCounts) {
          for (bool in_place : {false, true}) {
            std::vector<uint8_t> send = filled(dtype, rank, count);
            std::vector<uint8_t> recv(send.size(), 0);
            void* out = in_place ? send.data() : recv.data();
            Status status = comm.broadcast(send.data(), out, count, dtype, root);
            ASSERT_TRUE(status.is_ok()) << status.message();
            const auto& result = in_place ? send : recv;
            for (size_t i = 0; i < count; ++i) {
              ASSERT_EQ(get(dtype, result, i), value(root, i))
                  << dtype_name(dtype) << " root " << root << " count " << count;
            }
          }
        }
      }
    }
  });
}

TEST_P(GlooCollectives, AllToAllEveryDtypeCountAndPlacement) {
  const int size = GetParam();
  // Block j of rank r's send holds value(r, j * count + i): rank j must receive it as block r.
  run_world(size, [&](int rank, Comm& comm) {
    for (DType dtype : kAllDTypes) {
      for (size_t count : kCounts) {
        for (bool in_place : {false, true}) {
          const size_t total = count * static_cast<size_t>(size);
          std::vector<uint8_t> send = filled(dtype, rank, total);
          std::vector<uint8_t> recv(send.size(), 0);
          void* out = in_place ? send.data() : recv.data();
          Status status = comm.all_to_all(send.data(), out, count, dtype);
          ASSERT_TRUE(status.is_ok()) << status.message();
          const auto& result = in_place ? send : recv;
          for (int r = 0; r < size; ++r) {
            for (size_t i = 0; i < count; ++i) {
              const size_t at = static_cast<size_t>(r) * count + i;
              ASSERT_EQ(get(dtype, result, at), value(r, static_cast<size_t>(rank) * count + i))
                  << dtype_name(dtype) << " count " << count << " from " << r;
            }
          }
        }
      }
    }
  });
}

TEST_P(GlooCollectives, BarrierWaitsForTheLastRank) {
  const int size = GetParam();
  run_world(size, [&](int rank, Comm& comm) {
    ASSERT_TRUE(comm.barrier().is_ok());
    const int64_t start = monotonic_ns();
    if (rank == size - 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(comm.barrier().is_ok());
    if (size > 1) {
      EXPECT_GE(monotonic_ns() - start, 90'000'000) << "rank " << rank;
    }
  });
}

TEST_P(GlooCollectives, SplitIntoEvenAndOdd) {
  const int size = GetParam();
  run_world(size, [&](int rank, Comm& comm) {
    // Reverse key order: sub-group ranks follow (key, rank).
    StatusOr<std::unique_ptr<Comm>> sub = comm.split(rank % 2, -rank);
    ASSERT_TRUE(sub.is_ok()) << sub.status().message();
    ASSERT_NE(*sub, nullptr);
    Comm& group = **sub;
    std::vector<int> expected_members;
    for (int r = size - 1; r >= 0; --r) {
      if (r % 2 == rank % 2) expected_members.push_back(r);
    }
    EXPECT_EQ(group.world_ranks(), expected_members);
    EXPECT_EQ(group.size(), static_cast<int>(expected_members.size()));
    EXPECT_EQ(expected_members[static_cast<size_t>(group.rank())], rank);
    EXPECT_EQ(group.id(), fmt::format("world/split0/color{}", rank % 2));

    // The sum over the sub-group is the sum of its members' world ranks.
    int64_t mine = rank;
    int64_t sum = 0;
    ASSERT_TRUE(group.all_reduce(&mine, &sum, 1, DType::kI64, ReduceOp::kSum).is_ok());
    EXPECT_EQ(sum, std::accumulate(expected_members.begin(), expected_members.end(), int64_t{0}));
    // Every member agrees on the id.
    std::vector<int64_t> ids(static_cast<size_t>(group.size()));
    const auto hash = static_cast<int64_t>(std::hash<std::string>{}(group.id()) >> 1);
    ASSERT_TRUE(group.all_gather(&hash, ids.data(), 1, DType::kI64).is_ok());
    for (int64_t id : ids) EXPECT_EQ(id, hash);

    // A rank may opt out; the parent stays usable and a second split gets a new id.
    StatusOr<std::unique_ptr<Comm>> second = comm.split(rank == 0 ? kNoColor : 7, rank);
    ASSERT_TRUE(second.is_ok()) << second.status().message();
    if (rank == 0) {
      EXPECT_EQ(*second, nullptr);
    } else {
      ASSERT_NE(*second, nullptr);
      EXPECT_EQ((*second)->id(), "world/split1/color7");
      EXPECT_EQ((*second)->size(), size - 1);
      ASSERT_TRUE((*second)->barrier().is_ok());
    }
    ASSERT_TRUE(comm.barrier().is_ok());
  });
}

TEST_P(GlooCollectives, P2pRingExchangePostedBeforeWaiting) {
  const int size = GetParam();
  if (size == 1) GTEST_SKIP() << "a ring of one has no peer";
  run_world(size, [&](int rank, Comm& comm) {
    const int right = (rank + 1) % size;
    const int left = (rank + size - 1) % size;
    // 1 MiB each way, both posted first: waiting on the send first must not deadlock.
    const size_t count = 256 * 1024;
    for (int round = 0; round < 3; ++round) {
      std::vector<float> out(count, static_cast<float>(rank * 10 + round));
      std::vector<float> in(count, -1.0f);
      WorkPtr send = comm.send_async(out.data(), count, DType::kF32, right);
      WorkPtr recv = comm.recv_async(in.data(), count, DType::kF32, left);
      ASSERT_TRUE(send->wait().is_ok());
      ASSERT_TRUE(recv->wait().is_ok());
      EXPECT_TRUE(send->is_completed());
      EXPECT_EQ(in.front(), static_cast<float>(left * 10 + round));
      EXPECT_EQ(in.back(), static_cast<float>(left * 10 + round));
    }
  });
}

TEST(GlooP2p, NthSendPairsWithNthRecvAndZeroCountCompletes) {
  run_world(2, [&](int rank, Comm& comm) {
    const int peer = 1 - rank;
    std::vector<WorkPtr> works;
    std::array<int32_t, 3> out = {rank * 100, rank * 100 + 1, rank * 100 + 2};
    std::array<int32_t, 3> in = {-1, -1, -1};
    // Both ranks send three messages to each other before receiving any.
    for (int32_t& v : out) works.push_back(comm.send_async(&v, 1, DType::kI32, peer));
    works.push_back(comm.send_async(nullptr, 0, DType::kI32, peer));
    for (int32_t& v : in) works.push_back(comm.recv_async(&v, 1, DType::kI32, peer));
    works.push_back(comm.recv_async(nullptr, 0, DType::kI32, peer));
    for (auto& work : works) ASSERT_TRUE(work->wait().is_ok());
    EXPECT_EQ(in[0], peer * 100);
    EXPECT_EQ(in[1], peer * 100 + 1);
    EXPECT_EQ(in[2], peer * 100 + 2);
  });
}

TEST(GlooAsync, AllReduceOverlapsComputeOnTheCaller) {
  run_world(2, [&](int rank, Comm& comm) {
    const size_t count = 4 * 1024 * 1024;
    std::vector<float> grads(count, static_cast<float>(rank + 1));
    WorkPtr work = comm.all_reduce_async(grads.data(), grads.data(), count, DType::kF32,
                                         ReduceOp::kSum);
    // Compute on this thread while the worker communicates.
    double acc = 0;
    for (int i = 1; i <= 2'000'000; ++i) acc += 1.0 / i;
    EXPECT_GT(acc, 14.0);
    ASSERT_TRUE(work->wait().is_ok());
    EXPECT_TRUE(work->is_completed());
    EXPECT_EQ(grads.front(), 3.0f);
    EXPECT_EQ(grads.back(), 3.0f);
  });
}

TEST(GlooAsync, OutstandingOpsCompleteInIssueOrder) {
  run_world(3, [&](int rank, Comm& comm) {
    std::vector<float> big(2 * 1024 * 1024, 1.0f);
    int32_t small = rank;
    WorkPtr first = comm.all_reduce_async(big.data(), big.data(), big.size(), DType::kF32,
                                          ReduceOp::kSum);
    WorkPtr second = comm.all_reduce_async(&small, &small, 1, DType::kI32, ReduceOp::kMax);
    ASSERT_TRUE(second->wait().is_ok());
    // One worker runs them in order: the second finishing means the first has too.
    EXPECT_TRUE(first->is_completed());
    ASSERT_TRUE(first->wait().is_ok());
    EXPECT_EQ(small, 2);
    EXPECT_EQ(big[12345], 3.0f);
  });
}

TEST(GlooLarge, SixtyFourMiBSumOps) {
  run_world(2, [&](int rank, Comm& comm) {
    const size_t count = 16 * 1024 * 1024;  // 64 MiB of fp32
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((i % 97) + static_cast<size_t>(rank));
    ASSERT_TRUE(comm.all_reduce(data.data(), data.data(), count, DType::kF32, ReduceOp::kSum).is_ok());
    for (size_t i = 0; i < count; i += 4099) ASSERT_EQ(data[i], static_cast<float>(2 * (i % 97) + 1)) << i;
    ASSERT_EQ(data[count - 1], static_cast<float>(2 * ((count - 1) % 97) + 1));

    // reduce-scatter the 64 MiB result, then all-gather it back: the round trip doubles it.
    std::vector<float> shard(count / 2);
    ASSERT_TRUE(comm.reduce_scatter(data.data(), shard.data(), count / 2, DType::kF32, ReduceOp::kSum).is_ok());
    std::vector<float> gathered(count);
    ASSERT_TRUE(comm.all_gather(shard.data(), gathered.data(), count / 2, DType::kF32).is_ok());
    for (size_t i = 0; i < count; i += 4099) ASSERT_EQ(gathered[i], 2 * data[i]) << i;
    ASSERT_EQ(gathered[count - 1], 2 * data[count - 1]);
  });
}

TEST(GlooErrors, BadPeersAndRootsAreStatusesNotCrashes) {
  run_world(2, [&](int rank, Comm& comm) {
    int32_t x = 0;
    Status out_of_range = comm.send(&x, 1, DType::kI32, 5);
    EXPECT_EQ(out_of_range.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(out_of_range.message().find("peer 5"), std::string::npos) << out_of_range.message();
    Status self = comm.recv(&x, 1, DType::kI32, rank);
    EXPECT_EQ(self.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(comm.recv(&x, 1, DType::kI32, -1).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(comm.broadcast(&x, &x, 1, DType::kI32, 2).code(), StatusCode::kInvalidArgument);
    // The communicator is still usable afterwards.
    int32_t one = 1, sum = 0;
    ASSERT_TRUE(comm.all_reduce(&one, &sum, 1, DType::kI32, ReduceOp::kSum).is_ok());
    EXPECT_EQ(sum, 2);
  });
}

TEST(GlooErrors, RecvNobodySendsTimesOut) {
  GlooOptions options;
  options.timeout = std::chrono::milliseconds(500);
  std::atomic<bool> waited{false};
  run_world(2, [&](int rank, Comm& comm) {
    if (rank == 0) {
      int32_t x = 0;
      Status status = comm.recv(&x, 1, DType::kI32, 1);
      EXPECT_EQ(status.code(), StatusCode::kTimeout) << status.message();
      EXPECT_NE(status.message().find("recv"), std::string::npos) << status.message();
      waited = true;
    } else {
      while (!waited) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }, options);
}

TEST(GlooCreate, RejectsBadRank) {
  auto store = std::make_shared<rendezvous::InMemoryStore>();
  EXPECT_EQ(create_gloo_comm(store, 2, 2, {}).status().code(), StatusCode::kInvalidArgument);
  StatusOr<std::unique_ptr<Comm>> alone = create_gloo_comm(store, 0, 1, {});
  ASSERT_TRUE(alone.is_ok());
  EXPECT_EQ((*alone)->id(), "world");
  EXPECT_EQ((*alone)->backend(), "gloo");
  EXPECT_EQ((*alone)->world_ranks(), std::vector<int>{0});
}

// This process's threads under SCHED_BATCH.
int batch_threads() {
  int count = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    if (sched_getscheduler(std::stoi(task.path().filename().string())) == SCHED_BATCH) ++count;
  }
  return count;
}

// Each rank's TCP progress thread does not preempt on wakeup (it had spun on the pair's lock
// while the preempted holder waited a tick), and the thread that created it keeps its policy.
TEST(GlooCreate, ProgressThreadsRunUnderBatchPolicyAndTheCallerIsUnchanged) {
  if (sched_getscheduler(0) != SCHED_OTHER) {
    GTEST_SKIP() << "the test runs under another scheduling policy, which gloo's threads inherit";
  }
  const int before = batch_threads();
  std::atomic<int> callers_unchanged = 0;
  run_world(2, [&](int rank, Comm& comm) {
    if (sched_getscheduler(0) == SCHED_OTHER) ++callers_unchanged;
    ASSERT_TRUE(comm.barrier().is_ok());  // both devices exist from here on
    if (rank == 0) {
      EXPECT_EQ(batch_threads(), before + 2);
    }
    ASSERT_TRUE(comm.barrier().is_ok());
  });
  EXPECT_EQ(callers_unchanged.load(), 2);
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, GlooCollectives, ::testing::Values(1, 2, 3, 4),
                         [](const auto& param_info) { return fmt::format("world{}", param_info.param); });

}  // namespace
}  // namespace partrain::comm
