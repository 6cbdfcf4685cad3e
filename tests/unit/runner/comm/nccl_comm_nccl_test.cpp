// The NCCL communicator against a stand-in NCCL and CUDA runtime (tests/support/standin_nccl):
// several ranks (threads) on a machine without a GPU. Checks what only a GPU run could show
// otherwise: the results of every operation, and the calls that produce them (bootstrap through
// the store, stream ordering after the compute stream, grouped point-to-point, split, the
// teardown), plus how NCCL and CUDA failures come back. NCCL builds only (*_nccl_test.cpp).
#include <gtest/gtest.h>

#include <functional>
#include <regex>
#include <thread>
#include <vector>

#include "runner/comm/nccl_comm.h"
#include "runner/comm/nccl_runtime.h"
#include "runner/rendezvous/in_memory_store.h"
#include "tests/support/standin_nccl/standin_nccl.h"

namespace partrain::comm {
namespace {

using testing::StandinNccl;

class NcclCommStandin : public ::testing::Test {
 protected:
  void SetUp() override {
    standin().reset(4);
    baseline_handles_ = standin().live_handles();
  }

  static StandinNccl& standin() { return StandinNccl::instance(); }

  // Runs body(rank) on one thread per rank, each bound to its rank's log, and joins them.
  static void run_ranks(int ranks, const std::function<void(int)>& body) {
    std::vector<std::thread> threads;
    for (int rank = 0; rank < ranks; ++rank) {
      threads.emplace_back([&, rank] {
        standin().bind_thread(rank);
        body(rank);
      });
    }
    for (std::thread& t : threads) t.join();
  }

  StatusOr<std::unique_ptr<Comm>> create(int rank, int size, void* compute_stream = nullptr,
                                         int device = -1) {
    NcclCommOptions options;
    options.cuda_device = device < 0 ? rank : device;
    options.compute_stream = compute_stream;
    return create_nccl_comm(store_, rank, size, options, "world", standin().runtime());
  }

  // The handle a log line ends with ("... -> S3").
  static std::string created(const std::string& line) { return line.substr(line.rfind(' ') + 1); }

  static std::vector<std::string> lines_matching(const std::vector<std::string>& log,
                                                 const std::string& pattern) {
    std::vector<std::string> found;
    const std::regex re(pattern);
    for (const std::string& line : log) {
      if (std::regex_search(line, re)) found.push_back(line);
    }
    return found;
  }

