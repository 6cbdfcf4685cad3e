// The recommender's search (DESIGN.md "Recommender"): every dp x tp x pp x cp split of the GPUs
// with each expert-parallel degree (a mixture of experts: ep dividing dp x cp and the experts),
// micro-batch size, virtual pipeline size, ZeRO stage (sharded over every data rank, or a node's
// of them: a hybrid), recompute mode and sequence parallelism;
// what does not divide, does not fit or is known to be bad is counted by reason, the rest is
// costed and ranked by throughput.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analyzers/step_cost.h"
#include "memory/memory_estimate.h"

namespace partrain::analyzers {

// Parts of a layout held fixed (--fix tp=8; explain's "common alternatives": pure DP, FSDP, no
// PP...). shard: ZeRO's shard group (0: every data rank), which leaves ZeRO-0 out.
struct LayoutFilter {
  std::optional<int> tp, pp, cp, zero, ep, shard;
};

// n's divisors up to at_most, ascending: the degrees a search tries and a refusal names.
std::vector<int> divisors(int64_t n, int64_t at_most);

struct SearchSpace {
  int gpus = 1;
  int max_micro_batch = 16;
  int max_vpp = 8;
  int max_cp = 8;
  bool include_discouraged = false;  // ZeRO-2/3 with PP
  int max_tp = 0;                    // 0: no bound
  // The user's restrictions (--sp, --zero, --recompute, --schedule, --fix); empty lists allow all.
  std::optional<bool> sp;
  std::vector<int> zero_stages;
  std::vector<memory::Recompute> recompute_modes;
  std::vector<memory::PipelineSchedule> schedules;
  std::vector<int> ep_degrees;  // --ep 8,16 (a mixture of experts); empty: every one that divides
  LayoutFilter fixed;
  std::optional<int> fixed_dp, fixed_vpp;
  // --fix shard=N: ZeRO's shard groups of N data ranks (a hybrid when fewer than dp x cp; 0 for
  // all of them), which leaves out ZeRO-0. Unset, ZeRO shards over every data rank or, when
  // they span nodes, over a node's.
  std::optional<int> fixed_shard;
  std::optional<int64_t> fixed_micro_batch;
};

struct Candidate {
  memory::TrainingLayout layout;
  int64_t micro_batches = 1;  // per step and pipeline
  memory::StageMemory heaviest;
  double capacity_bytes = 0;
  bool fits = true;
  bool discouraged = false;  // ZeRO-2/3 with PP
  StepCost cost;
};

// Why a layout left the search, keyed as in --json's "rejected". The first four refuse a whole
// dp x tp x pp x cp split and are counted once per split (--json's "rejected_splits"); the rest
// once per layout (split, micro-batch, virtual stages, ZeRO, recompute, SP, schedule), each
// under its first reason, so that they and the ranked add up to the layouts searched.
inline constexpr const char* kRejectTpHeads = "tp_does_not_divide_heads";
inline constexpr const char* kRejectPpLayers = "pp_does_not_divide_layers";  // even stages only
inline constexpr const char* kRejectCpSeq = "cp_does_not_divide_seq";
inline constexpr const char* kRejectBatch = "batch_does_not_divide";
// A mixture of experts' split none of the allowed ep degrees (--ep, --fix ep) divides: ep ranks
// are drawn from the dp x cp ones (ep degrees that do not divide the experts are refused before
// the search, and the search tries only those that divide both).
inline constexpr const char* kRejectEpDataRanks = "ep_does_not_divide_dp_cp";
inline constexpr const char* kRejectVpp = "vpp_does_not_divide";
inline constexpr const char* kRejectDiscouraged = "discouraged_zero_2_3_with_pp";
// Variants that would change nothing, left out so that they do not crowd the ranking as ties:
// ZeRO without data parallelism (it shards over dp), selective recompute of a model without
// attention (it recomputes the attention core).
inline constexpr const char* kRejectZeroWithoutDp = "zero_without_dp";
inline constexpr const char* kRejectNoAttention = "selective_without_attention";
// Megatron-Core refuses a mixture of experts with tp > 1 and no sequence parallelism (its MoE
// layer takes the sequence-parallel input).
inline constexpr const char* kRejectMoeTpWithoutSp = "moe_tp_needs_sp";
inline constexpr const char* kRejectInvalid = "invalid_layout";
inline constexpr const char* kRejectFit = "does_not_fit";

bool is_split_reason(std::string_view reason);
// The reason in the user's words ("pp does not divide the layers").
std::string_view rejection_words(std::string_view reason);

// The expert-parallel degrees the search tries for a dp x cp split: 1 for a dense model; for a
// mixture of experts each that divides dp x cp and the experts, and is allowed (--ep, --fix ep).
std::vector<int> expert_degrees(const memory::ModelConfig& model, int data_ranks,
                                const SearchSpace& space, const LayoutFilter& filter = {});

struct SearchResult {
  std::vector<Candidate> ranked;            // fitting and allowed, highest tokens/s first
  std::map<std::string, int64_t> rejected;  // splits for is_split_reason, else layouts
  int64_t splits = 0;                       // dp x tp x pp x cp splits searched
  int64_t costed = 0;                       // layouts whose memory and step time were computed
  std::optional<Candidate> least_memory;    // the smallest heaviest stage seen (fitting or not)
  // Why the first invalid_layout was refused (the estimate's message): what to show when nothing
  // could be costed, since one cause (an input past the 4 EiB bound, say) can refuse them all.
  std::string first_invalid;

  // Layouts searched: the ranked and every layout rejected (split reasons left out).
  int64_t layouts() const;
};

// `base` gives the model, recipe, capacity, global batch, sequence and flash/dropout settings;
// its parallel degrees are ignored.
SearchResult search_layouts(const CostModel& model, const memory::EstimateInput& base,
                            const SearchSpace& space, const LayoutFilter& filter = {});

// One given layout (--check): its memory and cost whether or not it fits; kInvalidArgument
// naming the broken constraint when it does not resolve.
StatusOr<Candidate> evaluate_layout(const CostModel& model, const memory::EstimateInput& input);

// "dp8 tp4 pp2 ep8 mb2 z1 rc=selective sp" (vpp, cp, ep only when > 1; " shard8" after the
// ZeRO stage in a hybrid).
std::string layout_label(const memory::TrainingLayout& layout);

}  // namespace partrain::analyzers
