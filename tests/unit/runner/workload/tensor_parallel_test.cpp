#include "runner/workload/tensor_parallel.h"

#include <gtest/gtest.h>

#include "runner/device/cpu_device.h"
#include "tests/unit/runner/comm/gloo_world.h"

namespace partrain::runner {
namespace {

// Sequence parallelism: a rank holds tokens [r T/n, (r+1) T/n) of every sample; all-gather
// rebuilds (B, T, C) in order, and reduce-scatter sums and returns each rank its own tokens.
TEST(TensorParallel, SequenceGatherAndScatterKeepTokenOrder) {
  constexpr int64_t B = 2, T = 6, C = 3, n = 3;
  comm::testing::run_world(n, [&](int rank, comm::Comm& comm) {
    CpuDevice device;
    TensorParallel tp(comm, true, device);
    ASSERT_TRUE(tp.sequence_parallel());
    EXPECT_EQ(tp.local_tokens(B, T), B * T / n);
    const int64_t t_local = T / n;
    std::vector<float> local(static_cast<size_t>(B * t_local * C));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < t_local; ++t)
        for (int64_t c = 0; c < C; ++c)
          local[static_cast<size_t>((b * t_local + t) * C + c)] =
              static_cast<float>(100 * b + 10 * (rank * t_local + t) + c);
    std::vector<float> full(static_cast<size_t>(B * T * C));
    ASSERT_TRUE(tp.enter_forward(local.data(), full.data(), B, T, C).is_ok());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        EXPECT_EQ(full[static_cast<size_t>((b * T + t) * C + 1)], 100 * b + 10 * t + 1);
    // Every rank contributes the same full tensor: the scatter returns n x its own tokens.
    std::vector<float> back(local.size());
    ASSERT_TRUE(tp.enter_backward(full.data(), back.data(), B, T, C).is_ok());
    for (size_t i = 0; i < local.size(); ++i) EXPECT_EQ(back[i], n * local[i]);
  });
}

TEST(TensorParallel, WithoutSequenceParallelismGIsAnAllReduce) {
  comm::testing::run_world(2, [&](int rank, comm::Comm& comm) {
    CpuDevice device;
    TensorParallel tp(comm, false, device);
    std::vector<float> partial = {static_cast<float>(rank + 1), 10};
    std::vector<float> out(2);
    ASSERT_TRUE(tp.exit_forward(partial.data(), out.data(), 1, 1, 2).is_ok());
    EXPECT_EQ(out, (std::vector<float>{3, 20}));
    std::vector<float> copy(2);
    ASSERT_TRUE(tp.exit_backward(out.data(), copy.data(), 1, 1, 2).is_ok());
    EXPECT_EQ(copy, out);  // g's backward is the identity
  });
}

}  // namespace
}  // namespace partrain::runner
