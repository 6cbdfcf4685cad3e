#include "cli/bench/collective_test.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "cli/bench/bench_options.h"
#include "cli/bench/bench_runner.h"

namespace partrain::bench {
namespace {

TEST(CollectiveLayout, CountsAsNcclTests) {
  // all_reduce: every rank holds the whole count.
  CollectiveLayout ar = find_collective_test("all_reduce")->layout(1024, 4, 4);
  EXPECT_EQ(ar.count, 256u);
  EXPECT_EQ(ar.send_count, 256u);
  EXPECT_EQ(ar.recv_count, 256u);
  EXPECT_EQ(ar.bytes, 1024u);
  // all_gather: S is the gathered buffer; each rank sends count / n (rounded down).
  CollectiveLayout ag = find_collective_test("all_gather")->layout(1000, 4, 3);
  EXPECT_EQ(ag.send_count, 83u);
  EXPECT_EQ(ag.recv_count, 249u);
  EXPECT_EQ(ag.bytes, 996u);
  CollectiveLayout rs = find_collective_test("reduce_scatter")->layout(1024, 2, 4);
  EXPECT_EQ(rs.send_count, 512u);
  EXPECT_EQ(rs.recv_count, 128u);
  CollectiveLayout a2a = find_collective_test("all_to_all")->layout(64, 4, 4);
  EXPECT_EQ(a2a.send_count, 16u);
  EXPECT_EQ(a2a.recv_count, 16u);
  // The count column is what the NCCL call takes (nccl-tests' paramcount): one rank's block for
  // all_gather, reduce_scatter and all_to_all, the whole count for the others.
  EXPECT_EQ(ar.call_count, 256u);
  EXPECT_EQ(ag.call_count, 83u);
  EXPECT_EQ(rs.call_count, 128u);
  EXPECT_EQ(a2a.call_count, 4u);
  EXPECT_EQ(find_collective_test("broadcast")->layout(1024, 4, 4).call_count, 256u);
  EXPECT_EQ(find_collective_test("send_recv")->layout(1024, 4, 4).call_count, 256u);
}

// What rank `rank`'s recv buffer must hold after `op`, element by element.
std::vector<double> expected_recv(const char* op, int rank, int nranks,
                                  const CollectiveLayout& layout) {
  std::vector<double> recv(layout.recv_count);
  for (uint64_t i = 0; i < recv.size(); ++i) {
    recv[i] = find_collective_test(op)->expected(i, rank, nranks, layout, comm::ReduceOp::kSum, 0);
  }
  return recv;
}

TEST(CollectiveTests, ExpectedValuesFollowTheMathematics) {
  const int n = 3;
  CollectiveLayout layout = find_collective_test("reduce_scatter")->layout(3 * 4 * 5, 4, n);
  std::vector<double> recv = expected_recv("reduce_scatter", 1, n, layout);
  ASSERT_EQ(recv.size(), 5u);
  for (uint64_t i = 0; i < 5; ++i) {
    double sum = bench_value(0, 5 + i) + bench_value(1, 5 + i) + bench_value(2, 5 + i);
    EXPECT_DOUBLE_EQ(recv[i], sum);
  }
  layout = find_collective_test("all_to_all")->layout(3 * 4 * 5, 4, n);
  recv = expected_recv("all_to_all", 2, n, layout);
  ASSERT_EQ(recv.size(), 15u);
  // Block r of rank 2's result is block 2 of rank r's input.
  EXPECT_DOUBLE_EQ(recv[5 * 1 + 3], bench_value(1, 5 * 2 + 3));
  layout = find_collective_test("send_recv")->layout(3 * 4 * 5, 4, n);
  recv = expected_recv("send_recv", 0, n, layout);
  ASSERT_EQ(recv.size(), 15u);
  EXPECT_DOUBLE_EQ(recv[0], bench_value(2, 0));  // rank 0 receives from rank n-1
  // all_gather: block r is rank r's send buffer; all_reduce: the sum over ranks; broadcast: the
  // root's.
  layout = find_collective_test("all_gather")->layout(3 * 4 * 5, 4, n);
  recv = expected_recv("all_gather", 0, n, layout);
  ASSERT_EQ(recv.size(), 15u);
  EXPECT_DOUBLE_EQ(recv[5 * 2 + 4], bench_value(2, 4));
  layout = find_collective_test("all_reduce")->layout(4 * 6, 4, n);
  EXPECT_DOUBLE_EQ(expected_recv("all_reduce", 1, n, layout)[5],
                   bench_value(0, 5) + bench_value(1, 5) + bench_value(2, 5));
  EXPECT_DOUBLE_EQ(
      find_collective_test("all_reduce")->expected(5, 1, n, layout, comm::ReduceOp::kMax, 0),
      std::max({bench_value(0, 5), bench_value(1, 5), bench_value(2, 5)}));
  EXPECT_DOUBLE_EQ(
      find_collective_test("broadcast")->expected(3, 0, n, layout, comm::ReduceOp::kSum, 2),
      bench_value(2, 3));
}

TEST(BenchValue, SmallSignedIntegers) {
  bool negative = false;
  for (int rank = 0; rank < 8; ++rank) {
    for (uint64_t i = 0; i < 100; ++i) {
      double v = bench_value(rank, i);
      EXPECT_GE(v, -6);
      EXPECT_LE(v, 6);
      negative |= v < 0;
    }
  }
  EXPECT_TRUE(negative);
}

TEST(ValueCodec, RoundTripsEveryDtype) {
  std::vector<double> values = {-6, -1, 0, 1, 2.5, 6, 384};
  for (auto dtype : {comm::DType::kF32, comm::DType::kBF16, comm::DType::kF16}) {
    auto decoded = decode_values(encode_values(values, dtype), dtype);
    EXPECT_EQ(count_wrong(decoded, values, dtype), 0) << comm::dtype_name(dtype);
  }
  std::vector<double> ints = {-6, 0, 7, 1000000};
  for (auto dtype : {comm::DType::kI32, comm::DType::kI64}) {
    EXPECT_EQ(decode_values(encode_values(ints, dtype), dtype), ints);
  }
}

TEST(ValueCodec, CountWrongUsesDtypeTolerance) {
  EXPECT_EQ(count_wrong({1.0, 2.0}, {1.0, 2.001}, comm::DType::kF32), 1);
  EXPECT_EQ(count_wrong({1.0, 2.0}, {1.0, 2.001}, comm::DType::kBF16), 0);
  EXPECT_EQ(count_wrong({1.0}, {1.0, 2.0}, comm::DType::kF32), 2);
  // Integer averages truncate as NCCL's do: -7/2 -> -3.
  EXPECT_EQ(count_wrong({-3.0}, {-3.5}, comm::DType::kI32), 0);
  EXPECT_EQ(count_wrong({-4.0}, {-3.5}, comm::DType::kI32), 1);
}

TEST(BenchSizes, StepFactorAndStepBytes) {
  BenchOptions options;
  options.min_bytes = 8;
  options.max_bytes = 64;
  options.step_factor = 2;
  EXPECT_EQ(bench_sizes(options), (std::vector<uint64_t>{8, 16, 32, 64}));
  options.step_factor = 1;
  options.step_bytes = 20;
  EXPECT_EQ(bench_sizes(options), (std::vector<uint64_t>{8, 28, 48}));
  options.min_bytes = 0;
  options.max_bytes = 0;
  options.step_factor = 2;
  EXPECT_EQ(bench_sizes(options), (std::vector<uint64_t>{0}));
}

}  // namespace
}  // namespace partrain::bench
