// profiler/inject/nccl_profiler_abi.h against the layout of NVIDIA/nccl's profiler_v4.h ..
// profiler_v6.h (x86-64 LP64): NCCL reads and writes these structs through its own declarations,
// so every offset the plugin or the tests' fake touches must be NCCL's. The expected offsets are
// worked out by hand from NCCL's member lists (no NCCL installation here ships those headers).
#include "profiler/inject/nccl_profiler_abi.h"

#include <gtest/gtest.h>

#include <cstddef>

namespace {

TEST(NcclProfilerAbi, DescriptorsV5AndV6HaveNcclsOffsets) {
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v5_t, type), 0u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v5_t, parent_obj), 8u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v5_t, rank), 16u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v5_t, coll.seq_number), 24u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v5_t, coll.count), 56u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v5_t, coll.n_channels), 80u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v5_t, coll.algo), 88u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v5_t, coll.proto), 96u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v5_t, coll.parent_group), 104u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v5_t, p2p.count), 48u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v5_t, p2p.peer), 56u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v5_t, p2p.n_channels), 60u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v5_t, proxy_op.n_steps), 36u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v5_t, proxy_op.chunk_size), 40u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v5_t, proxy_op.is_send), 44u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v5_t, kernel_ch.channel_id), 24u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v5_t, kernel_ch.p_timer), 32u);
  EXPECT_EQ(sizeof(partrain_nccl_event_descr_v5_t), 112u);
  // v6 only adds union members (the copy-engine ones): the rest is v5's.
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v6_t, coll.algo), 88u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v6_t, kernel_ch.p_timer), 32u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v6_t, ce_coll.stream), 104u);
  EXPECT_EQ(sizeof(partrain_nccl_event_descr_v6_t), 112u);
}

TEST(NcclProfilerAbi, DescriptorV4HasAOneByteTypeAndNoParentGroup) {
  EXPECT_EQ(sizeof(partrain_nccl_event_descr_v4_t{}.type), 1u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v4_t, parent_obj), 8u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v4_t, coll.algo), 88u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v4_t, coll.proto), 96u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v4_t, p2p.n_channels), 60u);
  EXPECT_EQ(offsetof(partrain_nccl_event_descr_v4_t, kernel_ch.p_timer), 32u);
  EXPECT_EQ(sizeof(partrain_nccl_event_descr_v4_t), 104u);
}

TEST(NcclProfilerAbi, TablesAndStateArgumentsHaveNcclsLayout) {
  EXPECT_EQ(sizeof(partrain_nccl_event_state_args_t), 8u);
  EXPECT_EQ(offsetof(partrain_nccl_event_state_args_t, kernel_ch.p_timer), 0u);
  EXPECT_EQ(offsetof(partrain_nccl_profiler_v6_t, init), 8u);
  EXPECT_EQ(offsetof(partrain_nccl_profiler_v6_t, record_event_state), 32u);
  EXPECT_EQ(sizeof(partrain_nccl_profiler_v6_t), 48u);
  EXPECT_EQ(sizeof(partrain_nccl_profiler_v5_t), 48u);
  EXPECT_EQ(sizeof(partrain_nccl_profiler_v4_t), 48u);
  // NCCL's event-type bits and the one state partrain reads.
  EXPECT_EQ(PARTRAIN_NCCL_PROFILE_COLL, 2);
  EXPECT_EQ(PARTRAIN_NCCL_PROFILE_KERNEL_CH, 64);
  EXPECT_EQ(PARTRAIN_NCCL_PROFILE_CE_BATCH, 1 << 14);
  EXPECT_EQ(PARTRAIN_NCCL_STATE_KERNEL_CH_STOP, 22);
}

}  // namespace
