// Gloo staged through the host for device buffers (comm/host_staged_comm.h), on the CPU device:
// every operation's result, results reaching the device buffer only when the Work is waited for
// (so the host operation never touched device memory), sends complete without a copy back, and
// split groups are staged too.
#include "runner/comm/host_staged_comm.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "runner/device/cpu_device.h"
#include "runner/comm/gloo_comm.h"
#include "runner/rendezvous/in_memory_store.h"

namespace partrain::comm {
namespace {

// Each rank (a thread) stages its own Gloo communicator through a CPU device of its own.
void run_staged(int size, const std::function<void(int rank, Comm& comm)>& body) {
  auto store = std::make_shared<rendezvous::InMemoryStore>();
  GlooOptions options;
  options.timeout = std::chrono::seconds(30);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < size; ++rank) {
    ranks.emplace_back([&, rank] {
      runner::CpuDevice device;
      StatusOr<std::unique_ptr<Comm>> gloo = create_gloo_comm(store, rank, size, options);
      ASSERT_TRUE(gloo.is_ok()) << gloo.status().message();
      std::unique_ptr<Comm> staged = stage_through_host(std::move(*gloo), device);
      body(rank, *staged);
    });
  }
  for (std::thread& t : ranks) t.join();
}

TEST(HostStagedComm, EveryOperationGivesTheHostResult) {
  static constexpr int kRanks = 3;
  run_staged(kRanks, [](int rank, Comm& comm) {
    EXPECT_EQ(comm.backend(), "gloo");
    EXPECT_EQ(comm.size(), kRanks);
    std::vector<float> x(257, static_cast<float>(rank + 1));
    ASSERT_TRUE(comm.all_reduce(x.data(), x.data(), x.size(), DType::kF32, ReduceOp::kSum).is_ok());
    EXPECT_EQ(x, std::vector<float>(257, 6.0f));

    std::vector<int64_t> blocks(kRanks * 2);
    for (size_t j = 0; j < blocks.size(); ++j) blocks[j] = rank * 100 + static_cast<int64_t>(j);
    std::vector<int64_t> mine(2);
    ASSERT_TRUE(comm.reduce_scatter(blocks.data(), mine.data(), 2, DType::kI64, ReduceOp::kMax)
                    .is_ok());
    EXPECT_EQ(mine, (std::vector<int64_t>{200 + rank * 2, 201 + rank * 2}));

    const float own = static_cast<float>(rank);
    std::vector<float> all(kRanks);
    ASSERT_TRUE(comm.all_gather(&own, all.data(), 1, DType::kF32).is_ok());
    EXPECT_EQ(all, (std::vector<float>{0, 1, 2}));

    // Only the root's send is read: the others pass none.
    std::vector<float> root_values{7, 8};
    std::vector<float> got(2, -1);
    ASSERT_TRUE(comm.broadcast(rank == 1 ? root_values.data() : nullptr, got.data(), 2,
                               DType::kF32, 1)
                    .is_ok());
    EXPECT_EQ(got, root_values);

    std::vector<int32_t> out(kRanks), in(kRanks);
    for (int p = 0; p < kRanks; ++p) out[p] = 10 * rank + p;
    ASSERT_TRUE(comm.all_to_all(out.data(), in.data(), 1, DType::kI32).is_ok());
    for (int p = 0; p < kRanks; ++p) EXPECT_EQ(in[p], 10 * p + rank);

    float next = -1;
    ASSERT_TRUE(comm.send_recv(&own, (rank + 1) % kRanks, &next, (rank + kRanks - 1) % kRanks, 1,
                               DType::kF32)
                    .is_ok());
    EXPECT_EQ(next, static_cast<float>((rank + kRanks - 1) % kRanks));
    EXPECT_TRUE(comm.barrier().is_ok());
  });
}

TEST(HostStagedComm, ResultsReachTheDeviceBufferWhenTheWorkIsWaitedFor) {
  run_staged(2, [](int rank, Comm& comm) {
    std::vector<float> x(64, static_cast<float>(rank + 1));
    WorkPtr reduce = comm.all_reduce_async(x.data(), x.data(), x.size(), DType::kF32,
                                           ReduceOp::kSum);
    // Long past the host operation's end: a communicator writing the device buffer directly would
    // have changed it by now.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_FALSE(reduce->is_completed()) << "the copy back happens in wait()";
    EXPECT_EQ(x, std::vector<float>(64, static_cast<float>(rank + 1)));
    ASSERT_TRUE(reduce->wait().is_ok());
    EXPECT_TRUE(reduce->is_completed());
    EXPECT_EQ(x, std::vector<float>(64, 3.0f));

    // A send has nothing to bring back: it completes with its host operation.
    float value = 5;
    if (rank == 0) {
      WorkPtr send = comm.send_async(&value, 1, DType::kF32, 1);
      value = -1;  // the input was copied when the send was issued
      for (int i = 0; i < 2000 && !send->is_completed(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      EXPECT_TRUE(send->is_completed());
      EXPECT_TRUE(send->wait().is_ok());
    } else {
      float received = 0;
      ASSERT_TRUE(comm.recv(&received, 1, DType::kF32, 0).is_ok());
      EXPECT_EQ(received, 5.0f);
    }
  });
}

TEST(HostStagedComm, SplitGroupsAreStagedToo) {
  run_staged(4, [](int rank, Comm& comm) {
    auto sub = comm.split(rank % 2, rank);
    ASSERT_TRUE(sub.is_ok()) << sub.status().message();
    ASSERT_NE(*sub, nullptr);
    float x = static_cast<float>(rank);
    WorkPtr work = (*sub)->all_reduce_async(&x, &x, 1, DType::kF32, ReduceOp::kSum);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(x, static_cast<float>(rank));  // staged: untouched until waited for
    ASSERT_TRUE(work->wait().is_ok());
    EXPECT_EQ(x, rank % 2 == 0 ? 2.0f : 4.0f);  // 0 + 2, 1 + 3
    auto none = comm.split(kNoColor, rank);
    ASSERT_TRUE(none.is_ok());
    EXPECT_EQ(*none, nullptr);
  });
}

}  // namespace
}  // namespace partrain::comm
