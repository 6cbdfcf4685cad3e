// Pipeline-parallel schedules as data: for one pipeline rank, the ordered list of forwards,
// backwards, weight-gradient passes and point-to-point transfers it runs in one training step
// (GPipe, 1F1B, Megatron's interleaved 1F1B, ZB-H1, DualPipeV). The compute order and the
// placement of chunks are memory's (memory/pipeline_order.h); this weaves the transfers in. Pure
// functions, no communication: the executor walks the list (docs/pipeline.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "memory/pipeline_order.h"
#include "runner/workload/workload_layout.h"

namespace partrain::runner {

// The model is cut into chunks of consecutive layers: pp x vpp, chunk c on pipeline rank c % pp
// (Megatron's interleaving: rank r owns chunks r, r + pp, r + 2 pp, ...), or under DualPipeV
// 2 pp of them folded into a V (rank r owns r and 2 pp - 1 - r). Chunk 0 reads the embedding, the
// last chunk computes the loss.
struct PipelineShape {
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  int pp = 1;              // pipeline ranks
  int vpp = 1;             // chunks per rank under interleaved; 1 otherwise
  int micro_batches = 1;   // per step
  int chunks() const { return memory::pipeline_chunks(schedule, pp, vpp); }
};
PipelineShape pipeline_shape(const ResolvedLayout& layout);
// kInvalidArgument unless pp >= 1, micro_batches >= 1, vpp == 1 but for interleaved, and for
// interleaved pp >= 2, vpp >= 2, micro_batches % pp == 0 (as resolve_layout demands); zb-h1 and
// dualpipev pp >= 2, dualpipev micro_batches >= 2 pp; dualpipe is refused (memory models it, the
// runner runs dualpipev).
Status check_pipeline_shape(const PipelineShape& shape);

int chunk_rank(const PipelineShape& shape, int chunk);                    // memory::chunk_rank
std::vector<int> rank_chunks(const PipelineShape& shape, int rank);       // ascending

enum class PipelineActionKind {
  kForward,
  kBackward,  // the input gradient only, when the schedule splits the backward
  kWeight,    // the weight gradients that backward left (zb-h1, dualpipev)
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
//    same (micro_batch, chunk) (its W when the backward is split); the backward of the last chunk
//    starts from the loss. weight: the weight gradients of that (micro_batch, chunk)'s backward.
//  - two adjacent chunks on the same rank (the tip of DualPipeV's V) exchange no messages: the
//    executor hands the activation and the gradient over in place.
//  - at the end of the step, wait for every posted send.
// Each rank runs every (micro_batch, own chunk) exactly once forward and once backward (and
// once weight, when the schedule splits the backward).
StatusOr<std::vector<PipelineAction>> pipeline_actions(const PipelineShape& shape, int rank);

// Forwards a rank runs before its first backward (memory::warmup_forwards).
int warmup_forwards(const PipelineShape& shape, int rank);
// Most (micro_batch, chunk) activations a rank holds at once (forwards whose backward, or W, has
// not run): gpipe m; 1f1b min(pp - r, m); interleaved min(warm-up + 1, m x vpp); zb-h1 min(pp, m);
// dualpipev 2 pp + 1. Rank 0 of interleaved holds pp x vpp + pp - 1 chunk activations =
// pp (1 + (pp-1)/(pp vpp)) stages' worth (Korthikanti 2022).
int peak_activations_in_flight(const PipelineShape& shape, int rank);

// Idle time over ideal compute time with equal micro-batch costs and free communication:
// memory::bubble_fraction ((p-1)/m for gpipe and 1f1b, (p-1)/(v m) for interleaved (Narayanan
// 2021, sec. 2.2), (p-1)/(3m) for zb-h1 and dualpipev with F = B = W).
double theoretical_bubble_fraction(PipelineSchedule schedule, int pp, int vpp, int micro_batches);

// The communicator a transfer travels on. Gloo completes one communicator's transfers in the
// order they were posted, so a receive also waits for the sends its rank posted before it there,
// and those for the peers' receives. Each channel therefore carries one stream one way between
// two neighbours: activations and gradients apart, and DualPipeV's way back up the V (messages
// into chunks >= pp) apart from its way down (pipeline_schedule_test proves the lists complete
// under these semantics; with two channels DualPipeV deadlocks from pp 3 on).
enum class PipelineChannel { kActivations, kGradients, kActivationsBack, kGradientsBack };
inline constexpr int kPipelineChannels = 4;
// The channels a shape uses: 4 under DualPipeV, else 2 (activations and gradients).
int pipeline_channels(const PipelineShape& shape);
// A send/recv's channel (its consumer's half of the V decides the way).
PipelineChannel pipeline_channel(const PipelineShape& shape, const PipelineAction& action);

// Tags keep the two streams apart even when the previous and the next rank are the same (pp = 2):
// bit 0 is the message kind, bits 1-24 the chunk, the rest the micro-batch. Unique per
// (kind, micro_batch, chunk) within one step; a channel shared with other traffic adds its own
// base.
enum class PipelineMessage { kActivation, kGradient };
uint64_t message_tag(PipelineMessage message, int micro_batch, int chunk);
// The tag of a send/recv action's message (the same on both sides); UINT64_MAX for compute.
uint64_t message_tag(const PipelineAction& action);

}  // namespace partrain::runner