  std::shared_ptr<rendezvous::InMemoryStore> store_ =
      std::make_shared<rendezvous::InMemoryStore>();
  int baseline_handles_ = 0;
};

TEST_F(NcclCommStandin, EveryOperationGivesTheReferenceResultOnFourRanks) {
  constexpr int kRanks = 4;
  run_ranks(kRanks, [&](int rank) {
    auto comm_or = create(rank, kRanks);
    ASSERT_TRUE(comm_or.is_ok()) << comm_or.status().message();
    Comm& comm = **comm_or;
    EXPECT_EQ(comm.rank(), rank);
    EXPECT_EQ(comm.size(), kRanks);
    EXPECT_EQ(comm.backend(), "nccl");
    EXPECT_EQ(comm.world_ranks(), (std::vector<int>{0, 1, 2, 3}));

    std::vector<float> x(1023);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(rank + static_cast<int>(i % 7));
    ASSERT_TRUE(comm.all_reduce(x.data(), x.data(), x.size(), DType::kF32, ReduceOp::kSum).is_ok());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i], static_cast<float>(6 + 4 * static_cast<int>(i % 7))) << i;

    std::vector<int32_t> n{rank, -rank, 10 * rank};
    std::vector<int32_t> max(3), min(3), avg(3);
    ASSERT_TRUE(comm.all_reduce(n.data(), max.data(), 3, DType::kI32, ReduceOp::kMax).is_ok());
    ASSERT_TRUE(comm.all_reduce(n.data(), min.data(), 3, DType::kI32, ReduceOp::kMin).is_ok());
    ASSERT_TRUE(comm.all_reduce(n.data(), avg.data(), 3, DType::kI32, ReduceOp::kAvg).is_ok());
    EXPECT_EQ(max, (std::vector<int32_t>{3, 0, 30}));
    EXPECT_EQ(min, (std::vector<int32_t>{0, -3, 0}));
    EXPECT_EQ(avg, (std::vector<int32_t>{1, -1, 15}));  // 6 / 4 and 60 / 4, integer division

    std::vector<float> shards(kRanks * 5);
    for (size_t j = 0; j < shards.size(); ++j) shards[j] = static_cast<float>(100 * rank + static_cast<int>(j));
    std::vector<float> mine(5);
    ASSERT_TRUE(comm.reduce_scatter(shards.data(), mine.data(), 5, DType::kF32, ReduceOp::kSum)
                    .is_ok());
    for (int k = 0; k < 5; ++k) EXPECT_EQ(mine[k], static_cast<float>(600 + 4 * (rank * 5 + k))) << k;

    std::vector<float> own(3, static_cast<float>(rank));
    std::vector<float> all(kRanks * 3);
    ASSERT_TRUE(comm.all_gather(own.data(), all.data(), 3, DType::kF32).is_ok());
    for (size_t j = 0; j < all.size(); ++j) EXPECT_EQ(all[j], static_cast<float>(j / 3)) << j;

    std::vector<float> root_data(4, rank == 2 ? 42.0f : -1.0f);
    ASSERT_TRUE(comm.broadcast(root_data.data(), root_data.data(), 4, DType::kF32, 2).is_ok());
    EXPECT_EQ(root_data, std::vector<float>(4, 42.0f));

    // All-to-all, in place and not: block p of rank r goes to rank p's block r.
    std::vector<float> blocks(kRanks * 2);
    for (int p = 0; p < kRanks; ++p) blocks[p * 2] = blocks[p * 2 + 1] = static_cast<float>(10 * rank + p);
    std::vector<float> exchanged(blocks.size());
    ASSERT_TRUE(comm.all_to_all(blocks.data(), exchanged.data(), 2, DType::kF32).is_ok());
    ASSERT_TRUE(comm.all_to_all(blocks.data(), blocks.data(), 2, DType::kF32).is_ok());
    for (int p = 0; p < kRanks; ++p) {
      EXPECT_EQ(exchanged[p * 2], static_cast<float>(10 * p + rank));
      EXPECT_EQ(exchanged[p * 2 + 1], static_cast<float>(10 * p + rank));
    }
    EXPECT_EQ(blocks, exchanged);

    // A ring exchange, then one-way pairs (0 -> 1, 2 -> 3).
    std::vector<float> out(6, static_cast<float>(rank)), in(6, -1);
    ASSERT_TRUE(comm.send_recv(out.data(), (rank + 1) % kRanks, in.data(),
                               (rank + kRanks - 1) % kRanks, 6, DType::kF32)
                    .is_ok());
    EXPECT_EQ(in, std::vector<float>(6, static_cast<float>((rank + kRanks - 1) % kRanks)));
    if (rank % 2 == 0) {
      ASSERT_TRUE(comm.send(out.data(), 6, DType::kF32, rank + 1).is_ok());
    } else {
      ASSERT_TRUE(comm.recv(in.data(), 6, DType::kF32, rank - 1).is_ok());
      EXPECT_EQ(in, std::vector<float>(6, static_cast<float>(rank - 1)));
    }
    EXPECT_TRUE(comm.barrier().is_ok());
  });
  EXPECT_EQ(standin().live_handles(), baseline_handles_) << "a stream, event, buffer or comm leaked";
}

