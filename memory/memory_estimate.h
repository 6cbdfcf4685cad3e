// Per-GPU memory of a training (or inference) job by category for every pipeline stage:
// params, grads, optimizer, activations, comm buffers, KV cache and a reserve for the CUDA
// context, NCCL buffers and fragmentation; the heaviest stage decides whether it fits.
#pragma once

#include <optional>
#include <vector>

#include "core/status.h"
#include "memory/activations.h"
#include "memory/model_config.h"
#include "memory/model_states.h"
#include "memory/training_layout.h"

namespace partrain::memory {

struct EstimateInput {
  ModelConfig model;
  TrainingLayout layout;
  PrecisionRecipe recipe;
  Optimizer optimizer = Optimizer::kAdamW;
  std::optional<double> reserve_bytes;  // unset: default_reserve()
  double bucket_bytes = 25e6;           // DDP gradient bucket
  // ZeRO-3 also holds a reduce bucket of bucket_bytes (DeepSpeed's, allocated whole); false:
  // FSDP's units alone (comm_buffers.h).
  bool zero3_reduce_bucket = false;
  // Bytes per element a rank holds of the gradients it sends to a reduction (a DDP bucket's copy,
  // a ZeRO unit's reduce-scatter staging); unset: the recipe's gradient bytes. partrain's own
  // workload stages them in fp32 under every recipe.
  std::optional<double> reduce_grad_bytes;
  // How ZeRO-2 holds the gradients it reduce-scatters: in buckets of `bucket_bytes` (PyTorch), or
  // unit by unit, two units' staging at a time (partrain's workload: one reducing while the next
  // is produced).
  bool zero2_stages_units = false;
  bool inference = false;               // weights + KV cache, no grads or optimizer
  int64_t kv_len = 0;                   // prompt tokens kept in the KV cache
  int64_t gen_len = 0;                  // generated tokens kept in the KV cache
  double capacity_bytes = 0;            // the GPU's memory; 0: unknown
};

// The reserve when none is given: CUDA context and cuBLAS workspace (~512 MiB on recent GPUs),
// NCCL's channel buffers (~512 MiB for a few communicators) and 5% of the rest for the caching
// allocator's fragmentation.
struct ReserveBreakdown {
  double cuda_context = 0;
  double nccl = 0;
  double fragmentation = 0;
  double total() const { return cuda_context + nccl + fragmentation; }
};
ReserveBreakdown default_reserve(double other_bytes);

struct StageMemory {
  int stage = 0;
  int64_t layers = 0;
  double params_count = 0;     // parameters this GPU computes with, before ZeRO sharding
  double expert_params_count = 0;  // the routed experts' among them (sharded over dp x cp / ep)
  double in_flight = 0;        // micro-batches' worth of activations held at the peak
  double params = 0;
  double grads = 0;
  double optimizer = 0;
  double activations = 0;
  double comm = 0;
  double kv_cache = 0;
  double reserve = 0;
  double total() const {
    return params + grads + optimizer + activations + comm + kv_cache + reserve;
  }
};

// A stage's memory in whole bytes, as the commands' --json give it: each category rounded to the
// nearest byte and the total their sum, so the figures add up and `memory` and `recommend` agree
// to the byte.
struct StageBytes {
  int64_t params = 0, grads = 0, optimizer = 0, activations = 0, comm = 0, kv_cache = 0,
          reserve = 0;
  int64_t total() const {
    return params + grads + optimizer + activations + comm + kv_cache + reserve;
  }
};
StageBytes whole_bytes(const StageMemory& stage);

struct MemoryEstimate {
  ResolvedLayout layout;
  std::vector<StageMemory> stages;
  size_t heaviest = 0;
  double capacity_bytes = 0;
  double total_params = 0;
  double active_params = 0;  // what one token computes with (a mixture of experts' top_k)
  const StageMemory& heaviest_stage() const { return stages[heaviest]; }
  bool fits() const { return capacity_bytes <= 0 || heaviest_stage().total() <= capacity_bytes; }
  double headroom() const { return capacity_bytes - heaviest_stage().total(); }
};

// kInvalidArgument naming the broken constraint when the layout does not fit the model.
StatusOr<MemoryEstimate> estimate_memory(const EstimateInput& input);

// How one GPU of the layout sees a micro-batch, for the activation formulas (and the
// recommender's compute model): b, s, cp, tp, SP, recompute, flash, dropout.
ActivationSetup activation_setup(const ResolvedLayout& layout, double element_bytes);

// Parameters one GPU of pipeline stage `stage` holds before ZeRO (blocks split by t, routed
// experts by t and ep, the vocab-parallel embedding on the first stage, the final norm and LM
// head on the last; with tied embeddings and pp > 1 the last stage keeps its own copy, as
// Megatron-LM does): the dense ones and the routed experts'.
struct StageParams {
  double dense = 0;
  double experts = 0;
  double total() const { return dense + experts; }
};
StageParams stage_param_split(const ModelConfig& model, const ResolvedLayout& layout, int stage);
double stage_params(const ModelConfig& model, const ResolvedLayout& layout, int stage);
// The blocks (0-based layer indices) pipeline stage `stage` holds, in the order they run.
std::vector<int64_t> stage_blocks(const ResolvedLayout& layout, int stage);

// The parameter units one tensor-parallel rank of a stage uses in backward, in that order: the
// pieces ZeRO-2 and -3 (FSDP) reduce and gather one at a time. The final norm and the LM head (or
// the tied embedding in its head use) on the last stage, the blocks (three stand for any run of
// them), then the token embedding, the position embedding and an embedding norm on the first.
// With a large vocabulary the embedding and head outweigh the blocks. Empty for a bare count.
std::vector<double> backward_units(const ModelConfig& model, const ResolvedLayout& layout,
                                   int stage);

}  // namespace partrain::memory
