// The parallel layout of a training job, the one vocabulary of every layer: the degrees (dp, tp,
// pp, vpp, cp, ep), sequence parallelism, the ZeRO stage, the pipeline schedule and split,
// micro-batching and recompute. resolve_layout is its one set of rules: DESIGN.md's defaults
// filled in, every constraint checked against the model (and the ranks it must fill), each
// broken one named as the user wrote it (`--tp 3` on a command line, `tp=3` in a layout spec).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "memory/model_config.h"

namespace partrain::memory {

// Pipeline schedules (docs/pipeline.md). The zero-bubble ones split a backward into the input
// gradient (B) and the weight gradient (W) that fills bubbles later (Qi 2023): ZB-H1 at 1F1B's
// activation memory; DualPipeV, DeepSeek's DualPipe cut in half (a V: rank r holds stages r and
// 2 pp - 1 - r); DualPipe, the bidirectional original (two copies of the parameters), which only
// the estimator models.
enum class PipelineSchedule { kGpipe, kOneFOneB, kInterleaved, kZbH1, kDualPipeV, kDualPipe };
// Every schedule, in the order help texts list them.
inline constexpr PipelineSchedule kPipelineSchedules[] = {
    PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB,  PipelineSchedule::kInterleaved,
    PipelineSchedule::kZbH1,  PipelineSchedule::kDualPipeV, PipelineSchedule::kDualPipe};
enum class Recompute { kNone, kSelective, kFull };  // Korthikanti 2022 sec. 5

struct TrainingLayout {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  int vpp = 1;  // virtual stages per pipeline rank (interleaved 1F1B)
  int cp = 1;   // context parallel: the sequence split over cp ranks
  // Expert parallel: a mixture of experts' routed experts sharded over ep ranks drawn from the
  // data-parallel ones (dp x cp), as Megatron-LM and DeepSpeed draw them; dense weights stay
  // data-parallel, expert weights are data-parallel over the dp x cp / ep expert-data ranks.
  int ep = 1;
  bool sp = false;
  int zero = 0;  // 0 DDP, 1 optimizer states sharded over dp, 2 + gradients, 3 (FSDP) + parameters
  // The data-parallel ranks ZeRO shards over, 0 for all dp x cp of them. Fewer makes a hybrid:
  // shard groups of `shard` neighbouring data ranks (a node's, as users place them), the groups
  // replicas of each other that all-reduce their gradient shards (PyTorch's HSDP, HYBRID_SHARD;
  // Megatron-LM's --num-distributed-optimizer-instances dp x cp / shard).
  int shard = 0;
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  std::vector<int64_t> pp_split;  // layers per pipeline stage (pp entries, or pp x vpp chunks)
  int64_t micro_batch = 1;
  std::optional<int64_t> global_batch;  // unset: dp x micro_batch
  std::optional<int64_t> seq;           // unset: the model's
  Recompute recompute = Recompute::kNone;
  bool flash_attention = false;
  double dropout = 0;
};

// The fields of a layout, as messages, layout specs and configs name them.
enum class LayoutField {
  kDp,
  kTp,
  kPp,
  kCp,
  kVpp,
  kEp,
  kSp,
  kZero,
  kShard,
  kSchedule,
  kPpSplit,
  kMicroBatch,
  kGlobalBatch,
  kSeq,
  kRecompute,
  kDropout,
};

// The parallel degrees, in the order messages list them. A new degree (ep) is a member above, a
// LayoutField, its names (training_layout.cpp) and a row here: the rules, the layout spec, the
// config codec and the products in messages follow the table.
struct LayoutDegree {
  LayoutField field;
  int TrainingLayout::*member;
  bool fills_world;  // a factor of dp x tp x pp x cp = the ranks (vpp divides a rank's layers)
};
inline constexpr LayoutDegree kLayoutDegrees[] = {
    {LayoutField::kDp, &TrainingLayout::dp, true},
    {LayoutField::kTp, &TrainingLayout::tp, true},
    {LayoutField::kPp, &TrainingLayout::pp, true},
    {LayoutField::kCp, &TrainingLayout::cp, true},
    {LayoutField::kVpp, &TrainingLayout::vpp, false},
    {LayoutField::kEp, &TrainingLayout::ep, false},  // drawn from dp x cp, not a factor of its own
};

// The ranks a layout occupies: the product of the degrees that fill the world.
int layout_ranks(const TrainingLayout& layout);
// The ranks that hold the same expert weights and reduce their gradients: dp x cp / ep.
int expert_data_ranks(const TrainingLayout& layout);
// The data ranks ZeRO shards the dense weights' states over (layout.shard, or all dp x cp), and
// the shard groups' replicas, dp x cp / shard: 1 unless the layout is a hybrid.
int zero_shard_ranks(const TrainingLayout& layout);
int zero_replicas(const TrainingLayout& layout);
// The ranks ZeRO shards routed experts' states over: their expert-data ranks, which with ep 1 are
// the dense weights' (a hybrid's shard group then, as for every other weight).
int expert_shard_ranks(const TrainingLayout& layout);

// How the user wrote the layout: a command's flags (`--tp 3`), the keys of a layout spec
// (`tp=3`, recommend --check) or the fields of a workload config (`layout.tp=3`).
enum class LayoutNaming { kFlags, kSpecKeys, kConfigFields };

struct LayoutNames {
  LayoutNaming naming = LayoutNaming::kFlags;
  // What dp x tp x pp x cp must fill when the layout is resolved on a world ("--gpus", "GPUs").
  std::string_view world = "the world size";
  std::string_view world_unit = "ranks";
  // Degrees the user has no way to set here (the workloads run no cp): left out of products.
  std::vector<LayoutField> not_offered = {};