TEST_F(NcclCommStandin, BootstrapThroughTheStoreThenEachOperationWaitsForTheComputeStream) {
  std::vector<cudaStream_t> compute{standin().create_stream(), standin().create_stream()};
  run_ranks(2, [&](int rank) {
    auto comm = create(rank, 2, compute[rank]);
    ASSERT_TRUE(comm.is_ok()) << comm.status().message();
    std::vector<float> x(8, 1.0f);
    ASSERT_TRUE((*comm)->all_reduce(x.data(), x.data(), 8, DType::kF32, ReduceOp::kSum).is_ok());
  });
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const std::vector<std::string> log = standin().calls(rank);
    ASSERT_GE(log.size(), 18u);
    const std::string mine = standin().handle_name(compute[rank]);
    size_t i = 0;
    EXPECT_EQ(log[i++], "cudaGetDeviceCount()");
    if (rank == 0) {
      EXPECT_EQ(log[i++], "ncclGetUniqueId() -> U1");  // rank 0 alone makes the id
    }
    EXPECT_EQ(log[i++], "ncclCommInitRank(nranks=2, id=U1, rank=" + std::to_string(rank) + ")");
    ASSERT_TRUE(log[i].starts_with("cudaStreamCreateWithFlags(non-blocking) -> S")) << log[i];
    const std::string stream = created(log[i++]);
    ASSERT_TRUE(log[i].starts_with("cudaEventCreateWithFlags(disable-timing) -> E")) << log[i];
    const std::string ready = created(log[i++]);
    EXPECT_EQ(log[i++], "cudaMalloc(4 B)");  // barrier()'s device int
    EXPECT_EQ(log[i++], "cudaMemset(0, 4 B)");
    // The operation: mark the compute stream, make the communication stream wait for it, issue,
    // then record the event the Work polls.
    EXPECT_EQ(log[i++], "cudaEventRecord(" + ready + ", " + mine + ")");
    EXPECT_EQ(log[i++], "cudaStreamWaitEvent(" + stream + ", " + ready + ")");
    ASSERT_TRUE(log[i].starts_with("ncclAllReduce(count=8, float32, sum, C")) << log[i];
    const std::string comm = log[i].substr(log[i].find(", C") + 2, log[i].rfind(", ") - log[i].find(", C") - 2);
    EXPECT_EQ(log[i++], "ncclAllReduce(count=8, float32, sum, " + comm + ", " + stream + ")");
    const std::string done = created(log[i++]);
    EXPECT_EQ(log[i++], "cudaEventRecord(" + done + ", " + stream + ")");
    EXPECT_EQ(log[i++], "cudaEventDestroy(" + done + ")");  // the Work, once waited for
    // Teardown: drain the stream, then finalize and destroy, then free what the comm made.
    EXPECT_EQ(log[i++], "cudaStreamSynchronize(" + stream + ")");
    EXPECT_EQ(log[i++], "ncclCommFinalize(" + comm + ")");
    EXPECT_EQ(log[i++], "ncclCommDestroy(" + comm + ")");
    EXPECT_EQ(log[i++], "cudaFree()");
    EXPECT_EQ(log[i++], "cudaEventDestroy(" + ready + ")");
    EXPECT_EQ(log[i++], "cudaStreamDestroy(" + stream + ")");
    EXPECT_EQ(i, log.size());
  }
  for (cudaStream_t s : compute) standin().runtime().cudaStreamDestroy(s);
  EXPECT_EQ(standin().live_handles(), baseline_handles_);
}

TEST_F(NcclCommStandin, WithoutAComputeStreamNothingIsWaitedFor) {
  run_ranks(1, [&](int rank) {
    auto comm = create(rank, 1);
    ASSERT_TRUE(comm.is_ok()) << comm.status().message();
    EXPECT_TRUE((*comm)->barrier().is_ok());
  });
  const std::vector<std::string> log = standin().calls(0);
  EXPECT_TRUE(lines_matching(log, "cudaStreamWaitEvent").empty());
  EXPECT_EQ(lines_matching(log, "cudaEventCreateWithFlags").size(), 1u);  // the Work's own event
  EXPECT_EQ(lines_matching(log, R"(ncclAllReduce\(count=1, int32, sum)").size(), 1u);
}

