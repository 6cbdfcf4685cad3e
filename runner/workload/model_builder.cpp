#include "runner/workload/model_builder.h"

#include <fmt/format.h>

#include "memory/pipeline_order.h"
#include "runner/workload/gpt_chunk.h"
#include "runner/workload/gpt_specs.h"
#include "runner/workload/mlp_chunk.h"
#include "runner/workload/moe_specs.h"

namespace partrain::runner {

std::vector<ChunkPlacement> owned_chunks(const ResolvedLayout& layout, int pp_rank) {
  const TrainingLayout& degrees = layout.layout;
  const int chunks = static_cast<int>(layout.chunk_layers.size());
  std::vector<ChunkPlacement> owned;
  // The schedule places the chunks (memory/pipeline_order.h): Megatron's c mod pp, DualPipeV's V.
  for (int chunk : memory::rank_chunks(degrees.schedule, degrees.pp, degrees.vpp, pp_rank)) {
    ChunkPlacement placement;
    placement.chunk = chunk;
    placement.first = placement.chunk == 0;
    placement.last = placement.chunk == chunks - 1;
    int64_t first_layer = 0;
    for (int c = 0; c < placement.chunk; ++c) first_layer += layout.chunk_layers[static_cast<size_t>(c)];
    for (int64_t l = 0; l < layout.chunk_layers[static_cast<size_t>(placement.chunk)]; ++l) {
      placement.layers.push_back(static_cast<int>(first_layer + l));
    }
    owned.push_back(std::move(placement));
  }
  return owned;
}

ParamLayout build_param_layout(const WorkloadConfig& config,
                               const std::vector<ChunkPlacement>& chunks, TpShard tp) {
  const WorkloadModel& m = config.model;
  ParamLayout layout;
  const bool gpt = config.kind == WorkloadKind::kGpt;
  bool has_embedding = false;
  for (const ChunkPlacement& chunk : chunks) {
    if (gpt && chunk.first) {
      const std::vector<ParamSpec> specs = gpt_embedding_specs(m);
      if (config.resolved.layout.zero >= 2) {
        layout.add_unit("embedding", chunk.chunk, {specs[0]}, tp);
        layout.add_unit("positions", chunk.chunk, {specs[1]}, tp);
      } else {
        layout.add_unit("embedding", chunk.chunk, specs, tp);
      }
      has_embedding = true;
    }
    for (int layer : chunk.layers) {
      layout.add_unit(fmt::format("layer{}", layer), chunk.chunk,
                      gpt ? gpt_block_specs(m, layer) : mlp_layer_specs(m.hidden, layer), tp);
    }
    if (gpt && chunk.last) {
      if (!has_embedding) {
        // The LM head's copy of wte: same spec and id, so it starts equal to the first stage's.
        layout.add_unit("head", chunk.chunk, {gpt_embedding_specs(m).front()}, tp);
      }
      layout.add_unit("final", chunk.chunk, gpt_final_specs(m), tp);
    }
  }
  return layout;
}

ParamLayout build_expert_param_layout(const WorkloadConfig& config,
                                      const std::vector<ChunkPlacement>& chunks, TpShard tp,
                                      int ep_rank) {
  const WorkloadModel& m = config.model;
  ParamLayout layout;
  const auto per_rank = static_cast<int>(m.moe.experts / config.resolved.layout.ep);
  for (const ChunkPlacement& chunk : chunks) {
    for (int layer : chunk.layers) {
      if (!m.moe.is_moe_layer(layer)) continue;
      layout.add_unit(experts_unit_name(layer), chunk.chunk,
                      routed_expert_specs(m, layer, ep_rank * per_rank, per_rank), tp);
    }
  }
  return layout;
}

std::vector<std::unique_ptr<ModelChunk>> build_chunks(
    const WorkloadConfig& config, const std::vector<ChunkPlacement>& chunks, Device& device,
    TensorParallel& tp, const ParamLayout& layout, ParamAccess& access,
    profiler::RankTracer* tracer, const ExpertWiring* experts) {
  const WorkloadModel& m = config.model;
  const int64_t B = config.resolved.layout.micro_batch;
  const ElementType activations = activation_type(config.precision);
  std::vector<std::unique_ptr<ModelChunk>> built;
  for (const ChunkPlacement& chunk : chunks) {
    if (config.kind == WorkloadKind::kGpt) {
      GptShape shape{B, m.seq, m.hidden, m.heads, m.ffn, m.vocab};
      built.push_back(std::make_unique<GptChunk>(device, tp, shape,
                                                 config.resolved.layout.recompute, layout, access,
                                                 chunk, activations, tracer, experts));
    } else {
      built.push_back(std::make_unique<MlpChunk>(device, tp, B, m.hidden,
                                                 config.resolved.layout.recompute, layout, access,
                                                 chunk, activations, tracer));
    }
  }
  return built;
}

}  // namespace partrain::runner
