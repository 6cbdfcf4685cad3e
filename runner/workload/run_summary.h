// The end-of-run summary of a built-in workload: loss curve, step times, throughput, model FLOP/s
// and MFU, final parameter norm and memory peaks by category per rank; as text for people and as
// the JSON document of `partrain launch --json`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runner/device/tracked_allocator.h"
#include "runner/workload/expert_load.h"

namespace partrain::runner {

struct RunSummary {
  std::string workload;     // "gpt (4 layers, hidden 256, ...)"
  std::string layout;       // describe_layout
  std::string device;       // "cpu (OpenBLAS, 1 thread)"
  std::string precision;    // --precision: "fp32" or "bf16"
  int world = 1;
  std::vector<double> losses;           // mean loss over the global batch, per step
  std::vector<double> step_seconds;     // rank 0's wall time per step
  std::vector<std::pair<double, double>> rank_step_seconds;  // per rank: (median, p90)
  int64_t tokens_per_step = 0;
  double model_flops_per_step = 0;      // Narayanan 2021: without recomputation
  double peak_flops_per_rank = 0;       // FLOP/s
  std::string peak_source;              // "measured sgemm" or "--peak-flops"
  // The peak before settle_peak raised it to the run's own rate (0: not raised).
  double peak_raised_from = 0;
  double final_params_l2 = 0;
  double gemm_seconds = 0;              // rank 0's time inside GEMMs over the run
  double gemm_flops = 0;                // and their FLOPs
  std::vector<MemoryStats> memory;      // per rank
  // DDP overlap on rank 0: buckets per step, bucket all-reduces over the run, and how many of
  // them started before their step's backward pass ended (the flight recorder's timestamps).
  int ddp_buckets = 0;
  int ddp_bucket_all_reduces = 0;
  int ddp_buckets_started_in_backward = 0;
  // A mixture of experts: rank 0's MoE blocks over the run (token choices and drops summed over
  // the steps, the aux loss their mean); empty for a dense model.
  std::vector<ExpertLayerLoad> expert_load;

  double step_time_median() const;
  double step_time_p90() const;
  double tokens_per_second() const;     // over the median step
  double mfu() const;
  double gemm_share_of_run() const;     // rank 0's GEMM time over its steps' time
  double model_flops_per_second_per_rank() const;  // over the median step
  double gemm_flops_per_second() const;            // rank 0's achieved GEMM rate
};

// A peak is what a rank can do at most: where the run's own work went faster (a peak measured
// while other ranks competed for the cores, or a --peak-flops set too low), the peak becomes the
// fastest rate the run measured, so no share of it exceeds 100%, and the summary says so.
void settle_peak(RunSummary& summary);

std::string format_summary_text(const RunSummary& summary);
std::string format_summary_json(const RunSummary& summary);

}  // namespace partrain::runner