  std::string name(LayoutField field) const;                            // "--tp", "tp"
  std::string named(LayoutField field, std::string_view value) const;   // "--tp 3", "tp=3"
  std::string named(LayoutField field, int64_t value) const;
  bool offers(LayoutField field) const;
};

// The ranks a layout must fill exactly: launch's world, recommend's --gpus. dp x tp x pp x cp
// must equal them; dp, when not given, is what the other degrees leave.
struct LayoutWorld {
  int ranks = 1;
  bool dp_given = false;
};

// A layout with defaults filled in and every constraint checked.
struct ResolvedLayout {
  TrainingLayout layout;  // dp filled in from the world when it was not given
  int64_t global_batch = 1;
  int64_t micro_batches = 1;          // per step and pipeline: global / (dp x micro)
  int64_t seq = 1;
  std::vector<int64_t> chunk_layers;  // layers of each of the pp x vpp model chunks, in order
  std::vector<int64_t> stage_layers;  // layers held by each pipeline rank (sum of its chunks)
};

// kInvalidArgument naming the constraint (tp divides heads, pp <= layers, ...) and a fix, in
// `names`; with a `world`, dp x tp x pp x cp must fill it.
StatusOr<ResolvedLayout> resolve_layout(const TrainingLayout& layout, const ModelConfig& model,
                                        const LayoutNames& names = {},
                                        std::optional<LayoutWorld> world = std::nullopt);

// gpipe, 1f1b, interleaved, zb-h1, dualpipev, dualpipe: what users type and JSON carries.
std::string_view schedule_name(PipelineSchedule value);
std::string_view recompute_name(Recompute value);        // none, selective, full
std::optional<PipelineSchedule> parse_schedule(std::string_view text);
// The names for help texts and messages: "gpipe, 1f1b, ... or dualpipe".
std::string schedule_choices();
std::vector<std::string> schedule_names();
// The schedules whose backward is split into input-gradient and weight-gradient passes.
bool splits_backward(PipelineSchedule value);
// Model chunks a pipeline rank holds: vpp under interleaved, 2 under DualPipeV (its V) and
// DualPipe (a stage per direction), else 1.
int chunks_per_rank(PipelineSchedule value, int vpp);
std::optional<Recompute> parse_recompute(std::string_view text);

}  // namespace partrain::memory
