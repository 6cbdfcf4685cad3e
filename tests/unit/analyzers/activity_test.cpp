// What a slice's time counts as: by category, and for a kernel by its name (NCCL's kernels are
// communication, HTA's `^nccl.*Kernel`), the rule the rank breakdown, the dashboard and the GPU
// table share.
#include "analyzers/activity.h"

#include <gtest/gtest.h>

#include "analyzers/gpu_timeline.h"

namespace partrain::analyzers {
namespace {

using profiler::SliceCategory;

TEST(ActivityOf, NcclKernelsAreCommunication) {
  EXPECT_EQ(activity_of(SliceCategory::kKernel, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
            Activity::kComm);
  EXPECT_EQ(activity_of(SliceCategory::kKernel, "ncclKernel_AllGather_RING_LL_Sum_int8_t"),
            Activity::kComm);
  EXPECT_EQ(activity_of(SliceCategory::kKernel, "void gemm_kernel<float>(float*)"),
            Activity::kCompute);
  EXPECT_EQ(activity_of(SliceCategory::kKernel, "nccl_helper"), Activity::kCompute);
  EXPECT_EQ(activity_of(SliceCategory::kKernel, "ampere_ncclKernel_lookalike"), Activity::kCompute);
  // Only a kernel's name says whose it is: a host slice keeps its category's kind.
  EXPECT_EQ(activity_of(SliceCategory::kCompute, "ncclKernel_AllReduce"), Activity::kCompute);
  EXPECT_EQ(activity_of(SliceCategory::kCollective, "all_reduce"), Activity::kComm);
  EXPECT_EQ(activity_of(SliceCategory::kMemcpy, "memcpy HtoD"), Activity::kMemcpy);
}

TEST(ActivityOf, TheGpuTableCountsTheSameKernelsAsCommunication) {
  for (const char* name : {"ncclDevKernel_Broadcast_RING_LL", "ncclKernel_SendRecv", "gemm",
                           "nccl_helper", "ncclAllReduce"}) {
    EXPECT_EQ(activity_of(SliceCategory::kKernel, name) == Activity::kComm,
              gpu_work_of(SliceCategory::kKernel, name) == GpuWork::kComm)
        << name;
  }
}

}  // namespace
}  // namespace partrain::analyzers
