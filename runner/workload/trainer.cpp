#include "runner/workload/trainer.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "core/clock.h"
#include "core/log.h"
#include "memory/flops.h"
#include "profiler/gemm_rate_stat.h"
#include "profiler/special_function_rate_stat.h"
#include "profiler/trace_scope.h"
#include "runner/comm/host_value_collectives.h"
#include "runner/workload/batch_source.h"
#include "runner/workload/ddp_overlap.h"
#include "runner/workload/training_rank.h"
#include "runner/workload/training_step.h"

namespace partrain::runner {
namespace {

std::string describe_model(const WorkloadConfig& config, int64_t local_params) {
  const WorkloadModel& m = config.model;
  if (config.kind == WorkloadKind::kMlp) {
    return fmt::format("mlp ({} layers, hidden {}; {} parameters on rank 0)", m.layers, m.hidden,
                       local_params);
  }
  std::string experts;
  if (m.moe.enabled()) {
    experts = fmt::format(", {} experts top-{} of moe-ffn {}", m.moe.experts, m.moe.top_k,
                          m.moe.expert_ffn);
    if (m.moe.shared_experts > 0) experts += fmt::format(" + {} shared", m.moe.shared_experts);
    if (m.moe.dense_layers > 0) experts += fmt::format(", {} dense layers", m.moe.dense_layers);
    experts += m.moe.capacity_factor > 0
                   ? fmt::format(", capacity factor {}", m.moe.capacity_factor)
                   : std::string(", dropless");
  }
  return fmt::format("gpt ({} layers, hidden {}, {} heads, seq {}, vocab {}, ffn {}{}; {} "
                     "parameters on rank 0)",
                     m.layers, m.hidden, m.heads, m.seq, m.vocab, m.ffn, experts, local_params);
}

// Every change of tracked memory, by category: the trace's memory counters.
void trace_memory(Device& device, profiler::RankTracer* tracer) {
  if (tracer == nullptr) return;
  device.allocator().set_observer([tracer](const MemoryEvent& e) {
    tracer->memory(static_cast<uint8_t>(e.category), e.timestamp_ns,
                   static_cast<int64_t>(e.category_bytes));
  });
}

// The device's GEMM peak, measured once every rank is up (a rank measuring while others still
// start shares the cores with them: MFU read 173%), the best of every rank's measurement.
StatusOr<Device::PeakGemm> measure_peak(Device& device, comm::Comm& world,
                                        comm::HostValueCollectives& world_values) {
  RETURN_IF_ERROR(world.barrier());
  ASSIGN_OR_RETURN(Device::PeakGemm peak, device.measure_peak_gemm());
  auto best = static_cast<float>(peak.gflops);
  RETURN_IF_ERROR(world_values.all_reduce(&best, 1, comm::DType::kF32, comm::ReduceOp::kMax));
  if (world.size() > 1) peak.source += fmt::format(", best of {} ranks", world.size());
  peak.gflops = best;
  return peak;
}

// The rate this rank's core evaluates the GeLU's tanh, measured once the world is up (right after
// the peak's probe, which every rank starts together unless --peak-flops skips it) and recorded
// for `recommend --calibrate`, which costs the activation at the best rank's rate
// (analyzers/compute_cost.h). Nothing on a GPU.
void record_special_function_rate(Device& device, profiler::RankTracer* tracer) {
  if (tracer == nullptr) return;
  const std::optional<double> rate = device.measure_special_function_rate();
  if (!rate) return;
  tracer->emit(profiler::StatEvent{
      std::string(profiler::kSpecialFunctionRateStat), tracer->rank(), std::llround(*rate),
      profiler::StatSeverity::kInfo,
      "evaluations per second of the GeLU's tanh on this rank's core, forward and backward, "
      "measured at start"});
}

// The FLOP/s this rank's GEMMs achieved over the run's steps, recorded for `recommend
// --calibrate`, which costs the GEMMs at it where the runs cannot tell the GEMMs' rate from the
// memory-bound work's (analyzers/calibration.h): a block's slices hold both.
void record_gemm_rate(const RunSummary& summary, profiler::RankTracer* tracer) {
  const double rate = summary.gemm_flops_per_second();
  if (tracer == nullptr || rate <= 0) return;
  tracer->emit(profiler::StatEvent{
      std::string(profiler::kGemmRateStat), tracer->rank(), std::llround(rate),
      profiler::StatSeverity::kInfo,
      "FLOP/s this rank's GEMMs (linear layers and LM head) achieved over the run's steps"});
}

// What the run is, before it starts: the model, its layout and device, and the FLOPs a step
// needs against the peak a rank can do (--peak-flops, or measured by the device).
StatusOr<RunSummary> start_summary(const WorkloadConfig& config, Device& device, comm::Comm& world,
                                   comm::HostValueCollectives& world_values, int64_t local_params) {
  const int world_size = world.size();
  RunSummary summary;
  summary.workload = describe_model(config, local_params);
  summary.layout = describe_layout(config.resolved);
  summary.device = device.name();
  summary.precision = precision_name(config.precision);
  summary.world = world_size;
  const memory::ModelConfig model = memory::workload_model_config(config.kind, config.model);
  summary.tokens_per_step = config.resolved.global_batch * model.sample_seq();
  summary.model_flops_per_step = model_flops_per_step(config);
  if (config.peak_flops) {
    summary.peak_flops_per_rank = *config.peak_flops;
    summary.peak_source = "--peak-flops";
  } else {
    ASSIGN_OR_RETURN(Device::PeakGemm peak, measure_peak(device, world, world_values));
    summary.peak_flops_per_rank = peak.gflops * 1e9;
    summary.peak_source = peak.source;
  }
  return summary;
}

// The device's own view of its memory at a step's end, beside the tracked categories (which count
// only partrain's buffers): cudaMemGetInfo on a GPU, so other processes' and the CUDA context's
// use shows too. Devices without memory of their own report nothing.
void sample_device_memory(const Device& device, profiler::RankTracer& tracer) {
  StatusOr<Device::MemoryInfo> info = device.memory_info();
  if (!info.is_ok()) return;
  const int64_t now = tracer.timeline_ns(monotonic_ns());
  tracer.emit(profiler::CounterSample{tracer.rank(), "device.memory_used_bytes", now,
                                      static_cast<double>(info->total_bytes - info->free_bytes)});
  tracer.emit(profiler::CounterSample{tracer.rank(), "device.memory_total_bytes", now,
                                      static_cast<double>(info->total_bytes)});
}

// A step's routing into the run's, block by block (every step routes the same blocks).
void add_expert_load(const std::vector<ExpertLayerLoad>& loads, int step, RunSummary& summary) {
  summary.expert_load.resize(loads.size());
  for (size_t i = 0; i < loads.size(); ++i) accumulate_load(summary.expert_load[i], loads[i], step);
}

// The configured steps, each timed, traced and counted into `summary` (its loss, its time and
// DDP's overlap in it).

Status train(const WorkloadConfig& config, Device& device, TrainingStep& training_step,
             DdpOverlap& overlap, profiler::RankTracer* tracer, RunSummary& summary) {
  // Tokens this rank trains on per step: its dp replica's share of the global batch.
  const int64_t rank_tokens = summary.tokens_per_step / config.resolved.layout.dp;
  for (int step = 0; step < config.steps; ++step) {
    if (tracer != nullptr) tracer->set_step(step);
    const int64_t start = monotonic_ns();
    std::optional<profiler::TraceScope> step_scope;
    step_scope.emplace(tracer, "step", profiler::SliceCategory::kStep);
    ASSIGN_OR_RETURN(float loss, training_step.run(step));
    summary.losses.push_back(loss);
    add_expert_load(training_step.expert_load(), step, summary);
    step_scope.reset();
    const int64_t end = monotonic_ns();
    summary.step_seconds.push_back(static_cast<double>(end - start) / 1e9);
    overlap.count_step(start, training_step.backward_end_ns(), summary);
    if (tracer != nullptr) {
      tracer->step_done(step, start, end, loss, rank_tokens);
      // The routing is recorded outside the step's time, as its end is.
      for (const ExpertLayerLoad& load : training_step.expert_load()) {
        tracer->expert_load(step, load.layer, load.tokens_per_expert, load.dropped_tokens,
                            load.aux_loss);
      }
      sample_device_memory(device, *tracer);
    }
    log::debug("step {}: loss {:.6f}", step, loss);
  }
  if (tracer != nullptr) tracer->set_step(-1);
  return Status::ok();
}

// Every rank's memory peaks, gathered so the summary lists them all.
StatusOr<std::vector<MemoryStats>> gather_memory(const MemoryStats& mine,
                                                 comm::HostValueCollectives& world_values,
                                                 int world_size) {
  constexpr size_t kFields = memory::kAllCategories.size() + 1;
  std::vector<int64_t> local(kFields), all(kFields * static_cast<size_t>(world_size));
  for (size_t c = 0; c < memory::kAllCategories.size(); ++c) {
    local[c] = static_cast<int64_t>(mine.peak.bytes[c]);
  }
  local[kFields - 1] = static_cast<int64_t>(mine.total_peak);
  RETURN_IF_ERROR(world_values.all_gather(local.data(), all.data(), kFields, comm::DType::kI64));
  std::vector<MemoryStats> stats(static_cast<size_t>(world_size));
  for (size_t r = 0; r < stats.size(); ++r) {
    for (size_t c = 0; c < memory::kAllCategories.size(); ++c) {
      stats[r].peak.bytes[c] = static_cast<uint64_t>(all[r * kFields + c]);
    }
    stats[r].total_peak = static_cast<uint64_t>(all[r * kFields + kFields - 1]);
  }
  return stats;
}

// What the run ended with, the same on every rank: the GEMMs' share of the steps, the final
// parameter norm, and every rank's memory peaks and step-time median and p90 (so a slow rank
// shows in the summary).
Status finish_summary(Device& device, comm::Comm& world, comm::HostValueCollectives& world_values,
                      const TrainingRank& rank, const Device::GemmTotals& gemm_before_steps,
                      RunSummary& summary) {
  if (rank.mesh.dp().size() > 1) summary.ddp_buckets = static_cast<int>(rank.dp->bucket_count());
  const Device::GemmTotals gemm = device.gemm_totals();
  summary.gemm_seconds = gemm.seconds - gemm_before_steps.seconds;
  summary.gemm_flops = gemm.flops - gemm_before_steps.flops;
  ASSIGN_OR_RETURN(double param_sq, rank.dp->param_norm_squared());
  summary.final_params_l2 = std::sqrt(param_sq);
  ASSIGN_OR_RETURN(summary.memory,
                   gather_memory(device.allocator().stats(), world_values, world.size()));
  float mine[2] = {static_cast<float>(summary.step_time_median()),
                   static_cast<float>(summary.step_time_p90())};
  std::vector<float> all(2 * static_cast<size_t>(world.size()));
  RETURN_IF_ERROR(world_values.all_gather(mine, all.data(), 2, comm::DType::kF32));
  for (size_t r = 0; r < static_cast<size_t>(world.size()); ++r) {
    summary.rank_step_seconds.emplace_back(all[2 * r], all[2 * r + 1]);
  }
  settle_peak(summary);
  return Status::ok();
}

}  // namespace

double model_flops_per_step(const WorkloadConfig& config) {
  const memory::ModelConfig model = memory::workload_model_config(config.kind, config.model);
  return memory::training_flops(model, static_cast<double>(config.resolved.global_batch),
                                static_cast<double>(model.sample_seq()),
                                memory::Recompute::kNone);
}

StatusOr<RunSummary> run_workload(const WorkloadConfig& config, Device& device, comm::Comm& world,
                                  const profiler::FlightRecorder* recorder,
                                  profiler::RankTracer* tracer) {
  if (world.size() != config.world.ranks) {
    return invalid_argument("the workload was planned for {} ranks but the world has {}",
                            config.world.ranks, world.size());
  }
  trace_memory(device, tracer);
  // The host values every rank shares: the step's loss, the summary's figures.
  comm::HostValueCollectives world_values(device, world);
  ASSIGN_OR_RETURN(std::unique_ptr<TrainingRank> rank,
                   build_training_rank(config, device, world, tracer));
  ASSIGN_OR_RETURN(BatchSource batches, BatchSource::open(config));
  ASSIGN_OR_RETURN(RunSummary summary,
                   start_summary(config, device, world, world_values,
                                 rank->params.numel() + rank->expert_params.numel()));
  record_special_function_rate(device, tracer);
  // The run's GEMM rate counts the steps' GEMMs only, not the peak measurement's.
  const Device::GemmTotals gemm_before_steps = device.gemm_totals();
  TrainingStep training_step(config, device, world, *rank, batches, world_values, tracer);
  DdpOverlap overlap(recorder, rank->mesh.dp());
  RETURN_IF_ERROR(train(config, device, training_step, overlap, tracer, summary));
  RETURN_IF_ERROR(
      finish_summary(device, world, world_values, *rank, gemm_before_steps, summary));
  record_gemm_rate(summary, tracer);
  return summary;
}

}  // namespace partrain::runner
