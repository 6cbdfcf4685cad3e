// Top kernels on a hand-written two-rank trace: kernel slices written by the TraceWriter, their
// kernel rows added afterwards (the GPU tracer's part), and a CPU trace without any.
#include "analyzers/top_kernels.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/unit/analyzers/workload_trace_fixture.h"

namespace partrain::analyzers {
namespace {

using namespace testing;

profiler::SliceEvent kernel(int rank, const char* name, double start_ms, double end_ms) {
  const auto start = static_cast<int64_t>(start_ms * kMsNs);
  return profiler::SliceEvent{rank, profiler::TrackKind::kCudaStream, "stream 7", name,
                              profiler::SliceCategory::kKernel, start,
                              static_cast<int64_t>(end_ms * kMsNs) - start, -1, -1, -1};
}

class TopKernelsTest : public WorkloadTraceTest {};

// Window [0, 20) ms on both ranks. rank 0: gemm 3 x 2 ms, softmax 2 x 1 ms, nccl 1 x 4 ms;
// rank 1: gemm 1 x 4 ms; a gemm at 50 ms lies outside. All kernels: 16 ms, 7 launches.
// gemm: 4 launches, 10 ms, mean 2,500 us, 62.5%; nccl 4 ms, 25%; softmax 2 ms, 12.5%.
TEST_F(TopKernelsTest, RanksByTotalTime) {
  auto trace = write_trace(gpt_config(2, 1, "1f1b", 2), 2,
                           {kernel(0, "gemm", 0, 2), kernel(0, "gemm", 3, 5),
                            kernel(0, "gemm", 6, 8), kernel(0, "softmax", 8, 9),
                            kernel(0, "softmax", 9, 10), kernel(0, "nccl", 10, 14),
                            kernel(1, "gemm", 1, 5), kernel(1, "gemm", 50, 60)});
  {
    auto rw = profiler::SqliteDb::open(trace.path.string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(rw.is_ok()) << rw.status().message();
    ASSERT_TRUE(rw->exec("INSERT INTO kernel (slice_id) SELECT slice_id FROM slices "
                         "WHERE category = 'kernel'").is_ok());
  }
  auto report = analyze_top_kernels(trace.db, window_of(2, 1, 1, 0, 20), 2);
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_EQ(report->kernel_ns, 16 * kMsNs);
  EXPECT_EQ(report->kernel_count, 7);
  EXPECT_EQ(report->distinct, 3u);
  ASSERT_EQ(report->rows.size(), 2u);
  EXPECT_EQ(report->rows[0].name, "gemm");
  EXPECT_EQ(report->rows[0].count, 4);
  EXPECT_EQ(report->rows[0].total_ns, 10 * kMsNs);
  EXPECT_DOUBLE_EQ(report->rows[0].mean_ns(), 2.5 * kMsNs);
  EXPECT_DOUBLE_EQ(report->rows[0].share, 0.625);
  EXPECT_EQ(report->rows[1].name, "nccl");
  EXPECT_DOUBLE_EQ(report->rows[1].share, 0.25);
  const std::string text = format_top_kernels(*report);
  EXPECT_NE(text.find("2500.0 us"), std::string::npos) << text;
  EXPECT_NE(text.find("62.5%"), std::string::npos) << text;
  EXPECT_DOUBLE_EQ(top_kernels_json(*report)["kernels"][0]["mean_us"].get<double>(), 2500.0);
}

TEST_F(TopKernelsTest, CpuTraceHasNone) {
  auto trace = write_trace(gpt_config(1, 1, "1f1b", 1), 1, {step_event(0, 1, 0, 10)});
  auto report = analyze_top_kernels(trace.db, window_of(1, 1, 1, 0, 10));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_TRUE(report->rows.empty());
  EXPECT_NE(format_top_kernels(*report).find("no GPU kernels"), std::string::npos);
}

}  // namespace
}  // namespace partrain::analyzers
