// PyTorch's collectives in the trace's words: group names, HookOpName and dtype mapping, and
// nccl-tests' count and bytes from the tensors the c10d hooks report.
#include "profiler/torch_collective.h"

#include <gtest/gtest.h>

namespace partrain::profiler {
namespace {

TorchGroup group_of(int size, int rank) {
  TorchGroup group;
  group.comm_id = torch_comm_id("3", "mesh_dp");
  for (int r = 0; r < size; ++r) group.ranks.push_back(10 + r);
  group.rank = rank;
  return group;
}

TorchOp op_of(std::string_view hook_op, uint64_t input, uint64_t output,
              std::string_view dtype = "float32", uint32_t element_bytes = 4) {
  TorchOp op;
  op.hook_op = hook_op;
  op.dtype = dtype;
  op.input_elements = input;
  op.output_elements = output;
  op.element_bytes = element_bytes;
  op.seq = 7;
  op.issue_ns = 100;
  op.issued_ns = 120;
  op.completed_ns = 500;
  return op;
}

TEST(TorchNames, GroupsAreNamedByDescriptionAndName) {
  EXPECT_EQ(torch_comm_id("0", "default_pg"), "default_pg:0");
  EXPECT_EQ(torch_comm_id("4", "mesh_tp"), "mesh_tp:4");
  EXPECT_EQ(torch_comm_id("9f2c", ""), "9f2c");
  EXPECT_EQ(torch_trace_dtype("float32"), "float");
  EXPECT_EQ(torch_trace_dtype("bfloat16"), "bfloat16");
  EXPECT_EQ(torch_trace_dtype("float16"), "half");
  EXPECT_EQ(torch_trace_dtype("float8_e4m3fn"), "fp8_e4m3");
  EXPECT_EQ(torch_trace_dtype("bool"), "other");
  EXPECT_EQ(torch_trace_op("ALLGATHER_INTO_TENSOR_COALESCED"), "all_gather");
  EXPECT_EQ(torch_trace_op("REDUCE_SCATTER_BASE"), "reduce_scatter");
  EXPECT_EQ(torch_trace_op("SPLIT"), std::nullopt);
  EXPECT_EQ(torch_trace_op("UNKNOWN"), std::nullopt);
}

// nccl-tests: count is one rank's buffer in NCCL's terms, bytes the op's size S.
TEST(TorchCollectiveEvent, CountAndBytesFollowNcclTests) {
  const TorchGroup group = group_of(4, 1);
  struct Case {
    std::string_view hook_op;
    uint64_t input, output, count, bytes;
  };
  for (const Case& c : {
           Case{"ALLREDUCE", 1000, 0, 1000, 4000},
           Case{"ALLREDUCE_COALESCED", 600, 0, 600, 2400},
           Case{"BROADCAST", 1000, 0, 1000, 4000},
           Case{"ALLGATHER_BASE", 250, 1000, 250, 4000},  // S: the gathered buffer
           Case{"ALLGATHER", 250, 1000, 250, 4000},
           Case{"REDUCE_SCATTER_BASE", 1000, 250, 250, 4000},
           Case{"REDUCE_SCATTER", 1000, 250, 250, 4000},
           Case{"ALLTOALL_BASE", 1000, 1000, 250, 4000},
           // all_to_all_single with split sizes: S is the whole input (3 x 4 bytes), not the
           // per-peer count (3 / 4, truncated) times the group.
           Case{"ALLTOALL_BASE", 3, 6, 0, 12},
           Case{"GATHER", 250, 1000, 250, 4000},
           Case{"SCATTER", 1000, 250, 250, 4000},
           Case{"SEND", 300, 0, 300, 1200},
           Case{"RECV", 0, 300, 300, 1200},
           Case{"BARRIER", 0, 0, 0, 0},
       }) {
    std::optional<CollectiveEvent> event =
        torch_collective_event(group, op_of(c.hook_op, c.input, c.output));
    ASSERT_TRUE(event) << c.hook_op;
    EXPECT_EQ(event->count, c.count) << c.hook_op;
    EXPECT_EQ(event->bytes, c.bytes) << c.hook_op;
  }
}

TEST(TorchCollectiveEvent, CarriesTheGroupNumberingAndTimes) {
  TorchOp send = op_of("SEND", 8, 0, "bfloat16", 2);
  send.root = 2;  // the peer, a group rank
  std::optional<CollectiveEvent> event = torch_collective_event(group_of(4, 1), send);
  ASSERT_TRUE(event);
  EXPECT_EQ(event->comm_id, "mesh_dp:3");
  EXPECT_EQ(event->op, "send");
  EXPECT_EQ(event->dtype, "bfloat16");
  EXPECT_EQ(event->bytes, 16u);
  EXPECT_EQ(event->seq, 7u);
  EXPECT_EQ(event->peer, 2);  // the tracer makes it world rank 12
  EXPECT_EQ(event->rank, 1);
  EXPECT_EQ(event->group_ranks, (std::vector<int>{10, 11, 12, 13}));
  EXPECT_EQ(event->group_size, 4);
  EXPECT_EQ(event->reduce_op, "");  // the hooks do not say
  // Called, issued, completed: the slice runs from issue to completion.
  EXPECT_EQ(event->enqueue_ns, 100);
  EXPECT_EQ(event->start_ns, 120);
  EXPECT_EQ(event->end_ns, 500);
  EXPECT_EQ(event->state, CollectiveState::kCompleted);
}

TEST(TorchCollectiveEvent, StatesOfFailedAndUnfinishedOps) {
  TorchOp failed = op_of("ALLREDUCE", 4, 0);
  failed.failed = true;
  EXPECT_EQ(torch_collective_event(group_of(2, 0), failed)->state, CollectiveState::kFailed);
  TorchOp unfinished = op_of("ALLREDUCE", 4, 0);
  unfinished.completed_ns = 0;  // the process ended first
  std::optional<CollectiveEvent> event = torch_collective_event(group_of(2, 0), unfinished);
  EXPECT_EQ(event->state, CollectiveState::kStarted);
  EXPECT_EQ(event->end_ns, event->start_ns);
  TorchOp barrier = op_of("BARRIER", 0, 0, "", 0);
  EXPECT_EQ(torch_collective_event(group_of(2, 0), barrier)->dtype, "float");
  EXPECT_FALSE(torch_collective_event(group_of(2, 0), op_of("SPLIT", 0, 0)));
}

}  // namespace
}  // namespace partrain::profiler
