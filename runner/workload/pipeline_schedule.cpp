#include "runner/workload/pipeline_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace partrain::runner {
namespace {

// One forward or backward in schedule order, before the transfers are woven in.
struct ComputeStep {
  bool forward = true;
  int micro_batch = 0;
  int chunk = 0;
};

// Megatron-LM schedules.py, get_model_chunk_id / get_microbatch_id_in_model_chunk: the k-th
// forward (backward) of a rank walks micro-batches in groups of pp, chunk by chunk, forwards
// through the rank's chunks in ascending order and backwards in descending order.
ComputeStep interleaved_step(const PipelineShape& shape, int rank, int k, bool forward) {
  const int group = shape.pp * shape.vpp;
  int local = (k % group) / shape.pp;
  if (!forward) local = shape.vpp - 1 - local;
  const int micro_batch = (k / group) * shape.pp + k % shape.pp;
  return {forward, micro_batch, local * shape.pp + rank};
}

// Warm-up forwards, then one forward and one backward per steady step, then the remaining
// backwards: PipeDream-Flush (Narayanan 2021) and its interleaved variant share this skeleton.
template <typename StepOf>
std::vector<ComputeStep> one_f_one_b(int total, int warmup, StepOf step_of) {
  std::vector<ComputeStep> steps;
  steps.reserve(static_cast<size_t>(2 * total));
  for (int k = 0; k < warmup; ++k) steps.push_back(step_of(k, true));
  for (int k = 0; k < total - warmup; ++k) {
    steps.push_back(step_of(warmup + k, true));
    steps.push_back(step_of(k, false));
  }
  for (int k = total - warmup; k < total; ++k) steps.push_back(step_of(k, false));
  return steps;
}

std::vector<ComputeStep> compute_order(const PipelineShape& shape, int rank) {
  const int m = shape.micro_batches;
  if (shape.schedule == PipelineSchedule::kInterleaved) {
    return one_f_one_b(m * shape.vpp, warmup_forwards(shape, rank), [&](int k, bool forward) {
      return interleaved_step(shape, rank, k, forward);
    });
  }
  // GPipe is 1F1B with every forward in the warm-up.
  return one_f_one_b(m, warmup_forwards(shape, rank), [&](int k, bool forward) {
    return ComputeStep{forward, k, rank};
  });
}

}  // namespace

PipelineShape pipeline_shape(const ResolvedLayout& layout) {
  const TrainingLayout& l = layout.layout;
  return {l.schedule, l.pp, l.vpp, static_cast<int>(layout.micro_batches)};
}

Status check_pipeline_shape(const PipelineShape& shape) {
  if (shape.pp < 1) return invalid_argument("pipeline needs pp >= 1, got {}", shape.pp);
  if (shape.micro_batches < 1) {
    return invalid_argument("pipeline needs at least one micro-batch, got {}", shape.micro_batches);
  }
  const std::string_view name = memory::schedule_name(shape.schedule);
  if (shape.schedule != PipelineSchedule::kInterleaved) {
    if (shape.vpp != 1) {
      return invalid_argument("{} runs one chunk per rank, got vpp {}", name, shape.vpp);
    }
    return Status::ok();
  }
  if (shape.pp < 2 || shape.vpp < 2) {
    return invalid_argument("interleaved 1F1B needs pp >= 2 and vpp >= 2, got pp {} vpp {}",
                            shape.pp, shape.vpp);
  }
  if (shape.micro_batches % shape.pp != 0) {
    return invalid_argument("interleaved 1F1B needs micro-batches ({}) to be a multiple of pp ({})",
                            shape.micro_batches, shape.pp);
  }
  return Status::ok();
}

int chunk_rank(const PipelineShape& shape, int chunk) { return chunk % shape.pp; }

std::vector<int> rank_chunks(const PipelineShape& shape, int rank) {
  std::vector<int> chunks;
  for (int k = 0; k < shape.vpp; ++k) chunks.push_back(k * shape.pp + rank);
  return chunks;
}

std::string_view pipeline_action_name(PipelineActionKind kind) {
  switch (kind) {
    case PipelineActionKind::kForward: return "forward";
    case PipelineActionKind::kBackward: return "backward";
    case PipelineActionKind::kRecvActivation: return "recv-activation";
    case PipelineActionKind::kSendActivation: return "send-activation";
    case PipelineActionKind::kRecvGradient: return "recv-gradient";
    case PipelineActionKind::kSendGradient: return "send-gradient";
  }
  return "?";
}

bool is_send(PipelineActionKind kind) {
  return kind == PipelineActionKind::kSendActivation || kind == PipelineActionKind::kSendGradient;
}
bool is_recv(PipelineActionKind kind) {
  return kind == PipelineActionKind::kRecvActivation || kind == PipelineActionKind::kRecvGradient;
}

