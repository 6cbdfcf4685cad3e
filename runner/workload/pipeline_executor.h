// Runs one training step of a pipeline-parallel rank: walks the schedule's actions (see
// pipeline_schedule.h for the contract), receiving each input right before the forward or
// backward that needs it, posting sends asynchronously and waiting for them at the end of the
// step. Activations and gradients travel on two communicators of the pipeline group, so their
// streams never mix even when the previous and the next stage are the same rank (pp = 2).
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
  // chunks: this rank's model chunks by model chunk index. activations and gradients: two
  // communicators over the pipeline group (rank i = pipeline stage i). tracer (null: not traced)
  // records each action's forward or backward phase.
  PipelineExecutor(Device& device, std::map<int, ModelChunk*> chunks, comm::Comm& activations,
                   comm::Comm& gradients, std::vector<PipelineAction> actions,
                   const PipelineShape& shape, profiler::RankTracer* tracer)
      : device_(device),
        chunks_(std::move(chunks)),
        activations_(activations),
        gradients_(gradients),
        actions_(std::move(actions)),
        micro_batches_(shape.micro_batches),
        total_chunks_(shape.chunks()),
        tracer_(tracer) {}

  // Runs the step; returns the sum of the last chunk's micro-batch mean losses (0 elsewhere).
  StatusOr<double> run_step(const PipelineStepHooks& hooks);

 private:
  class Step;  // one step's messages, batches and sends in flight

  Device& device_;
  std::map<int, ModelChunk*> chunks_;
  comm::Comm& activations_;
  comm::Comm& gradients_;
  std::vector<PipelineAction> actions_;
  int micro_batches_;
  int total_chunks_;
  profiler::RankTracer* tracer_;
};

}  // namespace partrain::runner
