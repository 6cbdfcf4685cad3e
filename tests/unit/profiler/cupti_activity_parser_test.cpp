// The CUPTI record parser on synthetic CUpti_Activity records (the struct versions this build's
// CUPTI headers define), then through the translator into a trace: kernels with their launch
// parameters, copies, sets, device memory, waits, and the external correlation that links an
// NCCL call to its kernel. Compiled where CUPTI's headers are; skipped elsewhere.
#include <gtest/gtest.h>

#ifdef PARTRAIN_HAVE_CUDA
#include "profiler/cupti/cupti_activity_parser.h"
#include "profiler/gpu_activity_translator.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_fixture.h"
#include "tests/support/trace_query.h"
#endif

namespace partrain::profiler {
namespace {

#ifdef PARTRAIN_HAVE_CUDA

class CollectingSink final : public GpuTraceSink {
 public:
  int32_t rank() const override { return 0; }
  int64_t timeline_ns(int64_t local_ns) const override { return local_ns; }
  int64_t step_at(int64_t /*local_ns*/) const override { return -1; }
  void emit(const TraceEvent& event) override { events.push_back(event); }
  void collective(const CollectiveEvent& event, int64_t gpu_start_ns,
                  int64_t gpu_end_ns) override {
    CollectiveRecord record;
    record.event = event;
    record.gpu_start_ns = gpu_start_ns;
    record.gpu_end_ns = gpu_end_ns;
    events.push_back(record);
  }
  std::vector<TraceEvent> events;
};

const CUpti_Activity& as_record(const auto& typed) {
  return reinterpret_cast<const CUpti_Activity&>(typed);
}

TEST(CuptiActivityParser, KernelRecordKeepsLaunchParameters) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = "_Z6gemm_kPf";
  k.start = 1000;
  k.end = 3500;
  k.deviceId = 1;
  k.streamId = 13;
  k.correlationId = 77;
  k.gridX = 64; k.gridY = 4; k.gridZ = 1;
  k.blockX = 128; k.blockY = 2; k.blockZ = 1;
  k.registersPerThread = 96;
  k.staticSharedMemory = 2048;
  k.dynamicSharedMemory = 65536;
  auto parsed = cupti::parse_activity(as_record(k), 0);
  ASSERT_TRUE(parsed.has_value());
  const auto* kernel = std::get_if<GpuKernel>(&*parsed);
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->name, "_Z6gemm_kPf");
  EXPECT_EQ(kernel->start_ns, 1000);
  EXPECT_EQ(kernel->end_ns, 3500);
  EXPECT_EQ(kernel->device, 1);
  EXPECT_EQ(kernel->stream, 13u);
  EXPECT_EQ(kernel->correlation, 77u);
  EXPECT_EQ(kernel->grid, (std::array<int32_t, 3>{64, 4, 1}));
  EXPECT_EQ(kernel->block, (std::array<int32_t, 3>{128, 2, 1}));
  EXPECT_EQ(kernel->registers, 96);
  EXPECT_EQ(kernel->static_shared_bytes, 2048);
  EXPECT_EQ(kernel->dynamic_shared_bytes, 65536);
}

// CUPTI's clock is Unix time; the session's offset places each timestamp on the monotonic clock,
// and an unknown (0) timestamp stays unknown.
TEST(CuptiActivityParser, TimestampsMoveByTheClockOffset) {
  constexpr int64_t kOffset = -1'700'000'000'000'000'000;
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 1'700'000'000'000'001'000;
  k.end = 1'700'000'000'000'003'500;
  auto kernel = cupti::parse_activity(as_record(k), kOffset);
  ASSERT_TRUE(kernel && std::holds_alternative<GpuKernel>(*kernel));
  EXPECT_EQ(std::get<GpuKernel>(*kernel).start_ns, 1000);
  EXPECT_EQ(std::get<GpuKernel>(*kernel).end_ns, 3500);

  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.start = 1'700'000'000'000'002'000;
  copy.end = 0;
  auto parsed_copy = cupti::parse_activity(as_record(copy), kOffset);
  ASSERT_TRUE(parsed_copy && std::holds_alternative<GpuMemcpy>(*parsed_copy));
  EXPECT_EQ(std::get<GpuMemcpy>(*parsed_copy).start_ns, 2000);
  EXPECT_EQ(std::get<GpuMemcpy>(*parsed_copy).end_ns, 0);

  CUpti_ActivitySynchronization2 sync{};
  sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  sync.start = 1'700'000'000'000'004'000;
  sync.end = 1'700'000'000'000'004'500;
  auto parsed_sync = cupti::parse_activity(as_record(sync), kOffset);
  ASSERT_TRUE(parsed_sync && std::holds_alternative<GpuSynchronization>(*parsed_sync));
  EXPECT_EQ(std::get<GpuSynchronization>(*parsed_sync).start_ns, 4000);
  EXPECT_EQ(std::get<GpuSynchronization>(*parsed_sync).end_ns, 4500);
}

