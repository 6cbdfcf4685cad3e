// The parallel layout and training setup an estimate is for (dp, tp, pp, vpp, cp, sp, ZeRO,
// pipeline schedule and split, micro-batching, recompute), resolved with DESIGN.md's defaults
// and checked against the model, naming the broken constraint.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "memory/model_config.h"

namespace partrain::memory {

enum class PipelineSchedule { kGpipe, kOneFOneB, kInterleaved };
enum class Recompute { kNone, kSelective, kFull };  // Korthikanti 2022 sec. 5

struct TrainingLayout {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  int vpp = 1;  // virtual stages per pipeline rank (interleaved 1F1B)
  int cp = 1;   // context parallel: the sequence split over cp ranks
  bool sp = false;
  int zero = 0;
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  std::vector<int64_t> pp_split;  // layers per pipeline stage (pp entries, or pp x vpp chunks)
  int64_t micro_batch = 1;
  std::optional<int64_t> global_batch;  // unset: dp x micro_batch
  std::optional<int64_t> seq;           // unset: the model's
  Recompute recompute = Recompute::kNone;
  bool flash_attention = false;
  double dropout = 0;
};

// A layout with defaults filled in and every constraint checked.
struct ResolvedLayout {
  TrainingLayout layout;
  int64_t global_batch = 1;
  int64_t micro_batches = 1;         // per step and pipeline: global / (dp x micro)
  int64_t seq = 1;
  std::vector<int64_t> chunk_layers;  // layers of each of the pp x vpp model chunks, in order
  std::vector<int64_t> stage_layers;  // layers held by each pipeline rank (sum of its chunks)
};

// kInvalidArgument naming the constraint (tp divides heads, pp <= layers, ...) and a fix.
StatusOr<ResolvedLayout> resolve_layout(const TrainingLayout& layout, const ModelConfig& model);

std::string_view schedule_name(PipelineSchedule value);  // gpipe, 1f1b, interleaved
std::string_view recompute_name(Recompute value);        // none, selective, full
std::optional<PipelineSchedule> parse_schedule(std::string_view text);
std::optional<Recompute> parse_recompute(std::string_view text);

}  // namespace partrain::memory