TEST_F(NcclCommStandin, PointToPointIsGroupedAndAnInPlaceAllToAllIsStagedOnTheStream) {
  run_ranks(2, [&](int rank) {
    auto comm = create(rank, 2);
    ASSERT_TRUE(comm.is_ok()) << comm.status().message();
    std::vector<float> a(4, static_cast<float>(rank)), b(4);
    ASSERT_TRUE((*comm)->send_recv(a.data(), 1 - rank, b.data(), 1 - rank, 4, DType::kF32).is_ok());
    ASSERT_TRUE((*comm)->all_to_all(a.data(), a.data(), 2, DType::kF32).is_ok());
  });
  const std::vector<std::string> log = standin().calls(0);
  const std::string stream = created(lines_matching(log, "cudaStreamCreateWithFlags")[0]);
  auto at = std::find(log.begin(), log.end(), "ncclGroupStart()");
  ASSERT_NE(at, log.end());
  const std::vector<std::string> exchange(at, at + 4);
  ASSERT_TRUE(exchange[1].starts_with("ncclSend(count=4, float32, peer=1, ")) << exchange[1];
  ASSERT_TRUE(exchange[2].starts_with("ncclRecv(count=4, float32, peer=1, ")) << exchange[2];
  EXPECT_EQ(exchange[3], "ncclGroupEnd()");

  // 2 ranks x 2 floats: the input is copied aside on the communication stream first.
  auto staged = std::find(log.begin(), log.end(), "cudaMallocAsync(16 B, " + stream + ")");
  ASSERT_NE(staged, log.end());
  EXPECT_EQ(*(staged + 1), "cudaMemcpyAsync(16 B, device-to-device, " + stream + ")");
  EXPECT_EQ(*(staged + 2), "ncclGroupStart()");
  EXPECT_TRUE((staged + 3)->starts_with("ncclSend(count=2, float32, peer=0, "));
  EXPECT_TRUE((staged + 4)->starts_with("ncclRecv(count=2, float32, peer=0, "));
  EXPECT_TRUE((staged + 5)->starts_with("ncclSend(count=2, float32, peer=1, "));
  EXPECT_TRUE((staged + 6)->starts_with("ncclRecv(count=2, float32, peer=1, "));
  EXPECT_EQ(*(staged + 7), "ncclGroupEnd()");
  EXPECT_EQ(*(staged + 8), "cudaFreeAsync(" + stream + ")");
}

TEST_F(NcclCommStandin, SplitOrdersEachColorByKeyAndLeavesNoColorWithoutACommunicator) {
  std::vector<cudaStream_t> compute;
  for (int r = 0; r < 4; ++r) compute.push_back(standin().create_stream());
  run_ranks(4, [&](int rank) {
    auto world = create(rank, 4, compute[rank]);
    ASSERT_TRUE(world.is_ok()) << world.status().message();
    const int color = rank == 3 ? kNoColor : rank % 2;
    auto sub = (*world)->split(color, /*key=*/-rank);
    ASSERT_TRUE(sub.is_ok()) << sub.status().message();
    if (rank == 3) {
      EXPECT_EQ(*sub, nullptr);
      return;
    }
    ASSERT_NE(*sub, nullptr);
    Comm& group = **sub;
    EXPECT_EQ(group.id(), "world/split0/color" + std::to_string(color));
    if (color == 0) {
      // Keys -0 and -2: world rank 2 comes first.
      EXPECT_EQ(group.rank(), rank == 2 ? 0 : 1);
      EXPECT_EQ(group.size(), 2);
      EXPECT_EQ(group.world_ranks(), (std::vector<int>{2, 0}));
    } else {
      EXPECT_EQ(group.rank(), 0);
      EXPECT_EQ(group.size(), 1);
      EXPECT_EQ(group.world_ranks(), (std::vector<int>{1}));
    }
    float x = static_cast<float>(rank + 1);
    ASSERT_TRUE(group.all_reduce(&x, &x, 1, DType::kF32, ReduceOp::kSum).is_ok());
    EXPECT_EQ(x, color == 0 ? 4.0f : 2.0f);  // only the color's members are summed
  });
  EXPECT_EQ(lines_matching(standin().calls(3), R"(ncclCommSplit\(C\d+, color=-1, key=-3\) -> none)")
                .size(),
            1u);
  // The sub-communicator also orders itself after the rank's compute stream.
  const std::vector<std::string> log = standin().calls(2);
  const std::vector<std::string> waits = lines_matching(log, "cudaStreamWaitEvent");
  const std::vector<std::string> streams = lines_matching(log, "cudaStreamCreateWithFlags");
  ASSERT_EQ(streams.size(), 2u);
  EXPECT_FALSE(lines_matching(waits, "cudaStreamWaitEvent\\(" + created(streams[1]) + ",").empty());
  for (cudaStream_t s : compute) standin().runtime().cudaStreamDestroy(s);
  EXPECT_EQ(standin().live_handles(), baseline_handles_);
}

