#include "runner/workload/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

#include "core/clock.h"
#include "core/log.h"
#include "profiler/trace_scope.h"
#include "runner/comm/host_value_collectives.h"
#include "runner/fault/fault_spec.h"
#include "runner/fault/process_fault.h"
#include "runner/workload/batch_source.h"
#include "runner/workload/data_parallel.h"
#include "runner/workload/mesh.h"
#include "runner/workload/model_builder.h"
#include "runner/workload/pipeline_executor.h"

namespace partrain::runner {
namespace {

constexpr float kMaxGradNorm = 1.0f;  // GPT-2 / Megatron's clipping threshold

std::string describe_model(const WorkloadConfig& config, int64_t local_params) {
  const WorkloadModel& m = config.model;
  if (config.kind == WorkloadKind::kMlp) {
    return fmt::format("mlp ({} layers, hidden {}; {} parameters on rank 0)", m.layers, m.hidden,
                       local_params);
  }
  return fmt::format("gpt ({} layers, hidden {}, {} heads, seq {}, vocab {}, ffn {}; {} "
                     "parameters on rank 0)",
                     m.layers, m.hidden, m.heads, m.seq, m.vocab, m.ffn, local_params);
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

// The --inject faults that act at the start of a step, before its compute: crash, exit, hang
// and stop end or stop the rank here; oom caps the tracked memory at what is in use, so the
// step's first new buffer fails with "out of memory allocating ... of <category>".
void inject_step_faults(const std::vector<fault::FaultSpec>& faults, int rank, int64_t step,
                        TrackedAllocator& allocator, profiler::RankTracer* tracer) {
  using fault::FaultKind;
  if (const fault::FaultSpec* f = fault::fault_at(faults, FaultKind::kCrash, rank, step)) {
    fault::crash_rank(*f, rank, step, tracer);
  }
  if (const fault::FaultSpec* f = fault::fault_at(faults, FaultKind::kExit, rank, step)) {
    fault::exit_rank(*f, rank, step, tracer);
  }
  if (const fault::FaultSpec* f = fault::fault_at(faults, FaultKind::kHang, rank, step)) {
    fault::hang_rank(*f, rank, step, tracer);
  }
  if (const fault::FaultSpec* f = fault::fault_at(faults, FaultKind::kStop, rank, step)) {
    fault::stop_rank(*f, rank, step, tracer);
  }
  if (const fault::FaultSpec* f = fault::fault_at(faults, FaultKind::kOom, rank, step)) {
    allocator.set_limit_bytes(allocator.stats().total_current,
                              fmt::format("--inject {} at step {}", fault::fault_spec_text(*f),
                                          step));
  }
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

}  // namespace

double gpt_flops_per_step(const WorkloadModel& m, int64_t global_batch) {
  const double h = m.hidden, s = m.seq, f = m.ffn, v = m.vocab;
  // Per token, forward: QKV 2*3h^2, attention scores and values 2*2sh, projection 2h^2, MLP
  // 2*2hf per layer, LM head 2hV; backward twice the forward.
  const double per_layer = 2 * 3 * h * h + 2 * 2 * s * h + 2 * h * h + 2 * 2 * h * f;
  const double forward = m.layers * per_layer + 2 * h * v;
  return 3 * forward * s * static_cast<double>(global_batch);
}

StatusOr<RunSummary> run_workload(const WorkloadConfig& config, Device& device, comm::Comm& world,
                                  const comm::FlightRecorder* recorder,
                                  profiler::RankTracer* tracer) {
  const ResolvedLayout& resolved = config.resolved;
  const TrainingLayout& layout = resolved.layout;
  if (world.size() != config.world.ranks) {
    return invalid_argument("the workload was planned for {} ranks but the world has {}",
                            config.world.ranks, world.size());
  }
  if (tracer != nullptr) {
    // Every change of tracked memory, by category: the trace's memory counters.
    device.allocator().set_observer([tracer](const MemoryEvent& e) {
      tracer->memory(static_cast<uint8_t>(e.category), e.timestamp_ns,
                     static_cast<int64_t>(e.category_bytes));
    });
  }
  ASSIGN_OR_RETURN(Mesh mesh, Mesh::build(world, resolved));
  const MeshCoords coords = mesh.coords();
  // The host values every rank shares: the step's loss, the summary's figures.
  comm::HostValueCollectives world_values(device, world);
  TensorParallel tp(mesh.tp(), layout.sp, device);
  const TpShard shard{coords.tp, layout.tp};
  const WorkloadModel& m = config.model;

  std::vector<ChunkPlacement> placements = owned_chunks(resolved, coords.pp);
  ParamLayout params_layout = build_param_layout(config, placements, shard);
  ASSIGN_OR_RETURN(std::unique_ptr<DataParallel> dp,
                   DataParallel::create(device, params_layout, resolved, config.bucket_bytes, mesh,
                                        tp, config.seed, m.layers,
                                        state_storage(config.precision), tracer));
  std::vector<std::unique_ptr<ModelChunk>> chunks = build_chunks(
      config, placements, device, tp, params_layout, *dp, tracer);
  ModelChunk& chunk = *chunks.front();
  // Pipelines: activations and gradients on channels of their own, and the tied-embedding
  // group of the first and last stage.
  std::unique_ptr<comm::Comm> pp_activations, pp_gradients, embedding_group;
  std::unique_ptr<PipelineExecutor> pipeline;
  if (layout.pp > 1) {
    ASSIGN_OR_RETURN(pp_activations, mesh.pp().split(0, coords.pp));
    ASSIGN_OR_RETURN(pp_gradients, mesh.pp().split(0, coords.pp));
    const bool tied_stage = coords.pp == 0 || coords.pp == layout.pp - 1;
    ASSIGN_OR_RETURN(embedding_group,
                     mesh.pp().split(config.kind == WorkloadKind::kGpt && tied_stage ? 0
                                                                                     : comm::kNoColor,
                                     coords.pp));
    dp->set_tied_embedding_group(embedding_group.get());
    const PipelineShape shape = pipeline_shape(resolved);
    ASSIGN_OR_RETURN(std::vector<PipelineAction> actions, pipeline_actions(shape, coords.pp));
    std::map<int, ModelChunk*> by_index;
    for (size_t i = 0; i < chunks.size(); ++i) by_index[placements[i].chunk] = chunks[i].get();
    pipeline = std::make_unique<PipelineExecutor>(device, by_index, *pp_activations,
                                                  *pp_gradients, std::move(actions), shape,
                                                  tracer);
  }
  ASSIGN_OR_RETURN(BatchSource batches, BatchSource::open(config));

  RunSummary summary;
  summary.workload = describe_model(config, params_layout.numel());
  summary.layout = describe_layout(resolved);
  summary.device = device.name();
  summary.precision = precision_name(config.precision);
  summary.world = world.size();
  const bool gpt = config.kind == WorkloadKind::kGpt;
  summary.tokens_per_step = resolved.global_batch * (gpt ? m.seq : 1);
  summary.model_flops_per_step =
      gpt ? gpt_flops_per_step(m, resolved.global_batch)
          : 6.0 * static_cast<double>(resolved.global_batch) * static_cast<double>(m.hidden) * m.hidden * m.layers;
  if (config.peak_flops) {
    summary.peak_flops_per_rank = *config.peak_flops;
    summary.peak_source = "--peak-flops";
  } else {
    ASSIGN_OR_RETURN(Device::PeakGemm peak, device.measure_peak_gemm());
    summary.peak_flops_per_rank = peak.gflops * 1e9;
    summary.peak_source = peak.source;
  }
  // The run's GEMM rate counts the steps' GEMMs only, not the peak measurement's.
  const Device::GemmTotals gemm_before_steps = device.gemm_totals();

  ops::AdamWConfig adam;
  adam.learning_rate = static_cast<float>(config.lr);
  const int64_t B = layout.micro_batch;
  const int64_t G = resolved.global_batch;
  MicroBatch batch;
  int64_t last_grad_ns = 0;
  // The flight recorder's entries from here on are the next step's (its ring holds the last
  // 2000 only, so each step's are counted as the step ends).
  uint64_t recorded_before = recorder != nullptr ? recorder->total_recorded() : 0;
  // Tokens this rank trains on per step: its dp replica's share of the global batch.
  const int64_t rank_tokens = (G / layout.dp) * (config.kind == WorkloadKind::kGpt ? m.seq : 1);
  for (int step = 0; step < config.steps; ++step) {
    if (tracer != nullptr) tracer->set_step(step);
    const int64_t start = monotonic_ns();
    std::optional<profiler::TraceScope> step_scope;
    step_scope.emplace(tracer, "step", profiler::SliceCategory::kStep);
    // --inject slow: this rank sleeps before its compute, a straggler the analyzers should find.
    if (const int64_t delay_ms = fault::slow_delay_ms(config.faults, world.rank(), step);
        delay_ms > 0) {
      profiler::TraceScope delay(tracer, "injected_delay", profiler::SliceCategory::kSync);
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    }
    inject_step_faults(config.faults, world.rank(), step, device.allocator(), tracer);
    dp->zero_grads();
    double loss = 0;
    // The moment the last gradient is produced ends backward: a bucket launched after it
    // (always the one holding the first layers) did not overlap anything.
    auto unit_ready = [&](const std::string& unit) {
      last_grad_ns = monotonic_ns();
      dp->unit_ready(unit);
    };
    if (pipeline) {
      PipelineStepHooks hooks;
      hooks.fill_batch = [&](int mb, MicroBatch& b) {
        return batches.fill(device, step, coords.dp, mb, b);
      };
      hooks.unit_ready = unit_ready;
      ASSIGN_OR_RETURN(double loss_sum, pipeline->run_step(hooks));
      loss = loss_sum * static_cast<double>(B) / static_cast<double>(G);
    }
    for (int mb = 0; !pipeline && mb < resolved.micro_batches; ++mb) {
      RETURN_IF_ERROR(batches.fill(device, step, coords.dp, mb, batch));
      float mb_loss = 0;
      {
        profiler::TraceScope phase(tracer, "forward", profiler::SliceCategory::kPhase, -1, mb);
        RETURN_IF_ERROR(chunk.forward(mb, batch, nullptr, nullptr, &mb_loss));
      }
      loss += static_cast<double>(mb_loss) * static_cast<double>(B) / static_cast<double>(G);
      const bool last = mb + 1 == resolved.micro_batches;
      profiler::TraceScope phase(tracer, "backward", profiler::SliceCategory::kPhase, -1, mb);
      RETURN_IF_ERROR(chunk.backward(mb, batch, nullptr, nullptr,
                                     last ? unit_ready
                                          : std::function<void(const std::string&)>()));
    }
    {
      profiler::TraceScope phase(tracer, "reduce_gradients", profiler::SliceCategory::kPhase);
      RETURN_IF_ERROR(dp->reduce_gradients());
    }
    {
      profiler::TraceScope phase(tracer, "optimizer", profiler::SliceCategory::kPhase);
      ASSIGN_OR_RETURN(double grad_sq, dp->grad_norm_squared());
      const double grad_norm = std::sqrt(grad_sq);
      const float clip = grad_norm > kMaxGradNorm
                             ? static_cast<float>(kMaxGradNorm / (grad_norm + 1e-6))
                             : 1.0f;
      RETURN_IF_ERROR(dp->update(adam, step + 1, clip));
      log::debug("step {}: grad norm {:.4f}", step, grad_norm);
    }
    // The step's loss over the global batch: each dp rank's share, counted once per tp group
    // (only the last pipeline stage computes it).
    auto reported = static_cast<float>(coords.tp == 0 ? loss : 0.0);
    if (const fault::FaultSpec* desync =
            fault::fault_at(config.faults, fault::FaultKind::kDesync, world.rank(), step)) {
      // --inject desync: a different collective at the seq where every other rank all-reduces
      // the loss; the watchdog or Gloo's own error ends the run, the diagnosis names this rank.
      log::warn("rank {}: --inject {}: issuing all_gather instead of the loss all_reduce at step "
                "{}",
                world.rank(), fault::fault_spec_text(*desync), step);
      std::vector<float> gathered(static_cast<size_t>(world.size()));
      RETURN_IF_ERROR(world_values.all_gather(&reported, gathered.data(), 1, comm::DType::kF32));
    } else {
      RETURN_IF_ERROR(
          world_values.all_reduce(&reported, 1, comm::DType::kF32, comm::ReduceOp::kSum));
    }
    // A device whose ops can fail (a CUDA kernel, a pointer outside the isolated device's
    // buffers) keeps the first failure; the step ends with it rather than train on garbage.
    RETURN_IF_ERROR(device.status());
    summary.losses.push_back(reported);
    step_scope.reset();
    const int64_t end = monotonic_ns();
    summary.step_seconds.push_back(static_cast<double>(end - start) / 1e9);
    // DDP's overlap, counted once the step is timed: its bucket all-reduces, and those started
    // before its backward ended.
    if (recorder != nullptr) {
      if (mesh.dp().size() > 1) {
        for (const profiler::CollectiveEvent& event : recorder->since(recorded_before)) {
          if (event.comm_id != mesh.dp().id() || event.op != "all_reduce") continue;
          ++summary.ddp_bucket_all_reduces;
          if (event.start_ns >= start && event.start_ns < last_grad_ns) {
            ++summary.ddp_buckets_started_in_backward;
          }
        }
      }
      recorded_before = recorder->total_recorded();
    }
    if (tracer != nullptr) {
      tracer->step_done(step, start, end, reported, rank_tokens);
      sample_device_memory(device, *tracer);
    }
    log::debug("step {}: loss {:.6f}", step, reported);
  }
  if (tracer != nullptr) tracer->set_step(-1);

  if (mesh.dp().size() > 1) summary.ddp_buckets = static_cast<int>(dp->bucket_count());
  const Device::GemmTotals gemm = device.gemm_totals();
  summary.gemm_seconds = gemm.seconds - gemm_before_steps.seconds;
  summary.gemm_flops = gemm.flops - gemm_before_steps.flops;
  ASSIGN_OR_RETURN(double param_sq, dp->param_norm_squared());
  summary.final_params_l2 = std::sqrt(param_sq);
  ASSIGN_OR_RETURN(summary.memory,
                   gather_memory(device.allocator().stats(), world_values, world.size()));
  // Every rank's step-time median and p90, so a slow rank shows in the summary.
  float mine[2] = {static_cast<float>(summary.step_time_median()),
                   static_cast<float>(summary.step_time_p90())};
  std::vector<float> all(2 * static_cast<size_t>(world.size()));
  RETURN_IF_ERROR(world_values.all_gather(mine, all.data(), 2, comm::DType::kF32));
  for (size_t r = 0; r < static_cast<size_t>(world.size()); ++r) {
    summary.rank_step_seconds.emplace_back(all[2 * r], all[2 * r + 1]);
  }
  return summary;
}

}  // namespace partrain::runner
