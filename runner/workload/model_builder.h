// Builds a rank's share of a built-in model: which model chunks (pipeline stages, or virtual
// stages under interleaving) it owns, the flat parameter layout of those chunks sharded for its
// tensor-parallel rank, and the chunk objects, which reach parameters through a ParamAccess.
#pragma once

#include <memory>
#include <vector>

#include "profiler/rank_tracer.h"
#include "runner/device/device.h"
#include "runner/workload/gpt_chunk.h"
#include "runner/workload/model_chunk.h"
#include "runner/workload/param_access.h"
#include "runner/workload/param_layout.h"
#include "runner/workload/tensor_parallel.h"
#include "runner/workload/workload_config.h"

namespace partrain::runner {

// The model chunks pipeline rank `pp_rank` owns, in execution order: chunk k * pp + pp_rank for
// k < vpp (Megatron's interleaved assignment; one chunk without interleaving).
std::vector<ChunkPlacement> owned_chunks(const ResolvedLayout& layout, int pp_rank);

// The parameter units of `chunks` in forward order: the embedding before chunk 0's layers, the
// final norm after the last chunk's, and (pp > 1) a copy of the tied embedding on the last
// stage, kept equal to the first stage's by summing their gradients. Under ZeRO-2 and FSDP the
// tied wte is a unit of its own ("embedding", with wpe in "positions"), so the first stage's
// and the last stage's copies shard alike over dp.
ParamLayout build_param_layout(const WorkloadConfig& config,
                               const std::vector<ChunkPlacement>& chunks, TpShard tp);

// A mixture of experts: the routed experts of `chunks`' MoE blocks this expert-parallel rank
// holds (experts [ep_rank E / ep, (ep_rank + 1) E / ep) of each), one unit per block
// ("layer3.experts"), sharded for `tp`. Empty for a dense model.
ParamLayout build_expert_param_layout(const WorkloadConfig& config,
                                      const std::vector<ChunkPlacement>& chunks, TpShard tp,
                                      int ep_rank);

// `experts` (null: a dense model) wires the gpt's MoE blocks.
std::vector<std::unique_ptr<ModelChunk>> build_chunks(const WorkloadConfig& config,
                                                      const std::vector<ChunkPlacement>& chunks,
                                                      Device& device, TensorParallel& tp,
                                                      const ParamLayout& layout,
                                                      ParamAccess& access,
                                                      profiler::RankTracer* tracer,
                                                      const ExpertWiring* experts = nullptr);

}  // namespace partrain::runner
