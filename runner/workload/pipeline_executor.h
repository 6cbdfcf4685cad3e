// Runs one training step of a pipeline-parallel rank: walks the schedule's actions (see
// pipeline_schedule.h for the contract), receiving each input right before the forward or
// backward that needs it, posting sends asynchronously and waiting for them at the end of the
// step. Activations and gradients travel on two communicators of the pipeline group, so their
// streams never mix even when the previous and the next stage are the same rank (pp = 2); two
// adjacent chunks on this rank (DualPipeV's tip) hand them over in place. Under the zero-bubble
// schedules the chunks split their backward and a weight action runs the rest.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "profiler/rank_tracer.h"
#include "runner/comm/comm.h"
#include "runner/device/device.h"
#include "runner/workload/model_chunk.h"
#include "runner/workload/pipeline_schedule.h"

namespace partrain::runner {

struct PipelineStepHooks {
  // Fills micro-batch `mb` (tokens for the first and last chunk, features for the first).
  std::function<Status(int mb, MicroBatch& batch)> fill_batch;
  // Told each parameter unit finished for the step (after its chunk's last backward).
  std::function<void(const std::string& unit)> unit_ready;
};

class PipelineExecutor {
 public:
  // chunks: this rank's model chunks by model chunk index. channels: pipeline_channels(shape)
  // communicators over the pipeline group (rank i = pipeline stage i), indexed by
  // PipelineChannel. tracer (null: not traced) records each action's forward or backward phase.
  PipelineExecutor(Device& device, std::map<int, ModelChunk*> chunks,
                   std::vector<comm::Comm*> channels, std::vector<PipelineAction> actions,
                   const PipelineShape& shape, profiler::RankTracer* tracer)
      : device_(device),
        chunks_(std::move(chunks)),
        channels_(std::move(channels)),
        actions_(std::move(actions)),
        shape_(shape),
        micro_batches_(shape.micro_batches),
        total_chunks_(shape.chunks()),
        tracer_(tracer) {
    if (memory::splits_backward(shape.schedule)) {
      for (auto& [index, chunk] : chunks_) chunk->split_backward();
    }
  }

  // Runs the step; returns the sum of the last chunk's micro-batch mean losses (0 elsewhere).
  StatusOr<double> run_step(const PipelineStepHooks& hooks);

 private:
  class Step;  // one step's messages, batches and sends in flight

  Device& device_;
  std::map<int, ModelChunk*> chunks_;
  std::vector<comm::Comm*> channels_;
  std::vector<PipelineAction> actions_;
  PipelineShape shape_;
  int micro_batches_;
  int total_chunks_;
  profiler::RankTracer* tracer_;
};

}  // namespace partrain::runner
