// GpuActivityTranslator: GPU activity records become kernel, copy, set, wait and memory rows on
// the rank's tracks, and each NCCL call gets the GPU span of the kernels its external
// correlation id links to, whatever order the records arrive in.
#include "profiler/gpu_activity_translator.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/scratch_dir.h"
#include "tests/support/trace_fixture.h"
#include "tests/support/trace_query.h"

namespace partrain::profiler {
namespace {

// A rank whose clock is the timeline shifted by 1 000 ns, in step 2 until its local 1 600 ns and in
// step 3 from then on; collects what the translator emits.
class RecordingSink final : public GpuTraceSink {
 public:
  int32_t rank() const override { return 3; }
  int64_t timeline_ns(int64_t local_ns) const override { return local_ns + 1000; }
  int64_t step_at(int64_t local_ns) const override { return local_ns < 1600 ? 2 : 3; }
  void emit(const TraceEvent& event) override { events.push_back(event); }
  void collective(const CollectiveEvent& event, int64_t gpu_start_ns,
                  int64_t gpu_end_ns) override {
    CollectiveRecord record;
    record.world_rank = rank();
    record.event = event;
    record.gpu_start_ns = gpu_start_ns >= 0 ? timeline_ns(gpu_start_ns) : -1;
    record.gpu_end_ns = gpu_end_ns >= 0 ? timeline_ns(gpu_end_ns) : -1;
    events.push_back(record);
  }
  std::vector<TraceEvent> events;
};

GpuKernel kernel(const char* name, int64_t start, int64_t end, uint32_t correlation) {
  GpuKernel k;
  k.name = name;
  k.start_ns = start;
  k.end_ns = end;
  k.device = 0;
  k.stream = 7;
  k.correlation = correlation;
  k.grid = {128, 2, 1};
  k.block = {256, 1, 1};
  k.registers = 40;
  k.static_shared_bytes = 1024;
  k.dynamic_shared_bytes = 49152;
  return k;
}

NcclCallRecord nccl_call(uint64_t seq, uint64_t correlation) {
  NcclCallRecord call;
  call.correlation = correlation;
  call.event.comm_id = "nccl-0123456789abcdef";
  call.event.seq = seq;
  call.event.op = "all_reduce";
  call.event.dtype = "bfloat16";
  call.event.reduce_op = "sum";
  call.event.count = 1 << 20;
  call.event.bytes = 2 << 20;
  call.event.group_size = 8;
  call.event.enqueue_ns = 100 + static_cast<int64_t>(seq);
  call.event.start_ns = call.event.enqueue_ns;
  call.event.end_ns = call.event.enqueue_ns + 20;
  call.event.state = CollectiveState::kCompleted;
  return call;
}

class GpuActivityTranslatorTest : public ::testing::Test {
 protected:
  // The emitted events in a real trace file, for its views.
  testing::TraceQuery written() {
    const auto path = scratch_.path() / "gpu.db";
    testing::write_completed_trace(path, "{}", 4, sink_.events);
    return testing::TraceQuery(path);
  }

