// The GPU timeline (HTA's temporal breakdown and comm/compute overlap) on a hand-written trace:
// kernels on several streams, an NCCL kernel, a copy and kernels HTA counts as neither compute
// nor communication; host slices and kernels outside the window do not count.
#include "analyzers/gpu_timeline.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/unit/analyzers/workload_trace_fixture.h"

namespace partrain::analyzers {
namespace {

using namespace testing;
using profiler::SliceCategory;

profiler::SliceEvent on_stream(int rank, const char* stream, const char* name,
                               SliceCategory category, double start_ms, double end_ms) {
  const auto start = static_cast<int64_t>(start_ms * kMsNs);
  return profiler::SliceEvent{rank,
                              profiler::TrackKind::kCudaStream,
                              stream,
                              name,
                              category,
                              start,
                              static_cast<int64_t>(end_ms * kMsNs) - start,
                              -1,
                              -1,
                              -1};
}

// The host's own work over [0, 20) ms.
profiler::SliceEvent host_compute(int rank) {
  return profiler::SliceEvent{rank,
                              profiler::TrackKind::kCpuThread,
                              "main",
                              "optimizer",
                              SliceCategory::kCompute,
                              0,
                              20 * kMsNs,
                              -1,
                              -1,
                              -1};
}

TEST(GpuWorkOf, HtasRulesOnNames) {
  EXPECT_EQ(gpu_work_of(SliceCategory::kKernel, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
            GpuWork::kComm);
  EXPECT_EQ(gpu_work_of(SliceCategory::kKernel, "ncclKernel_AllGather_RING_LL_Sum_int8_t"),
            GpuWork::kComm);
  EXPECT_EQ(gpu_work_of(SliceCategory::kKernel, "void gemm_kernel<float>(float*)"),
            GpuWork::kCompute);
  // HTA's `^nccl.*Kernel`: an NCCL-named kernel without "Kernel" in it computes, as in HTA.
  EXPECT_EQ(gpu_work_of(SliceCategory::kKernel, "nccl_helper"), GpuWork::kCompute);
  EXPECT_EQ(gpu_work_of(SliceCategory::kKernel, "Memcpy DtoD (Device -> Device)"), GpuWork::kOther);
  EXPECT_EQ(gpu_work_of(SliceCategory::kKernel, "Memset (Device)"), GpuWork::kOther);
  EXPECT_EQ(gpu_work_of(SliceCategory::kKernel, "cudaStreamSync"), GpuWork::kOther);
  EXPECT_EQ(gpu_work_of(SliceCategory::kMemcpy, "memcpy HtoD"), GpuWork::kOther);
  EXPECT_EQ(gpu_work_of(SliceCategory::kMemset, "memset"), GpuWork::kOther);
}

class GpuTimelineTest : public WorkloadTraceTest {};

// Window [0, 20) ms. Rank 0: gemm [0, 4] (stream 7) and softmax [2, 6] (stream 8): compute 6 ms;
// the NCCL kernel [5, 9] (stream 13): comm 4 ms, 1 ms of it under compute (25%); a copy
// [10, 11], a kernel named as a copy [12, 13] and one named as a wait [14, 15]: neither. Busy
// 9 + 3 = 12 ms over the span [0, 15]: idle 3 ms, non-compute 12 - 6 = 6 ms. A kernel at 25 ms
// lies outside the window, the host's compute [0, 20] is not GPU time. Rank 1 has no GPU work.
TEST_F(GpuTimelineTest, HtasBreakdownOverTheStreams) {
  auto trace =
      write_trace(gpt_config(2, 1, "1f1b", 2), 2,
                  {on_stream(0, "gpu0 stream 7", "gemm", SliceCategory::kKernel, 0, 4),
                   on_stream(0, "gpu0 stream 8", "softmax", SliceCategory::kKernel, 2, 6),
                   on_stream(0, "gpu0 stream 13", "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                             SliceCategory::kKernel, 5, 9),
                   on_stream(0, "gpu0 stream 7", "memcpy HtoD", SliceCategory::kMemcpy, 10, 11),
                   on_stream(0, "gpu0 stream 7", "Memcpy DtoD (Device -> Device)",
                             SliceCategory::kKernel, 12, 13),
                   on_stream(0, "gpu0 stream 8", "cudaStreamSync", SliceCategory::kKernel, 14, 15),
                   on_stream(0, "gpu0 stream 7", "gemm", SliceCategory::kKernel, 25, 26),
                   host_compute(0), host_compute(1)});
  {
    auto rw = profiler::SqliteDb::open(trace.path.string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(rw.is_ok()) << rw.status().message();
    ASSERT_TRUE(rw->exec("INSERT INTO kernel (slice_id) SELECT slice_id FROM slices "
                         "WHERE category = 'kernel'")
                    .is_ok());
  }
  auto report = analyze_gpu_timeline(trace.db, window_of(2, 1, 1, 0, 20));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->ranks.size(), 1u);
  const GpuTimeline& row = report->ranks[0];
  EXPECT_EQ(row.rank, 0);
  EXPECT_EQ(row.span_ns, 15 * kMsNs);
  EXPECT_EQ(row.busy_ns, 12 * kMsNs);
  EXPECT_EQ(row.compute_ns, 6 * kMsNs);
  EXPECT_EQ(row.comm_ns, 4 * kMsNs);
  EXPECT_EQ(row.overlap_ns, 1 * kMsNs);
  EXPECT_EQ(row.idle_ns(), 3 * kMsNs);
  EXPECT_EQ(row.non_compute_ns(), 6 * kMsNs);
  EXPECT_DOUBLE_EQ(*row.overlap_pct(), 25.0);
  EXPECT_DOUBLE_EQ(row.pct_of_span(row.idle_ns()), 20.0);

  const nlohmann::json json = gpu_timeline_json(*report);
  EXPECT_DOUBLE_EQ(json[0]["non_compute_ms"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(json[0]["overlap_pct"].get<double>(), 25.0);
  const std::string text = format_gpu_timeline(*report);
  EXPECT_NE(text.find("15.00 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("25.0%"), std::string::npos) << text;
}

TEST_F(GpuTimelineTest, CpuTraceHasNone) {
  auto trace = write_trace(gpt_config(1, 1, "1f1b", 1), 1, {step_event(0, 1, 0, 10)});
  auto report = analyze_gpu_timeline(trace.db, window_of(1, 1, 1, 0, 10));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_TRUE(report->ranks.empty());
  EXPECT_EQ(format_gpu_timeline(*report), "");
  EXPECT_TRUE(gpu_timeline_json(*report).empty());
}

}  // namespace
}  // namespace partrain::analyzers
