#include "runner/workload/trainer.h"

#include <fmt/format.h>

#include <cmath>

#include "core/clock.h"
#include "core/log.h"
#include "runner/device/cpu_device.h"
#include "runner/workload/data_parallel.h"
#include "runner/workload/gpt_chunk.h"
#include "runner/workload/mesh.h"
#include "runner/workload/token_source.h"

namespace partrain::runner {
namespace {

using memory::Category;

constexpr float kMaxGradNorm = 1.0f;  // GPT-2 / Megatron's clipping threshold

Status check_supported(const WorkloadConfig& config) {
  const ResolvedLayout& l = config.resolved;
  if (config.kind != WorkloadKind::kGpt) {
    return invalid_argument("--workload mlp is not implemented yet (gpt is)");
  }
  if (l.pp > 1) return invalid_argument("--pp > 1 is not implemented yet: pipeline schedules come next");
  if (l.zero > 1) {
    return invalid_argument("--zero {} is not implemented yet: DDP (--zero 0) and ZeRO-1 are",
                            l.zero);
  }
  if (config.device == "cuda") {
    return invalid_argument("--device cuda is not implemented yet: the CUDA device is its own "
                            "issue; use --device cpu");
  }
  if (config.precision != Precision::kFp32) {
    return invalid_argument("--precision bf16 needs the CUDA device; the CPU device is fp32");
  }
  return Status::ok();
}

// The model's units in forward order, sharded for this tp rank (pp = 1: one chunk).
ParamLayout build_layout(const LayoutModel& model, TpShard tp) {
  ParamLayout layout;
  layout.add_unit("embedding", 0, gpt_embedding_specs(model), tp);
  for (int layer = 0; layer < model.layers; ++layer) {
    layout.add_unit(fmt::format("layer{}", layer), 0, gpt_block_specs(model, layer), tp);
  }
  layout.add_unit("final", 0, gpt_final_specs(model), tp);
  return layout;
}

}  // namespace

double gpt_flops_per_step(const LayoutModel& m, int64_t global_batch) {
  const double h = m.hidden, s = m.seq, f = m.ffn, v = m.vocab;
  // Per token, forward: QKV 2*3h^2, attention scores and values 2*2sh, projection 2h^2, MLP
  // 2*2hf per layer, LM head 2hV; backward twice the forward.
  const double per_layer = 2 * 3 * h * h + 2 * 2 * s * h + 2 * h * h + 2 * 2 * h * f;
  const double forward = m.layers * per_layer + 2 * h * v;
  return 3 * forward * s * static_cast<double>(global_batch);
}

StatusOr<RunSummary> run_workload(const WorkloadConfig& config, comm::Comm& world,
                                  const comm::FlightRecorder* recorder) {
  RETURN_IF_ERROR(check_supported(config));
  const ResolvedLayout& layout = config.resolved;
  if (world.size() != layout.world) {
    return invalid_argument("the workload was planned for {} ranks but the world has {}",
                            layout.world, world.size());
  }
  CpuDeviceOptions device_options;
  device_options.blas_threads = config.blas_threads;
  CpuDevice device(device_options);
  ASSIGN_OR_RETURN(Mesh mesh, Mesh::build(world, layout));
  const MeshCoords coords = mesh.coords();
  TensorParallel tp(mesh.tp(), layout.sp);
  const TpShard shard{coords.tp, layout.tp};
  const LayoutModel& m = config.model;
  GptShape shape{layout.micro_batch, m.seq, m.hidden, m.heads, m.ffn, m.vocab};

  ParamLayout params_layout = build_layout(m, shard);
  const int64_t numel = params_layout.numel();
  TrackedAllocator& memory = device.allocator();
  ASSIGN_OR_RETURN(std::unique_ptr<DataParallel> dp,
                   DataParallel::create(device, params_layout, layout, mesh, tp, config.seed,
                                        m.layers));

  ChunkPlacement placement{0, true, true, {}};
  for (int layer = 0; layer < m.layers; ++layer) placement.layers.push_back(layer);
  GptChunk chunk(device, tp, shape, config.recompute, params_layout, dp->params(), dp->grads(),
                 placement);

  std::unique_ptr<TokenSource> tokens;
  if (config.data_path.empty()) {
    tokens = make_synthetic_tokens(config.seed, m.vocab);
  } else {
    ASSIGN_OR_RETURN(tokens, open_token_file(config.data_path, m.vocab, m.seq));
  }

  RunSummary summary;
  summary.workload = fmt::format("gpt ({} layers, hidden {}, {} heads, seq {}, vocab {}, ffn {}; "
                                 "{} parameters)",
                                 m.layers, m.hidden, m.heads, m.seq, m.vocab, m.ffn, numel);
  summary.layout = describe_layout(layout);
  summary.device = device.name();
  summary.world = world.size();
  summary.tokens_per_step = static_cast<int64_t>(layout.global_batch) * m.seq;
  summary.model_flops_per_step = gpt_flops_per_step(m, layout.global_batch);
  if (config.peak_flops) {
    summary.peak_flops_per_rank = *config.peak_flops;
    summary.peak_source = "--peak-flops";
  } else {
    // On a device of its own, so the measurement's buffers stay out of the run's memory peaks.
    CpuDevice probe(device_options);
    ASSIGN_OR_RETURN(double gflops, probe.measure_sgemm_gflops(512, 3));
    summary.peak_flops_per_rank = gflops * 1e9;
    summary.peak_source = "measured sgemm, 512^3";
  }

  ops::AdamWConfig adam;
  adam.learning_rate = static_cast<float>(config.lr);
  const int64_t B = layout.micro_batch;
  const int64_t T = m.seq;
  const int64_t G = layout.global_batch;
  MicroBatch batch;
  batch.tokens.resize(static_cast<size_t>(B * T));
  batch.targets.resize(static_cast<size_t>(B * T));
  batch.dloss_scale = 1.0f / static_cast<float>(G * T);
  std::vector<std::pair<int64_t, int64_t>> backward_windows;  // (step start, backward end)
  int64_t last_grad_ns = 0;
  for (int step = 0; step < config.steps; ++step) {
    const int64_t start = monotonic_ns();
    dp->zero_grads();
    double loss = 0;
    for (int mb = 0; mb < layout.micro_batches; ++mb) {
      // This dp rank's samples of the global batch: a contiguous block, micro-batch by
      // micro-batch, so any layout trains on the same samples.
      const int64_t first = static_cast<int64_t>(step) * G +
                            static_cast<int64_t>(coords.dp) * layout.micro_batches * B + mb * B;
      for (int64_t b = 0; b < B; ++b) {
        tokens->sample(static_cast<uint64_t>(first + b), static_cast<int>(T),
                       batch.tokens.data() + b * T, batch.targets.data() + b * T);
      }
      float mb_loss = 0;
      RETURN_IF_ERROR(chunk.forward(mb, batch, nullptr, nullptr, &mb_loss));
      loss += static_cast<double>(mb_loss) * static_cast<double>(B) / static_cast<double>(G);
      const bool last = mb + 1 == layout.micro_batches;
      // The moment the last gradient is produced ends backward: a bucket launched after it
      // (always the one holding the embedding) did not overlap anything.
      RETURN_IF_ERROR(chunk.backward(mb, batch, nullptr, nullptr,
                                     last ? [&](const std::string& unit) {
                                       last_grad_ns = monotonic_ns();
                                       dp->unit_ready(unit);
                                     }
                                          : std::function<void(const std::string&)>()));
    }
    backward_windows.emplace_back(start, last_grad_ns);
    RETURN_IF_ERROR(dp->reduce_gradients());
    ASSIGN_OR_RETURN(double grad_sq, dp->grad_norm_squared());
    const double grad_norm = std::sqrt(grad_sq);
    const float clip = grad_norm > kMaxGradNorm
                           ? static_cast<float>(kMaxGradNorm / (grad_norm + 1e-6))
                           : 1.0f;
    RETURN_IF_ERROR(dp->update(adam, step + 1, clip));
    // The step's loss over the global batch: each dp rank's share, counted once per tp group.
    double reported = coords.tp == 0 ? loss : 0.0;
    float reported_f = static_cast<float>(reported);
    RETURN_IF_ERROR(world.all_reduce(&reported_f, &reported_f, 1, comm::DType::kF32,
                                     comm::ReduceOp::kSum));
    summary.losses.push_back(reported_f);
    summary.step_seconds.push_back(static_cast<double>(monotonic_ns() - start) / 1e9);
    log::debug("step {}: loss {:.6f}, grad norm {:.4f}", step, reported_f, grad_norm);
  }

  if (mesh.dp().size() > 1) {
    summary.ddp_buckets = static_cast<int>(dp->bucket_count());
    if (recorder != nullptr) {
      for (const profiler::CollectiveEvent& event : recorder->snapshot()) {
        if (event.comm_id != mesh.dp().id() || event.op != "all_reduce") continue;
        ++summary.ddp_bucket_all_reduces;
        for (const auto& [step_start, backward_end] : backward_windows) {
          if (event.start_ns >= step_start && event.start_ns < backward_end) {
            ++summary.ddp_buckets_started_in_backward;
          }
        }
      }
    }
  }
  ASSIGN_OR_RETURN(double param_sq, dp->param_norm_squared());
  summary.final_params_l2 = std::sqrt(param_sq);
  // Every rank's memory peaks, gathered so the summary lists them all.
  constexpr size_t kFields = memory::kAllCategories.size() + 1;
  MemoryStats mine = memory.stats();
  std::vector<int64_t> local(kFields), all(kFields * static_cast<size_t>(world.size()));
  for (size_t c = 0; c < memory::kAllCategories.size(); ++c) {
    local[c] = static_cast<int64_t>(mine.peak.bytes[c]);
  }
  local[kFields - 1] = static_cast<int64_t>(mine.total_peak);
  RETURN_IF_ERROR(world.all_gather(local.data(), all.data(), kFields, comm::DType::kI64));
  for (int r = 0; r < world.size(); ++r) {
    MemoryStats stats;
    for (size_t c = 0; c < memory::kAllCategories.size(); ++c) {
      stats.peak.bytes[c] = static_cast<uint64_t>(all[static_cast<size_t>(r) * kFields + c]);
    }
    stats.total_peak = static_cast<uint64_t>(all[static_cast<size_t>(r) * kFields + kFields - 1]);
    summary.memory.push_back(stats);
  }
  return summary;
}

}  // namespace partrain::runner
