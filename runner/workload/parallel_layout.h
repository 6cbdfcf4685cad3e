// How a run is split over its ranks: data, tensor and pipeline degrees, sequence parallelism,
// ZeRO stage, pipeline schedule and micro-batching; resolved from the user's flags (defaults of
// DESIGN.md "Conventions") and checked before any rank starts, naming the broken constraint.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace partrain::runner {

enum class PipelineSchedule { kGpipe, kOneFOneB, kInterleaved };
std::optional<PipelineSchedule> parse_pipeline_schedule(std::string_view name);
std::string_view pipeline_schedule_name(PipelineSchedule schedule);  // gpipe, 1f1b, interleaved

// The model dimensions the layout must divide; 0 for a dimension the model does not have.
struct LayoutModel {
  int layers = 1;
  int hidden = 1;
  int heads = 1;
  int seq = 1;
  int vocab = 1;
  int ffn = 4;
};

struct ParallelLayout {
  int world = 1;
  std::optional<int> dp;   // unset: world / (tp x pp)
  int tp = 1;
  int pp = 1;
  bool sp = false;         // Megatron sequence parallelism (needs tp > 1)
  int zero = 0;            // 0 DDP, 1 optimizer states, 2 + gradients, 3 (FSDP) + parameters
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  int vpp = 1;             // virtual stages per rank (interleaved 1F1B)
  int micro_batch = 1;
  std::optional<int> global_batch;  // unset: dp x micro_batch
  std::vector<int> pp_split;        // layers per (virtual) stage; empty: even split
  int64_t bucket_bytes = 25'000'000;  // DDP gradient bucket (PyTorch's default 25 MB)
};

// A layout with every default filled in and every constraint checked.
struct ResolvedLayout {
  int world = 1;
  int dp = 1;
  int tp = 1;
  int pp = 1;
  bool sp = false;
  int zero = 0;
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  int vpp = 1;
  int micro_batch = 1;
  int global_batch = 1;
  int micro_batches = 1;            // per step and data-parallel rank: global / (dp x micro)
  std::vector<int> stage_layers;    // layers of each of the pp x vpp model chunks, in order
  int64_t bucket_bytes = 25'000'000;
};

// The degrees a strategy shorthand sets, as given beside it (unset: not given).
struct GivenDegrees {
  std::optional<int> tp, pp, zero;
};
// Applies `--strategy ddp|zero1|zero2|fsdp|tp|sp|pp` to a layout; kInvalidArgument when a degree
// the shorthand sets was given with another value, also its default (`--strategy tp --tp 1`).
Status apply_strategy(std::string_view strategy, const GivenDegrees& given, ParallelLayout& layout);

// Fills defaults and checks the layout against the world and the model; an invalid layout is
// StatusCode::kInvalidArgument naming the constraint and a fix.
StatusOr<ResolvedLayout> resolve_layout(const ParallelLayout& layout, const LayoutModel& model);

// "dp=2 tp=2 pp=1 zero=0 mb=1 gb=4 1f1b": for logs and summaries.
std::string describe_layout(const ResolvedLayout& layout);

}  // namespace partrain::runner