std::string describe_action(const PipelineAction& action) {
  switch (action.kind) {
    case PipelineActionKind::kForward:
      return fmt::format("F(mb={},c={})", action.micro_batch, action.chunk);
    case PipelineActionKind::kBackward:
      return fmt::format("B(mb={},c={})", action.micro_batch, action.chunk);
    case PipelineActionKind::kRecvActivation:
    case PipelineActionKind::kRecvGradient:
      return fmt::format("recv-{}(mb={},c={})<-{}",
                         action.kind == PipelineActionKind::kRecvActivation ? 'A' : 'G',
                         action.micro_batch, action.chunk, action.peer);
    case PipelineActionKind::kSendActivation:
    case PipelineActionKind::kSendGradient:
      return fmt::format("send-{}(mb={},c={})->{}",
                         action.kind == PipelineActionKind::kSendActivation ? 'A' : 'G',
                         action.micro_batch, action.chunk, action.peer);
  }
  return "?";
}

StatusOr<std::vector<PipelineAction>> pipeline_actions(const PipelineShape& shape, int rank) {
  RETURN_IF_ERROR(check_pipeline_shape(shape));
  if (rank < 0 || rank >= shape.pp) {
    return invalid_argument("pipeline rank {} is outside 0..{}", rank, shape.pp - 1);
  }
  using Kind = PipelineActionKind;
  const int last = shape.chunks() - 1;
  std::vector<PipelineAction> actions;
  // Each transfer sits right next to the compute it serves: a receive just before its consumer
  // (so it is waited for as late as possible), a send just after its producer (so the peer can
  // start as early as possible). With asynchronous sends, deadlock freedom then follows from the
  // compute order alone (docs/pipeline.md).
  for (const ComputeStep& step : compute_order(shape, rank)) {
    const int mb = step.micro_batch;
    const int c = step.chunk;
    if (step.forward) {
      if (c > 0) actions.push_back({Kind::kRecvActivation, mb, c, chunk_rank(shape, c - 1)});
      actions.push_back({Kind::kForward, mb, c, -1});
      if (c < last) actions.push_back({Kind::kSendActivation, mb, c + 1, chunk_rank(shape, c + 1)});
    } else {
      if (c < last) actions.push_back({Kind::kRecvGradient, mb, c + 1, chunk_rank(shape, c + 1)});
      actions.push_back({Kind::kBackward, mb, c, -1});
      if (c > 0) actions.push_back({Kind::kSendGradient, mb, c, chunk_rank(shape, c - 1)});
    }
  }
  return actions;
}

int warmup_forwards(const PipelineShape& shape, int rank) {
  const int m = shape.micro_batches;
  switch (shape.schedule) {
    case PipelineSchedule::kGpipe: return m;
    case PipelineSchedule::kOneFOneB: return std::min(shape.pp - rank - 1, m);
    case PipelineSchedule::kInterleaved:
      // Megatron-LM schedules.py, forward_backward_pipelining_with_interleaving.
      return std::min((shape.pp - rank - 1) * 2 + (shape.vpp - 1) * shape.pp, m * shape.vpp);
  }
  return m;
}

int peak_activations_in_flight(const PipelineShape& shape, int rank) {
  // During the steady state a rank holds its warm-up forwards plus the one just run.
  return std::min(warmup_forwards(shape, rank) + 1, shape.micro_batches * shape.vpp);
}

double theoretical_bubble_fraction(PipelineSchedule schedule, int pp, int vpp, int micro_batches) {
  // Narayanan 2021, sec. 2.2: (p-1)/m for GPipe and PipeDream-Flush, (p-1)/(v m) interleaved.
  const double idle_stages = pp - 1;
  if (schedule == PipelineSchedule::kInterleaved) return idle_stages / (vpp * micro_batches);
  return idle_stages / micro_batches;
}

uint64_t message_tag(PipelineMessage message, int micro_batch, int chunk) {
  constexpr int kChunkBits = 24;
  const auto kind_bit = static_cast<uint64_t>(message == PipelineMessage::kGradient ? 1 : 0);
  return (static_cast<uint64_t>(micro_batch) << (kChunkBits + 1)) |
         (static_cast<uint64_t>(chunk) << 1) | kind_bit;
}

uint64_t message_tag(const PipelineAction& action) {
  switch (action.kind) {
    case PipelineActionKind::kRecvActivation:
    case PipelineActionKind::kSendActivation:
      return message_tag(PipelineMessage::kActivation, action.micro_batch, action.chunk);
    case PipelineActionKind::kRecvGradient:
    case PipelineActionKind::kSendGradient:
      return message_tag(PipelineMessage::kGradient, action.micro_batch, action.chunk);
    case PipelineActionKind::kForward:
    case PipelineActionKind::kBackward:
      break;
  }
  return std::numeric_limits<uint64_t>::max();  // no message
}

}  // namespace partrain::runner
