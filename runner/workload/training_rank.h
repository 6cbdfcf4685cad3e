// What one rank trains with, wired for the run's layout: its place in the device mesh and the
// groups it belongs to, its share of the model (the chunks it owns and their parameters), the
// optimizer over those parameters (DataParallel: DDP or ZeRO), and under pp > 1 the pipeline
// executor with the channels between stages.
#pragma once

#include <memory>
#include <vector>

#include "core/status.h"
#include "profiler/rank_tracer.h"
#include "runner/comm/comm.h"
#include "runner/device/device.h"
#include "runner/workload/data_parallel.h"
#include "runner/workload/gpt_chunk.h"
#include "runner/workload/mesh.h"
#include "runner/workload/model_chunk.h"
#include "runner/workload/param_layout.h"
#include "runner/workload/pipeline_executor.h"
#include "runner/workload/tensor_parallel.h"
#include "runner/workload/workload_config.h"

namespace partrain::runner {

// Its members refer to each other (the chunks to the optimizer, the optimizer to the mesh), so it
// stays where it was built. Members are destroyed in reverse order: the pipeline before the
// chunks, the chunks before the optimizer, all of them before the mesh.
struct TrainingRank {
  TrainingRank(Mesh built, const TrainingLayout& layout, Device& device)
      : mesh(std::move(built)), coords(mesh.coords()), tp(mesh.tp(), layout.sp, device) {}
  TrainingRank(const TrainingRank&) = delete;
  TrainingRank& operator=(const TrainingRank&) = delete;

  Mesh mesh;
  MeshCoords coords;
  TensorParallel tp;
  std::vector<ChunkPlacement> placements;  // the model chunks this rank owns, in order
  ParamLayout params;                      // their parameters, sharded for this tp rank
  std::unique_ptr<DataParallel> dp;
  // A mixture of experts: this rank's routed experts (its ep share, sharded for its tp rank) and
  // their states over the expert-data group, which `dp` drives (attach_experts); the chunks'
  // wiring to them. Empty for a dense model.
  ParamLayout expert_params;
  std::unique_ptr<DataParallel> expert_dp;
  ExpertWiring experts;
  std::vector<std::unique_ptr<ModelChunk>> chunks;  // as placements
  // pp > 1: activations and gradients on channels of their own, the tied-embedding group of the
  // first and last stage, and the executor of the schedule; all null when pp = 1.
  // The pipeline's channels (PipelineChannel: activations, gradients, and DualPipeV's ways back).
  std::vector<std::unique_ptr<comm::Comm>> pp_channels;
  std::unique_ptr<comm::Comm> embedding_group;
  std::unique_ptr<PipelineExecutor> pipeline;
};

// Builds this rank's part of the run of `config` over `world` (every rank calls it: the mesh's
// groups are collective splits); `tracer` (null: not traced) goes to the chunks, the optimizer
// and the pipeline executor.
StatusOr<std::unique_ptr<TrainingRank>> build_training_rank(const WorkloadConfig& config,
                                                            Device& device, comm::Comm& world,
                                                            profiler::RankTracer* tracer);

}  // namespace partrain::runner
