#include "runner/workload/training_rank.h"

#include <map>
#include <utility>

#include "runner/workload/model_builder.h"
#include "runner/workload/pipeline_schedule.h"

namespace partrain::runner {
namespace {

// Pipelines: activations and gradients on channels of their own, the tied-embedding group of
// the first and last stage, and the executor walking this stage's actions.
Status wire_pipeline(const WorkloadConfig& config, Device& device, TrainingRank& rank,
                     profiler::RankTracer* tracer) {
  const int stage = rank.coords.pp;
  const PipelineShape shape = pipeline_shape(config.resolved);
  // The pp group's splits in the order trace readers name them (profiler/trace_reader/
  // communicator_name.cpp): activations, gradients, embedding, then DualPipeV's ways back.
  std::vector<comm::Comm*> channels;
  auto add_channels = [&](int count) -> Status {
    for (int c = 0; c < count; ++c) {
      ASSIGN_OR_RETURN(std::unique_ptr<comm::Comm> channel, rank.mesh.pp().split(0, stage));
      channels.push_back(channel.get());
      rank.pp_channels.push_back(std::move(channel));
    }
    return Status::ok();
  };
  RETURN_IF_ERROR(add_channels(2));
  // The ranks that hold one end of the model but not the other keep a copy of the tied wte
  // (DualPipeV's rank 0 holds both ends: one wte, no group).
  bool first = false, last = false;
  for (const ChunkPlacement& placement : rank.placements) {
    first = first || placement.first;
    last = last || placement.last;
  }
  const bool tied_stage = first != last;
  ASSIGN_OR_RETURN(rank.embedding_group,
                   rank.mesh.pp().split(config.kind == WorkloadKind::kGpt && tied_stage
                                            ? 0
                                            : comm::kNoColor,
                                        stage));
  rank.dp->set_tied_embedding_group(rank.embedding_group.get());
  RETURN_IF_ERROR(add_channels(pipeline_channels(shape) - 2));
  ASSIGN_OR_RETURN(std::vector<PipelineAction> actions, pipeline_actions(shape, stage));
  std::map<int, ModelChunk*> by_index;
  for (size_t i = 0; i < rank.chunks.size(); ++i) {
    by_index[rank.placements[i].chunk] = rank.chunks[i].get();
  }
  rank.pipeline = std::make_unique<PipelineExecutor>(device, by_index, std::move(channels),
                                                     std::move(actions), shape, tracer);
  return Status::ok();
}

// A mixture of experts: the routed experts' layout and states (over the expert-data group,
// attached to the dense ones), and the chunks' wiring to them.
Status wire_experts(const WorkloadConfig& config, Device& device, TrainingRank& rank,
                    profiler::RankTracer* tracer) {
  const ResolvedLayout& resolved = config.resolved;
  const memory::MixtureOfExperts& moe = config.model.moe;
  const memory::ExpertCoords expert = memory::expert_coords(rank.coords, resolved.layout);
  const TpShard tp{rank.coords.tp, resolved.layout.tp};
  rank.expert_params = build_expert_param_layout(config, rank.placements, tp, expert.ep);
  if (rank.expert_params.units().empty()) return Status::ok();  // a stage of dense blocks only
  ASSIGN_OR_RETURN(
      rank.expert_dp,
      DataParallel::create(
          device, rank.expert_params, resolved, config.bucket_bytes, rank.mesh, rank.tp,
          config.seed, config.model.layers, state_storage(config.precision), tracer,
          // A hybrid (ep 1): the experts shard as the dense weights do.
          memory::zero_replicas(resolved.layout) > 1 ? nullptr : &rank.mesh.expert_data()));
  rank.dp->attach_experts(rank.expert_dp.get());
  rank.experts.layout = &rank.expert_params;
  rank.experts.access = rank.expert_dp.get();
  rank.experts.ep = &rank.mesh.ep();
  rank.experts.data = &rank.mesh.dp();
  rank.experts.options = MoeOptions{
      .hidden = config.model.hidden,
      .experts = static_cast<int>(moe.experts),
      .top_k = static_cast<int>(moe.top_k),
      .expert_ffn = moe.expert_ffn,
      .shared_experts = static_cast<int>(moe.shared_experts),
      .capacity_factor = moe.capacity_factor,
      .aux_weight = config.moe_aux_loss_coeff / static_cast<double>(resolved.micro_batches)};
  return Status::ok();
}

}  // namespace

StatusOr<std::unique_ptr<TrainingRank>> build_training_rank(const WorkloadConfig& config,
                                                            Device& device, comm::Comm& world,
                                                            profiler::RankTracer* tracer) {
  const ResolvedLayout& resolved = config.resolved;
  const bool experts = config.kind == WorkloadKind::kGpt && config.model.moe.enabled();
  ASSIGN_OR_RETURN(Mesh mesh, Mesh::build(world, resolved, experts));
  auto rank = std::make_unique<TrainingRank>(std::move(mesh), resolved.layout, device);
  rank->placements = owned_chunks(resolved, rank->coords.pp);
  rank->params = build_param_layout(config, rank->placements,
                                    TpShard{rank->coords.tp, resolved.layout.tp});
  ASSIGN_OR_RETURN(rank->dp, DataParallel::create(device, rank->params, resolved,
                                                  config.bucket_bytes, rank->mesh, rank->tp,
                                                  config.seed, config.model.layers,
                                                  state_storage(config.precision), tracer));
  if (experts) RETURN_IF_ERROR(wire_experts(config, device, *rank, tracer));
  rank->chunks = build_chunks(config, rank->placements, device, rank->tp, rank->params, *rank->dp,
                              tracer, rank->expert_dp ? &rank->experts : nullptr);
  if (resolved.layout.pp > 1) RETURN_IF_ERROR(wire_pipeline(config, device, *rank, tracer));
  return rank;
}

}  // namespace partrain::runner
