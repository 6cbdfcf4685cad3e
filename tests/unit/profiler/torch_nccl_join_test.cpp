// One row per collective when PyTorch's hooks and the NCCL interposition both see it: joined by
// the window the calls were made in, whatever either side numbered them.
#include "profiler/torch_nccl_join.h"

#include <gtest/gtest.h>

#include <vector>

namespace partrain::profiler {
namespace {

NcclCallRecord nccl_call(uint64_t window, uint64_t correlation, uint64_t nccl_seq,
                         std::string_view op = "all_reduce") {
  NcclCallRecord call;
  call.event.comm_id = "nccl-00000000000000aa";
  call.event.op = op;
  call.event.seq = nccl_seq;
  call.correlation = correlation;
  call.stream = 0x50;
  call.torch_op = window;
  return call;
}

CollectiveEvent torch_event(uint64_t seq, std::string_view op = "all_reduce") {
  CollectiveEvent event;
  event.comm_id = "default_pg:0";
  event.op = op;
  event.seq = seq;
  return event;
}

class TorchNcclJoinTest : public ::testing::Test {
 protected:
  std::vector<NcclCallRecord> rows_;
  TorchNcclJoin join_{[this](const NcclCallRecord& row) { rows_.push_back(row); }};
};

TEST_F(TorchNcclJoinTest, TheNcclCallOfAWindowBecomesThePyTorchRowWithItsCorrelation) {
  join_.nccl_call(nccl_call(/*window=*/1, /*correlation=*/41, /*nccl_seq=*/9));
  EXPECT_TRUE(rows_.empty()) << "the NCCL call waits for PyTorch's record";
  join_.torch_op(1, torch_event(0));
  ASSERT_EQ(rows_.size(), 1u);
  EXPECT_EQ(rows_[0].event.comm_id, "default_pg:0");  // PyTorch's name and numbering
  EXPECT_EQ(rows_[0].event.seq, 0u);
  EXPECT_EQ(rows_[0].correlation, 41u);  // the GPU span is the NCCL call's
  EXPECT_EQ(rows_[0].stream, 0x50u);
  EXPECT_EQ(join_.stats().joined, 1u);
}

// A barrier is an all_reduce of one element to NCCL, numbered by NCCL's communicator, while
// c10d numbers it as a barrier; a coalesced op is several NCCL calls: still one row each.
TEST_F(TorchNcclJoinTest, NumbersThatDisagreeDoNotMatter) {
  join_.nccl_call(nccl_call(5, 60, /*nccl_seq=*/3));
  join_.nccl_call(nccl_call(6, 61, 4, "all_gather"));
  join_.nccl_call(nccl_call(6, 61, 5, "all_gather"));
  join_.torch_op(6, torch_event(12, "all_gather"));
  join_.torch_op(5, torch_event(11, "barrier"));
  ASSERT_EQ(rows_.size(), 2u);
  EXPECT_EQ(rows_[0].event.op, "all_gather");
  EXPECT_EQ(rows_[0].event.seq, 12u);
  EXPECT_EQ(rows_[0].correlation, 61u);
  EXPECT_EQ(rows_[1].event.op, "barrier");
  EXPECT_EQ(rows_[1].correlation, 60u);
  EXPECT_EQ(join_.stats().joined, 2u);
}

TEST_F(TorchNcclJoinTest, CallsOutsideWindowsAndOpsWithoutCallsGoAsTheyAre) {
  join_.nccl_call(nccl_call(0, 70, 1));
  ASSERT_EQ(rows_.size(), 1u);
  EXPECT_EQ(rows_[0].event.comm_id, "nccl-00000000000000aa");
  join_.torch_op(0, torch_event(3));  // gloo: no window
  join_.torch_op(8, torch_event(4));  // a window in which NCCL was not called
  ASSERT_EQ(rows_.size(), 3u);
  EXPECT_EQ(rows_[1].correlation, 0u);
  EXPECT_EQ(rows_[2].correlation, 0u);
  EXPECT_EQ(join_.stats().joined, 0u);
}

TEST_F(TorchNcclJoinTest, LateCallsAndCallsWhosePyTorchRecordNeverCameGoAlone) {
  join_.torch_op(2, torch_event(0));
  join_.nccl_call(nccl_call(2, 80, 0));  // its group ended after the op's record left
  ASSERT_EQ(rows_.size(), 2u);
  EXPECT_EQ(rows_[1].event.comm_id, "nccl-00000000000000aa");
  join_.nccl_call(nccl_call(3, 81, 1));  // the process ends before PyTorch's record
  EXPECT_EQ(rows_.size(), 2u);
  join_.flush();
  ASSERT_EQ(rows_.size(), 3u);
  EXPECT_EQ(rows_[2].correlation, 81u);
  EXPECT_EQ(join_.stats().nccl_alone, 2u);
}

TEST_F(TorchNcclJoinTest, WhatWaitsIsBounded) {
  for (uint64_t window = 1; window <= TorchNcclJoin::kMaxWaitingOps + 10; ++window) {
    join_.nccl_call(nccl_call(window, window, window));
  }
  EXPECT_EQ(rows_.size(), 10u) << "the oldest waiting calls went on alone";
  EXPECT_EQ(rows_.front().correlation, 1u);
  join_.torch_op(5, torch_event(5));  // its call went alone: PyTorch's record stands alone
  EXPECT_EQ(rows_.back().event.comm_id, "default_pg:0");
  EXPECT_EQ(rows_.back().correlation, 0u);
}

}  // namespace
}  // namespace partrain::profiler