TEST(CuptiActivityParser, OtherKindsAndThoseNotRecorded) {
  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  copy.bytes = 1 << 20;
  auto parsed_copy = cupti::parse_activity(as_record(copy), 0);
  ASSERT_TRUE(parsed_copy && std::holds_alternative<GpuMemcpy>(*parsed_copy));
  EXPECT_EQ(std::get<GpuMemcpy>(*parsed_copy).direction, CopyDirection::kDeviceToHost);
  EXPECT_EQ(std::get<GpuMemcpy>(*parsed_copy).bytes, 1u << 20);

  CUpti_ActivityMemory4 host_memory{};
  host_memory.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  host_memory.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  host_memory.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  EXPECT_FALSE(cupti::parse_activity(as_record(host_memory), 0).has_value());

  CUpti_ActivityExternalCorrelation torch_id{};
  torch_id.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  torch_id.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;  // the PyTorch profiler's
  EXPECT_FALSE(cupti::parse_activity(as_record(torch_id), 0).has_value());

  CUpti_ActivityAPI api{};
  api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  EXPECT_FALSE(cupti::parse_activity(as_record(api), 0).has_value());
}

TEST(CuptiActivityParser, SyntheticRecordsThroughTheTranslatorGiveRowsAndLinks) {
  CollectingSink sink;
  GpuActivityTranslator translator(sink);
  NcclCallRecord call;
  call.correlation = 9001;
  call.event.comm_id = "nccl-00000000000000aa";
  call.event.op = "all_reduce";
  call.event.dtype = "float";
  call.event.count = 1 << 18;
  call.event.bytes = 1 << 20;
  call.event.group_size = 2;
  call.event.enqueue_ns = 500;
  call.event.start_ns = 500;
  call.event.end_ns = 520;
  call.event.state = CollectiveState::kCompleted;
  translator.add_nccl_call(call);

  CUpti_ActivityExternalCorrelation link{};
  link.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  link.externalKind = cupti::kNcclCorrelationKind;
  link.externalId = 9001;
  link.correlationId = 5;
  CUpti_ActivityKernel10 nccl_kernel{};
  nccl_kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  nccl_kernel.name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  nccl_kernel.start = 600;
  nccl_kernel.end = 2600;
  nccl_kernel.streamId = 21;
  nccl_kernel.correlationId = 5;
  CUpti_ActivityMemset4 set{};
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.bytes = 256;
  set.start = 100;
  set.end = 150;
  set.streamId = 21;
  CUpti_ActivityMemory4 alloc{};
  alloc.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  alloc.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  alloc.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  alloc.bytes = 2 << 20;
  alloc.timestamp = 50;
  CUpti_ActivitySynchronization2 wait{};
  wait.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  wait.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  wait.start = 700;
  wait.end = 2700;
  for (const CUpti_Activity* record :
       {&as_record(alloc), &as_record(set), &as_record(link), &as_record(nccl_kernel),
        &as_record(wait)}) {
    auto activity = cupti::parse_activity(*record, 0);
    ASSERT_TRUE(activity.has_value());
    translator.add(*activity);
  }
  translator.flush(false);

  testing::ScratchDir scratch;
  testing::write_completed_trace(scratch.path() / "cupti.db", "{}", 1, sink.events);
  testing::TraceQuery trace(scratch.path() / "cupti.db");
  EXPECT_EQ(trace.rows("SELECT name, ts_ns, dur_ns, correlation_id, stream FROM kernels"),
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL|600|2000|5|21\n");
  EXPECT_EQ(trace.rows("SELECT op, bytes, enqueue_ns, gpu_start_ns, gpu_end_ns FROM collectives"),
            "all_reduce|1048576|500|600|2600\n");
  EXPECT_EQ(trace.rows("SELECT track, name, category FROM slices WHERE category != 'kernel' AND "
                       "category != 'collective' ORDER BY ts_ns"),
            "gpu0 stream 21|memset|memset\ncuda sync|stream_synchronize|sync\n");
  EXPECT_EQ(trace.rows("SELECT ts_ns, category, bytes FROM memory_events"), "50|other|2097152\n");
}

#else

TEST(CuptiActivityParser, NeedsCuptiHeaders) {
  GTEST_SKIP() << "a CPU-only build (PARTRAIN_CUDA=OFF or no CUDA toolkit): no CUPTI headers";
}

#endif

}  // namespace
}  // namespace partrain::profiler