  RecordingSink sink_;
  GpuActivityTranslator translator_{sink_};
  testing::ScratchDir scratch_;
};

TEST_F(GpuActivityTranslatorTest, KernelsCopiesSetsWaitsAndMemoryBecomeRows) {
  translator_.add(kernel("_Z10matmul_f32PKfS0_Pfi", 5000, 9000, 11));
  translator_.add(GpuMemcpy{CopyDirection::kHostToDevice, 4096, 1000, 1500, 0, 7, 12});
  translator_.add(GpuMemset{512, 1600, 1700, 0, 7, 13});
  translator_.add(GpuSynchronization{"stream_synchronize", 2000, 9100, 7, 14});
  translator_.add(GpuMemoryChange{false, 0x7000, 1 << 20, 400, 0});
  translator_.add(GpuMemoryChange{false, 0x9000, 3 << 20, 450, 0});
  translator_.add(GpuMemoryChange{true, 0x7000, 1 << 20, 9500, 0});
  testing::TraceQuery q = written();
  EXPECT_EQ(q.rows("SELECT rank, name, ts_ns, dur_ns, correlation_id, device, stream, grid_x, "
                   "grid_y, grid_z, block_x, registers, static_shared_bytes, "
                   "dynamic_shared_bytes FROM kernels"),
            "3|matmul_f32(float const*, float const*, float*, int)|6000|4000|11|0|7|128|2|1|256|"
            "40|1024|49152\n");
  // Each row in the step the rank was in when it began (not when its record arrived).
  EXPECT_EQ(q.rows("SELECT track_kind, track, name, category, ts_ns, dur_ns, step FROM slices "
                   "ORDER BY ts_ns"),
            "cuda_stream|gpu0 stream 7|memcpy HtoD|memcpy|2000|500|2\n"
            "cuda_stream|gpu0 stream 7|memset|memset|2600|100|3\n"
            "cpu_thread|cuda sync|stream_synchronize|sync|3000|7100|3\n"
            "cuda_stream|gpu0 stream 7|matmul_f32(float const*, float const*, float*, int)|"
            "kernel|6000|4000|3\n");
  // The copy's and the fill's bytes, correlation and stream, and the copy's rate (4096 B in
  // 500 ns: 8.192 GB/s).
  EXPECT_EQ(q.rows("SELECT name, category, bytes, correlation_id, device, stream, gbps "
                   "FROM transfers ORDER BY ts_ns"),
            "memcpy HtoD|memcpy|4096|12|0|7|8.192\nmemset|memset|512|13|0|7|5.12\n");
  // Device memory reserved over time (category other: a foreign job's allocator is opaque).
  EXPECT_EQ(q.rows("SELECT ts_ns, category, bytes FROM memory_events WHERE rank = 3 "
                   "ORDER BY ts_ns"),
            "1400|other|1048576\n1450|other|4194304\n10500|other|3145728\n");
}

TEST_F(GpuActivityTranslatorTest, NcclCallsGetTheSpanOfTheKernelsTheirIdLinksTo) {
  translator_.add_nccl_call(nccl_call(0, 501));
  translator_.add_nccl_call(nccl_call(1, 502));
  // Call 501's link comes before its kernel; call 502's kernel comes before its link.
  translator_.add(GpuExternalCorrelation{501, 41});
  translator_.add(kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 3000, 8000, 41));
  translator_.add(kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 9000, 12000, 42));
  translator_.flush(false);
  ASSERT_EQ(sink_.events.size(), 3u);  // two kernels, call 501; 502 still unlinked
  translator_.add(GpuExternalCorrelation{502, 42});
  translator_.add(GpuExternalCorrelation{503, 43});  // an API call with no kernel
  translator_.flush(false);
  testing::TraceQuery q = written();
  EXPECT_EQ(q.rows("SELECT seq, enqueue_ns, gpu_start_ns, gpu_end_ns FROM collectives "
                   "ORDER BY seq"),
            "0|100|4000|9000\n1|101|10000|13000\n");
  EXPECT_EQ(q.rows("SELECT name, correlation_id FROM kernels ORDER BY ts_ns"),
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL|41\n"
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL|42\n");
  EXPECT_EQ(translator_.calls_without_gpu_time(), 0u);
}

TEST_F(GpuActivityTranslatorTest, AGroupsCallsShareItsKernelsAndTheLastFlushKeepsTheRest) {
  // A send and a recv issued by one ncclGroupEnd (correlation 600), one kernel for both.
  translator_.add_nccl_call(nccl_call(0, 600));
  translator_.add_nccl_call(nccl_call(1, 600));
  translator_.add_nccl_call(nccl_call(2, 601));  // its kernel record never comes
  translator_.add(GpuExternalCorrelation{600, 70});
  translator_.add(kernel("ncclDevKernel_SendRecv", 2000, 2500, 70));
  translator_.flush(false);
  translator_.flush(true);
  testing::TraceQuery q = written();
  EXPECT_EQ(q.rows("SELECT seq, gpu_start_ns, gpu_end_ns FROM collectives ORDER BY seq"),
            "0|3000|3500\n1|3000|3500\n2|NULL|NULL\n");
  EXPECT_EQ(translator_.calls_without_gpu_time(), 1u);
}

// A call that launched no kernel (a one-rank SUM all_reduce) leaves without GPU times once the
// GPU has been seen starting work more than kKernelWaitNs after the call returned, not at the
// process's end; one whose wait is shorter than that keeps waiting.
TEST_F(GpuActivityTranslatorTest, ACallWithoutKernelsLeavesOnceTheGpuIsFarPastIt) {
  constexpr int64_t kWait = GpuActivityTranslator::kKernelWaitNs;
  // "seq:gpu_start" of each collective emitted so far (-1: no GPU time).
  const auto emitted = [&] {
    std::string rows;
    for (const TraceEvent& event : sink_.events) {
      if (const auto* call = std::get_if<CollectiveRecord>(&event)) {
        rows += std::to_string(call->event.seq) + ":" + std::to_string(call->gpu_start_ns) + " ";
      }
    }
    return rows;
  };
  translator_.add_nccl_call(nccl_call(0, 700));  // returned at 120 ns; no kernel ever
  translator_.add_nccl_call(nccl_call(1, 701));  // returned at 121 ns; nor this one
  translator_.add(kernel("gemm", 120 + kWait - 1000, 120 + kWait, 80));
  translator_.flush(false);
  EXPECT_EQ(emitted(), "") << "within the wait: both wait";

  translator_.add(kernel("gemm", 200 + kWait, 250 + kWait, 81));  // the GPU is past both waits
  translator_.flush(false);
  EXPECT_EQ(emitted(), "0:-1 1:-1 ");
  EXPECT_EQ(translator_.calls_without_gpu_time(), 2u);

  // A call whose kernel arrives after such work still gets its span: it was seen.
  translator_.add_nccl_call(nccl_call(2, 702));
  translator_.add(GpuExternalCorrelation{702, 82});
  translator_.add(kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 300 + kWait, 400 + kWait, 82));
  translator_.flush(false);
  EXPECT_EQ(emitted(), "0:-1 1:-1 2:" + std::to_string(1300 + kWait) + " ");
  EXPECT_EQ(translator_.calls_without_gpu_time(), 2u);
}

}  // namespace
}  // namespace partrain::profiler
