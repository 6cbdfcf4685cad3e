// Pipeline-parallel schedules as data: for one pipeline rank, the ordered list of forwards,
// backwards and point-to-point transfers it runs in one training step (GPipe, 1F1B, Megatron's
// interleaved 1F1B). Pure functions, no communication: the executor walks the list
// (docs/pipeline.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runner/workload/workload_layout.h"

namespace partrain::runner {

// The model is cut into pp x vpp chunks of consecutive layers. Chunk c runs on pipeline rank
// c % pp (Megatron's interleaving: rank r owns chunks r, r + pp, r + 2 pp, ...). Chunk 0 reads
// the embedding, chunk pp x vpp - 1 computes the loss.
struct PipelineShape {
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  int pp = 1;              // pipeline ranks
  int vpp = 1;             // chunks per rank; 1 unless interleaved
  int micro_batches = 1;   // per step
  int chunks() const { return pp * vpp; }
};
PipelineShape pipeline_shape(const ResolvedLayout& layout);
// kInvalidArgument unless pp >= 1, micro_batches >= 1, vpp == 1 for gpipe/1f1b, and for
// interleaved pp >= 2, vpp >= 2, micro_batches % pp == 0 (as resolve_layout demands).
Status check_pipeline_shape(const PipelineShape& shape);

int chunk_rank(const PipelineShape& shape, int chunk);                   // chunk % pp
std::vector<int> rank_chunks(const PipelineShape& shape, int rank);       // ascending

enum class PipelineActionKind {
  kForward,
  kBackward,
  kRecvActivation,
  kSendActivation,
  kRecvGradient,
  kSendGradient,
};
std::string_view pipeline_action_name(PipelineActionKind kind);  // forward, recv-activation, ...

// A message is named by the chunk whose INPUT it is: activation (mb, c) is the output of chunk
// c - 1 = the input of chunk c; gradient (mb, c) is d loss / d(input of chunk c). Both sides of a
// transfer therefore carry the same (micro_batch, chunk), and chunk is always >= 1:
//   forward(mb, c-1)  -> send-activation(mb, c)   ...   recv-activation(mb, c) -> forward(mb, c)
//   backward(mb, c)   -> send-gradient(mb, c)     ...   recv-gradient(mb, c)   -> backward(mb, c-1)
struct PipelineAction {
  PipelineActionKind kind = PipelineActionKind::kForward;
  int micro_batch = 0;
  int chunk = 0;
  int peer = -1;  // the other pipeline rank of a send/recv; -1 for forward/backward
  bool operator==(const PipelineAction&) const = default;
};
bool is_send(PipelineActionKind kind);
bool is_recv(PipelineActionKind kind);
std::string describe_action(const PipelineAction& action);  // "F(mb=2,c=1)", "recv-A(mb=2,c=1)<-0"

// The actions of pipeline rank `rank` for one step, in the order the executor issues them.
//
// Executor contract (what the order is proven deadlock-free under; pipeline_schedule_test
// simulates all ranks with it):
//  - send-*: post an asynchronous send tagged message_tag(action) to action.peer and go on at
//    once; the send buffer stays alive and untouched until all sends are waited for at the end of
//    the step (or later: a send may complete only once the peer has posted its receive).
//  - recv-*: post the receive (tag message_tag(action), from action.peer) and wait for it before
//    the next action. It is always the action right before the forward/backward that consumes it.
//  - forward/backward: run the chunk; a forward keeps its activations until the backward of the
//    same (micro_batch, chunk); the backward of the last chunk starts from the loss.
//  - at the end of the step, wait for every posted send.
// Each rank runs every (micro_batch, own chunk) exactly once forward and once backward.
StatusOr<std::vector<PipelineAction>> pipeline_actions(const PipelineShape& shape, int rank);

// Forwards a rank runs before its first backward: gpipe m; 1f1b min(pp - r - 1, m); interleaved
// min((pp - r - 1) x 2 + (vpp - 1) x pp, m x vpp) (Megatron-LM schedules.py).
int warmup_forwards(const PipelineShape& shape, int rank);
// Most (micro_batch, chunk) activations a rank holds at once (forwards whose backward has not run):
// gpipe m; 1f1b min(pp - r, m); interleaved min(warm-up + 1, m x vpp). Rank 0 of interleaved holds
// pp x vpp + pp - 1 chunk activations = pp (1 + (pp-1)/(pp vpp)) stages' worth (Korthikanti 2022).
int peak_activations_in_flight(const PipelineShape& shape, int rank);

// Idle time over ideal compute time with equal micro-batch costs and free communication:
// (p-1)/m for gpipe and 1f1b, (p-1)/(v m) for interleaved (Narayanan 2021, sec. 2.2).
double theoretical_bubble_fraction(PipelineSchedule schedule, int pp, int vpp, int micro_batches);

// Tags keep the two streams apart even when the previous and the next rank are the same (pp = 2):
// bit 0 is the message kind, bits 1-24 the chunk, the rest the micro-batch. Unique per
// (kind, micro_batch, chunk) within one step; a channel shared with other traffic adds its own
// base.
enum class PipelineMessage { kActivation, kGradient };
uint64_t message_tag(PipelineMessage message, int micro_batch, int chunk);
// The tag of a send/recv action's message (the same on both sides); UINT64_MAX for compute.
uint64_t message_tag(const PipelineAction& action);

}  // namespace partrain::runner
