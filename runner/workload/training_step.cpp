#include "runner/workload/training_step.h"

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/log.h"
#include "profiler/trace_scope.h"
#include "runner/fault/step_faults.h"

namespace partrain::runner {
namespace {

constexpr float kMaxGradNorm = 1.0f;  // GPT-2 / Megatron's clipping threshold

}  // namespace

TrainingStep::TrainingStep(const WorkloadConfig& config, Device& device, comm::Comm& world,
                           TrainingRank& rank, const BatchSource& batches,
                           comm::HostValueCollectives& world_values,
                           profiler::RankTracer* tracer)
    : config_(config),
      device_(device),
      world_(world),
      rank_(rank),
      batches_(batches),
      world_values_(world_values),
      tracer_(tracer) {
  adam_.learning_rate = static_cast<float>(config.lr);
}

StatusOr<float> TrainingStep::run(int step) {
  fault::inject_step_start_faults(config_.faults, world_.rank(), step, device_.allocator(),
                                  tracer_);
  rank_.dp->zero_grads();
  ASSIGN_OR_RETURN(double loss, forward_backward(step));
  expert_load_.clear();
  for (const auto& chunk : rank_.chunks) {
    for (ExpertLayerLoad& load : chunk->take_expert_loads())
      expert_load_.push_back(std::move(load));
  }
  {
    profiler::TraceScope phase(tracer_, "reduce_gradients", profiler::SliceCategory::kPhase);
    RETURN_IF_ERROR(rank_.dp->reduce_gradients());
  }
  RETURN_IF_ERROR(update(step));
  ASSIGN_OR_RETURN(float reported, reduce_loss(step, loss));
  // A device whose ops can fail (a CUDA kernel, a pointer outside the isolated device's
  // buffers) keeps the first failure; the step ends with it rather than train on garbage.
  RETURN_IF_ERROR(device_.status());
  return reported;
}

// Forward and backward over the step's micro-batches; returns this rank's share of the mean
// loss over the global batch (0 on pipeline stages but the last).
StatusOr<double> TrainingStep::forward_backward(int step) {
  const int64_t B = config_.resolved.layout.micro_batch;
  const int64_t G = config_.resolved.global_batch;
  const int dp_rank = rank_.coords.dp;
  // The moment the last gradient is produced ends backward: a bucket launched after it
  // (always the one holding the first layers) did not overlap anything.
  auto unit_ready = [&](const std::string& unit) {
    last_grad_ns_ = monotonic_ns();
    rank_.dp->unit_ready(unit);
  };
  if (rank_.pipeline) {
    PipelineStepHooks hooks;
    hooks.fill_batch = [&](int mb, MicroBatch& b) {
      return batches_.fill(device_, step, dp_rank, mb, b);
    };
    hooks.unit_ready = unit_ready;
    ASSIGN_OR_RETURN(double loss_sum, rank_.pipeline->run_step(hooks));
    return loss_sum * static_cast<double>(B) / static_cast<double>(G);
  }
  ModelChunk& chunk = *rank_.chunks.front();
  double loss = 0;
  for (int mb = 0; mb < config_.resolved.micro_batches; ++mb) {
    RETURN_IF_ERROR(batches_.fill(device_, step, dp_rank, mb, batch_));
    float mb_loss = 0;
    {
      profiler::TraceScope phase(tracer_, "forward", profiler::SliceCategory::kPhase, -1, mb);
      RETURN_IF_ERROR(chunk.forward(mb, batch_, nullptr, nullptr, &mb_loss));
    }
    loss += static_cast<double>(mb_loss) * static_cast<double>(B) / static_cast<double>(G);
    const bool last = mb + 1 == config_.resolved.micro_batches;
    profiler::TraceScope phase(tracer_, "backward", profiler::SliceCategory::kPhase, -1, mb);
    RETURN_IF_ERROR(chunk.backward(mb, batch_, nullptr, nullptr,
                                   last ? unit_ready
                                        : std::function<void(const std::string&)>()));
  }
  return loss;
}

// AdamW on the reduced gradients, clipped to a global norm of kMaxGradNorm.
Status TrainingStep::update(int step) {
  profiler::TraceScope phase(tracer_, "optimizer", profiler::SliceCategory::kPhase);
  ASSIGN_OR_RETURN(double grad_sq, rank_.dp->grad_norm_squared());
  const double grad_norm = std::sqrt(grad_sq);
  const float clip = grad_norm > kMaxGradNorm
                         ? static_cast<float>(kMaxGradNorm / (grad_norm + 1e-6))
                         : 1.0f;
  RETURN_IF_ERROR(rank_.dp->update(adam_, step + 1, clip));
  log::debug("step {}: grad norm {:.4f}", step, grad_norm);
  return Status::ok();
}

// The step's loss over the global batch: each dp rank's share, counted once per tp group (only
// the last pipeline stage computes it).
StatusOr<float> TrainingStep::reduce_loss(int step, double loss) {
  auto reported = static_cast<float>(rank_.coords.tp == 0 ? loss : 0.0);
  if (const fault::FaultSpec* desync =
          fault::fault_at(config_.faults, fault::FaultKind::kDesync, world_.rank(), step)) {
    // --inject desync: a different collective at the seq where every other rank all-reduces
    // the loss; the watchdog or Gloo's own error ends the run, the diagnosis names this rank.
    log::warn("rank {}: --inject {}: issuing all_gather instead of the loss all_reduce at step "
              "{}",
              world_.rank(), fault::fault_spec_text(*desync), step);
    std::vector<float> gathered(static_cast<size_t>(world_.size()));
    RETURN_IF_ERROR(world_values_.all_gather(&reported, gathered.data(), 1, comm::DType::kF32));
  } else {
    RETURN_IF_ERROR(
        world_values_.all_reduce(&reported, 1, comm::DType::kF32, comm::ReduceOp::kSum));
  }
  return reported;
}

}  // namespace partrain::runner