TEST_F(NcclCommStandin, MoreRanksThanGpusIsRefusedBeforeTheBootstrapNamingTheAlternative) {
  standin().reset(1);
  run_ranks(1, [&](int) {
    // Rank 1 of 2 on a host with one GPU: it must not wait for rank 0's id to say so.
    auto comm = create(/*rank=*/1, 2, nullptr, /*device=*/1);
    ASSERT_FALSE(comm.is_ok());
    EXPECT_EQ(comm.status().code(), StatusCode::kInvalidArgument);  // exit 2
    EXPECT_NE(comm.status().message().find("needs CUDA device 1 but this host has 1 GPU(s)"),
              std::string::npos)
        << comm.status().message();
    EXPECT_NE(comm.status().message().find("--comm gloo"), std::string::npos);
  });
  EXPECT_TRUE(lines_matching(standin().calls(0), "ncclCommInitRank").empty());
}

TEST_F(NcclCommStandin, NoVisibleGpuNamesTheCudaError) {
  standin().reset(0);
  run_ranks(1, [&](int rank) {
    auto comm = create(rank, 1);
    ASSERT_FALSE(comm.is_ok());
    EXPECT_NE(comm.status().message().find("no CUDA-capable device is detected"),
              std::string::npos)
        << comm.status().message();
  });
}

TEST_F(NcclCommStandin, AnAsynchronousNcclErrorEndsTheWaitWithNcclsReason) {
  run_ranks(2, [&](int rank) {
    auto comm = create(rank, 2);
    ASSERT_TRUE(comm.is_ok()) << comm.status().message();
    if (rank == 1) standin().break_rank(1, ncclRemoteError);
    float x = 1;
    WorkPtr work = (*comm)->all_reduce_async(&x, &x, 1, DType::kF32, ReduceOp::kSum);
    Status status = work->wait();
    if (rank == 0) {
      EXPECT_TRUE(status.is_ok()) << status.message();
      return;
    }
    ASSERT_FALSE(status.is_ok());
    EXPECT_FALSE(work->is_completed() && status.is_ok());
    EXPECT_NE(status.message().find("asynchronous error"), std::string::npos) << status.message();
    EXPECT_NE(status.message().find("remote process exited"), std::string::npos);
    EXPECT_NE(status.message().find("rank 1"), std::string::npos);
    EXPECT_EQ(work->wait().message(), status.message());  // the outcome is kept
  });
}

TEST_F(NcclCommStandin, AFailedCallCompletesItsWorkWithTheCallAndTheCommunicatorGoesOn) {
  run_ranks(1, [&](int rank) {
    auto comm = create(rank, 1);
    ASSERT_TRUE(comm.is_ok()) << comm.status().message();
    standin().fail_next(0, "ncclAllReduce", ncclInvalidArgument);
    float x = 3;
    WorkPtr work = (*comm)->all_reduce_async(&x, &x, 1, DType::kF32, ReduceOp::kSum);
    EXPECT_TRUE(work->is_completed());
    Status status = work->wait();
    ASSERT_FALSE(status.is_ok());
    EXPECT_NE(status.message().find("ncclAllReduce("), std::string::npos) << status.message();
    EXPECT_NE(status.message().find("invalid argument"), std::string::npos);
    EXPECT_TRUE((*comm)->all_reduce(&x, &x, 1, DType::kF32, ReduceOp::kSum).is_ok());
    EXPECT_FALSE((*comm)->send(&x, 1, DType::kF32, 1).is_ok());  // peer 1 of a world of 1
  });
  EXPECT_EQ(standin().live_handles(), baseline_handles_);
}

TEST_F(NcclCommStandin, ACommunicatorWhoseStreamCannotBeMadeReleasesWhatItHad) {
  run_ranks(1, [&](int rank) {
    standin().fail_next(0, "cudaMalloc", cudaErrorMemoryAllocation);
    auto comm = create(rank, 1, standin().create_stream());
    ASSERT_FALSE(comm.is_ok());
    EXPECT_NE(comm.status().message().find("cudaMalloc("), std::string::npos)
        << comm.status().message();
    EXPECT_NE(comm.status().message().find("out of memory"), std::string::npos);
  });
  const std::vector<std::string> log = standin().calls(0);
  EXPECT_EQ(lines_matching(log, "ncclCommDestroy").size(), 1u);
  EXPECT_EQ(lines_matching(log, "cudaStreamDestroy").size(), 1u);
  EXPECT_EQ(lines_matching(log, "cudaEventDestroy").size(), 1u);
  EXPECT_EQ(standin().live_handles(), baseline_handles_ + 1);  // only the test's compute stream
}

}  // namespace
}  // namespace partrain::comm
