#include "runner/workload/pipeline_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "memory/pipeline.h"

namespace partrain::runner {

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
  if (shape.schedule != PipelineSchedule::kInterleaved && shape.vpp != 1) {
    return invalid_argument("{} runs no virtual stages, got vpp {}", name, shape.vpp);
  }
  switch (shape.schedule) {
    case PipelineSchedule::kGpipe:
    case PipelineSchedule::kOneFOneB:
      return Status::ok();
    case PipelineSchedule::kInterleaved:
      if (shape.pp < 2 || shape.vpp < 2) {
        return invalid_argument("interleaved 1F1B needs pp >= 2 and vpp >= 2, got pp {} vpp {}",
                                shape.pp, shape.vpp);
      }
      if (shape.micro_batches % shape.pp != 0) {
        return invalid_argument(
            "interleaved 1F1B needs micro-batches ({}) to be a multiple of pp ({})",
            shape.micro_batches, shape.pp);
      }
      return Status::ok();
    case PipelineSchedule::kZbH1:
    case PipelineSchedule::kDualPipeV:
      if (shape.pp < 2) return invalid_argument("{} needs pp >= 2, got {}", name, shape.pp);
      if (shape.schedule == PipelineSchedule::kDualPipeV && shape.micro_batches < 2 * shape.pp) {
        return invalid_argument("dualpipev needs at least 2 x pp = {} micro-batches, got {}",
                                2 * shape.pp, shape.micro_batches);
      }
      return Status::ok();
    case PipelineSchedule::kDualPipe:
      break;
  }
  return invalid_argument(
      "the built-in workloads run dualpipev, DualPipe's V-shaped half, not "
      "bidirectional dualpipe (partrain memory models it): use "
      "--pp-schedule dualpipev");
}

int chunk_rank(const PipelineShape& shape, int chunk) {
  return memory::chunk_rank(shape.schedule, shape.pp, chunk);
}

std::vector<int> rank_chunks(const PipelineShape& shape, int rank) {
  return memory::rank_chunks(shape.schedule, shape.pp, shape.vpp, rank);
}

std::string_view pipeline_action_name(PipelineActionKind kind) {
  switch (kind) {
    case PipelineActionKind::kForward: return "forward";
    case PipelineActionKind::kBackward: return "backward";
    case PipelineActionKind::kWeight:
      return "weight";
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
    case PipelineActionKind::kWeight:
      return fmt::format("W(mb={},c={})", action.micro_batch, action.chunk);
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
  using Pass = memory::PipelinePass;
  ASSIGN_OR_RETURN(std::vector<memory::PipelineCompute> order,
                   memory::pipeline_compute_order(shape.schedule, shape.pp, shape.vpp,
                                                  shape.micro_batches, rank));
  const int last = shape.chunks() - 1;
  // The rank of a neighbouring chunk, or -1 when it is this rank's (no message: handed over).
  auto remote = [&](int chunk) {
    const int owner = chunk_rank(shape, chunk);
    return owner == rank ? -1 : owner;
  };
  std::vector<PipelineAction> actions;
  // Each transfer sits right next to the compute it serves: a receive just before its consumer
  // (so it is waited for as late as possible), a send just after its producer (so the peer can
  // start as early as possible). With asynchronous sends, deadlock freedom then follows from the
  // compute order alone (docs/pipeline.md).
  for (const memory::PipelineCompute& step : order) {
    const int mb = step.micro_batch;
    const int c = step.chunk;
    switch (step.pass) {
      case Pass::kForward:
        if (c > 0 && remote(c - 1) >= 0) {
          actions.push_back({Kind::kRecvActivation, mb, c, remote(c - 1)});
        }
        actions.push_back({Kind::kForward, mb, c, -1});
        if (c < last && remote(c + 1) >= 0) {
          actions.push_back({Kind::kSendActivation, mb, c + 1, remote(c + 1)});
        }
        break;
      case Pass::kBackward:
        if (c < last && remote(c + 1) >= 0) {
          actions.push_back({Kind::kRecvGradient, mb, c + 1, remote(c + 1)});
        }
        actions.push_back({Kind::kBackward, mb, c, -1});
        if (c > 0 && remote(c - 1) >= 0) {
          actions.push_back({Kind::kSendGradient, mb, c, remote(c - 1)});
        }
        break;
      case Pass::kWeight:
        actions.push_back({Kind::kWeight, mb, c, -1});
        break;
    }
  }
  return actions;
}

int warmup_forwards(const PipelineShape& shape, int rank) {
  return memory::warmup_forwards(shape.schedule, shape.pp, shape.vpp, shape.micro_batches, rank);
}

int peak_activations_in_flight(const PipelineShape& shape, int rank) {
  return memory::peak_chunk_activations(shape.schedule, shape.pp, shape.vpp, shape.micro_batches,
                                        rank);
}

double theoretical_bubble_fraction(PipelineSchedule schedule, int pp, int vpp, int micro_batches) {
  return memory::bubble_fraction(schedule, pp, micro_batches, vpp);
}

int pipeline_channels(const PipelineShape& shape) {
  return shape.schedule == PipelineSchedule::kDualPipeV ? 4 : 2;
}

PipelineChannel pipeline_channel(const PipelineShape& shape, const PipelineAction& action) {
  const bool activation = action.kind == PipelineActionKind::kSendActivation ||
                          action.kind == PipelineActionKind::kRecvActivation;
  // Message (mb, c) is consumed by chunk c (an activation) or chunk c - 1 (a gradient).
  const int consumer = activation ? action.chunk : action.chunk - 1;
  const bool back = pipeline_channels(shape) == 4 && consumer >= shape.pp;
  if (activation) return back ? PipelineChannel::kActivationsBack : PipelineChannel::kActivations;
  return back ? PipelineChannel::kGradientsBack : PipelineChannel::kGradients;
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
    case PipelineActionKind::kWeight:
      break;
  }
  return std::numeric_limits<uint64_t>::max();  // no message
}

}  // namespace partrain::runner
