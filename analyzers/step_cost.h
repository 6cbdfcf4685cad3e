// The recommender's step-time model for one parallel layout (DESIGN.md "Recommender"): the
// heaviest pipeline stage's compute per micro-batch with its exposed tensor- and
// context-parallel communication, the pipeline's bubble and p2p, the data-parallel gradient
// (and ZeRO parameter) traffic less what hides behind backward, and the optimizer step.
#pragma once

#include <array>
#include <string_view>
#include <utility>

#include "analyzers/arrival_wait.h"
#include "analyzers/collective_cost.h"
#include "analyzers/compute_cost.h"
#include "analyzers/expert_cost.h"
#include "memory/memory_estimate.h"
#include "memory/model_states.h"

namespace partrain::analyzers {

// How a pipeline's stages pass activations and gradients to each other.
// - kScatterGather: Megatron (Narayanan 2021 sec. 4.1): each of a stage's t tensor-parallel ranks
//   sends 1/t of the activation over its own link and the receiving stage all-gathers the pieces
//   over the tensor-parallel link; each send is paired with the receive that follows it.
// - kDeepSpeed: DeepSpeed's pipeline engine: the same 1/t pieces (a PartitionedTensor over the
//   tensor-parallel group, all-gathered by the receiver: is_pipe_partitioned and, since v0.5.4,
//   is_grad_partitioned, on whenever tp > 1), but each send and receive on its own and blocking
//   (deepspeed/runtime/pipe/p2p.py asserts async_op is False): 4 transfers per micro-batch on a
//   stage's path, not 2.
// - kFull: unpaired like DeepSpeed, every rank sending the whole activation (DeepSpeed with
//   pipe_partitioned off, or an engine without partitioning).
enum class PipelineP2p { kScatterGather, kDeepSpeed, kFull };

struct CostModel {
  memory::ModelConfig model;
  memory::PrecisionRecipe recipe;
  CollectiveCost comm;
  ComputeSpeed speed;
  double optimizer_bandwidth = 0;  // bytes/s the optimizer step streams at
  bool overlaps_communication = true;
  double bucket_bytes = 25e6;  // DDP gradient bucket: the part that never hides
  // Gradient reduction overlapped with the last micro-batch's backward, bucket by bucket
  // (PyTorch DDP, Megatron-LM's --overlap-grad-reduce, DeepSpeed's overlap_comm); off, as
  // Megatron-LM and DeepSpeed's ZeRO-1/2 and pipeline engine default to: after the backward.
  bool overlap_grad_reduce = false;
  // ZeRO-1/2's updated weights all-gathered bucket by bucket behind the next forward (Megatron-LM's
  // --overlap-param-gather, FSDP's prefetch); off, as Megatron-LM defaults to: after the optimizer
  // step, before the forward. ZeRO-3's per-unit gathers are prefetched either way (FSDP and
  // DeepSpeed ZeRO-3 do it by default).
  bool overlap_param_gather = false;
  // Megatron-LM's backward (since 2022, always on today): a column-parallel layer's input
  // gradient is all-reduced (reduce-scattered with SP) while its weight gradient is computed,
  // and with SP its input re-gathered while the input gradient is; off: every backward
  // collective in line (Megatron-LM 2021, DeepSpeed's Megatron forks of it, the built-in
  // workload).
  bool tp_backward_overlap = true;
  // How a pipeline's stages pass activations and gradients (PipelineP2p).
  PipelineP2p pipeline_p2p = PipelineP2p::kScatterGather;
  // ZeRO-3 under full recompute: the recomputed forward gathers the unit's weights, which are
  // released and gathered again for the backward (DeepSpeed ZeRO-3: its hooks on every submodule
  // run in the recomputed forward too), or the backward's one gather serves its recomputed
  // forward as well (PyTorch FSDP and FSDP2 with the checkpoint inside the unit, as LLM Foundry
  // and torchtitan wrap it: FSDP's hooks sit on the unit, not on what the checkpoint reruns).
  bool zero3_regathers_for_recompute = true;
  // Bytes per parameter that adding one micro-batch's weight gradients into the accumulation
  // buffer moves, a memory-bound kernel in every micro-batch's backward. 0: the weight-gradient
  // GEMM accumulates in place (Megatron-Core's gradient accumulation fusion, on by default since
  // 2022). kAutogradAdd16: autograd's in-place add of a 16-bit gradient into the 16-bit .grad
  // (Megatron-LM 2021 fp16, DeepSpeed fp16). kMainGradAdd32: Megatron's hook adding it into an
  // fp32 main_grad. kDeepSpeedBf16: DeepSpeed's BF16_Optimizer.update_hp_grads, which copies the
  // bf16 gradient to fp32 and then adds it.
  double grad_accumulation_bytes = 0;
  // ZeRO-1's gradients all-reduced whole before each rank updates its shard (DeepSpeed's
  // BF16_Optimizer: the pipeline engine's _bf16_reduce_grads), not reduce-scattered.
  bool zero1_all_reduce = false;
  static constexpr double kAutogradAdd16 = 2 + 2 + 2;        // read both, write the sum
  static constexpr double kMainGradAdd32 = 2 + 4 + 4;        // bf16 read, fp32 read and written
  static constexpr double kDeepSpeedBf16 = (2 + 4) + 4 * 3;  // the fp32 copy, then the add
  // Measured over modelled step time of the calibration runs (--calibrate), every other term
  // calibrated first: what no term captures (scheduling and wake-up delays, framework and
  // launch overhead). 1 until calibrated.
  double step_scale = 1;
  // Ranks that do equal work drift apart between collectives, by a random walk (ranks sharing
  // cores) and by their rates (ranks on devices of their own) over the seconds since the group
  // last synchronised (analyzers/arrival_wait.h), and each tensor- or data-parallel collective
  // waits for the last one (in tp_comm and dp_comm). None until calibrated from a trace.
  ArrivalDrift arrival_drift;
};

// What the compute term is made of, seconds per step on the critical path (recompute included):
// --explain's compute lines.
struct ComputeParts {
  double gemm_s = 0;            // the blocks' linear layers
  double memory_bound_s = 0;    // norms, bias-dropout-residual, activation functions
  double attention_core_s = 0;  // QK^T, softmax, dropout, AV (or FlashAttention)
  double head_s = 0;            // LM head and loss (last stage)
  // A mixture of experts' MoE blocks (their attention is in the parts above).
  double router_s = 0;
  double routed_experts_s = 0;
  double shared_experts_s = 0;
  double grad_accumulation_s = 0;  // each micro-batch's weight gradients added into the buffer
};

// What a mixture of experts adds to the heaviest stage's step, for --explain and --json.
struct ExpertStep {
  bool moe = false;       // the model is a mixture of experts (the terms below apply)
  int moe_blocks = 0;     // MoE blocks on the heaviest stage
  ExpertForward forward;  // one MoE block, one micro-batch, forward
  AllToAll all_to_all;    // one dispatch or combine
  int all_to_alls = 0;    // per micro-batch on the heaviest stage
  // DualPipe(V) runs them under the paired micro-batch's compute: ep_comm is what it leaves.
  bool all_to_all_overlapped = false;
  double tp_exchange_s = 0;  // with SP: one MLP all-gather + reduce-scatter beyond the dense one's
  int tp_exchanges = 0;      // such pairs per micro-batch on the heaviest stage (in tp_comm)
  // Gradient reductions (ZeRO's reduce-scatters and gathers as the stage) before overlap: the
  // dense weights' over dp x cp, the routed experts' over the dp x cp / ep ranks holding them.
  double dense_grad_s = 0;
  double expert_grad_s = 0;
  int data_ranks = 1;
  int expert_data_ranks = 1;
  LinkLevel dense_grad_level = LinkLevel::kIntraNode;
  LinkLevel expert_grad_level = LinkLevel::kIntraNode;
};

// One dense block's forward and backward (its recompute included) for one micro-batch on one
// rank, with the tensor-parallel collectives each pass leaves exposed: what a profiler shows per
// layer (Korthikanti 2022 Table 4 measures it), --explain's block line.
struct BlockPass {
  bool exists = false;  // the model has a dense block (a mixture of experts may have none)
  double forward_s = 0;
  double backward_s = 0;
};

// Each term is seconds of one step on the critical path (the heaviest stage).
struct StepCost {
  double compute_s = 0;        // m micro-batches' forward, backward and recompute
  double recompute_s = 0;      // of which recomputation
  ComputeParts compute_parts;  // compute_s by kind of work
  double tp_comm_s = 0;        // tensor/sequence-parallel collectives (never hidden)
  double cp_comm_s = 0;        // context-parallel K/V exchange not hidden behind attention
  double ep_comm_s = 0;        // a mixture of experts' all_to_all dispatch and combine (not
                               // overlapped: frameworks without DualPipe run it in line)
  double bubble_s = 0;         // pipeline fill and drain: memory::bubble_fraction of the ideal time
  double bubble_fraction = 0;  // (p - 1)/(v m), as `partrain memory` reports it
  double pp_comm_s = 0;        // pipeline sends and receives
  double dp_comm_s = 0;        // data-parallel / ZeRO traffic not hidden behind compute
  double optimizer_s = 0;
  double shared_device_s = 0;  // ranks sharing a device: the node's compute exceeds the path's
  double overhead_s = 0;       // (step_scale - 1) x the modelled step; negative when the
                               // calibration runs were faster than modelled
  double step_s = 0;
  double model_flops = 0;  // per step, without recomputation (for MFU)
  double tokens_per_s = 0;
  double mfu = 0;  // model FLOPs / (step time x GPUs x peak), 1 at most
  // The calibrated terms asked for a step faster than every GPU at its peak: step_s is held at
  // the peak's time (overhead_s takes the difference) and mfu is 1.
  bool held_at_peak = false;
  std::string_view bottleneck;  // the largest term's name (compute, bubble, tp_comm, ...)
  ExpertStep experts;
  BlockPass block;  // one dense block, one micro-batch (not a term: within compute and tp_comm)

  double exposed_comm_s() const {
    return tp_comm_s + cp_comm_s + pp_comm_s + dp_comm_s + ep_comm_s;
  }
};

// The terms that add up to step_s, by name (the JSON's breakdown_s keys), in the order
// `bottleneck` picks among equals.
using CostTerms = std::array<std::pair<std::string_view, double>, 10>;
CostTerms cost_terms(const StepCost& cost);

StepCost step_cost(const CostModel& model, const memory::MemoryEstimate& estimate);

// The model of `model` trained with `recipe` on `gpu`s linked as `machines`: the preset's peak,
// fitted kernel efficiencies and overheads; the optimizer streaming at the memory-bound rate.
CostModel cost_model_for(const memory::ModelConfig& model, const memory::PrecisionRecipe& recipe,
                         const memory::GpuSpec& gpu, Machines machines);

}  // namespace partrain::analyzers
