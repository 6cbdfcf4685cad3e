// Runs a built-in workload on this rank to the end: builds the mesh, the rank's share of the
// model, the data stream and the optimizer, trains for the configured steps, and returns the
// run's summary (identical facts on every rank: losses, norms, every rank's memory peaks).
#pragma once

#include "core/status.h"
#include "profiler/flight/flight_recorder.h"
#include "profiler/rank_tracer.h"
#include "runner/comm/comm.h"
#include "runner/device/device.h"
#include "runner/workload/run_summary.h"
#include "runner/workload/workload_config.h"

namespace partrain::runner {

// Trains on `device` (workload_device.h creates it; the world's communicator works on its
// buffers). `recorder` (may be null) is the world's flight recorder: the summary reports from it
// how many DDP bucket all-reduces of the last step started before that step's backward ended.
// `tracer` (null: not traced) records the steps, phases, ops and memory of the run.
StatusOr<RunSummary> run_workload(const WorkloadConfig& config, Device& device, comm::Comm& world,
                                  const profiler::FlightRecorder* recorder = nullptr,
                                  profiler::RankTracer* tracer = nullptr);

// Model FLOPs of one training step, as memory/flops.h counts them for the built-in model
// (forward + backward; no recomputation, which the summary's MFU does not count).
double model_flops_per_step(const WorkloadConfig& config);

}  // namespace partrain::runner
