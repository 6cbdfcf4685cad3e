// The compute side of the recommender's cost model: one micro-batch's forward and backward on
// one rank, kernel by kernel. A GEMM runs in 128 x 128 output tiles, whole waves of them over the
// GPU's SMs (NVIDIA's tile and wave quantization), at the preset's large-GEMM efficiency, or at
// the memory bandwidth when its operands outweigh its FLOPs, plus a fixed launch-and-tail cost: so
// thin, tensor-parallel-split GEMMs fall below the cap by their shape. Memory-bound kernels
// (norms, bias-dropout-residual, GeLU, softmax, the loss) cost the bytes they move at the
// bandwidth such kernels reach. The attention core is either materialised (QK^T, softmax, dropout,
// AV as Megatron runs them) or FlashAttention's fused kernel.
#pragma once

#include "memory/activations.h"
#include "memory/model_config.h"
#include "memory/presets.h"
#include "memory/training_layout.h"

namespace partrain::analyzers {

struct ComputeSpeed {
  double peak_flops = 0;         // per GPU, for the run's precision
  double gemm_efficiency = 0;    // the fraction of peak a large GEMM's full waves reach
  double memory_bandwidth = 0;   // bytes/s
  double kernel_overhead_s = 0;  // launch and tail per GEMM
  double scale = 1;              // calibration: measured / predicted compute time (all kinds)
  double memory_efficiency = 1;  // the fraction of memory_bandwidth memory-bound kernels reach
  int sm_count = 0;              // SMs a GEMM's tiles fill in waves; 0: no wave quantization
  double flash_efficiency = 0;   // the fraction of peak FlashAttention reaches; 0: gemm_efficiency
  int collective_sms = 0;        // SMs a collective running beside compute holds
  // Calibration by kind: measured / predicted, on top of `scale`, for the GEMMs (QKV, MLP, the
  // attention core's products, the LM head; FlashAttention) and for the memory-bound work (norms,
  // residuals, activations, softmax and dropout, the loss): traces of layouts that mix the two
  // differently (tp shards the GEMMs, not the replicated norms) fit each its own rate.
  double gemm_scale = 1;
  double memory_scale = 1;
  // The special function an elementwise kernel calls per element (GpuSpec's
  // special_function_rate; 0: memory paces every elementwise kernel), and its calibration scale:
  // held at 1 (the rate is measured; a step's trace cannot tell it from the memory-bound work)
  // unless the rate cannot be right (calibration.h's ComputeKindFit), 0 only to leave the kind
  // out of a prediction by kind.
  double special_function_rate = 0;
  double special_scale = 1;
};

// The speed while a collective runs beside the kernels: its SMs are taken from the GEMMs' waves
// and from the peak (a GPU's FLOP/s are its SMs'); memory-bound kernels keep the bandwidth, which
// a network-paced collective barely uses. The same speed without collective SMs.
ComputeSpeed contended(const ComputeSpeed& speed);

// The GPU preset's speeds for a run's precision (fp32 or 16-bit operands).
ComputeSpeed compute_speed(const memory::GpuSpec& gpu, bool fp32);

// Output tiles of a GEMM, the SMs' waves over them: the share of the waves' slots that do work
// (1 without a SM count).
double wave_efficiency(double m, double n, double batch, int sm_count);

// Seconds of one GEMM (batch x [m x k] . [k x n]): max(FLOPs at the capped peak over the waves'
// useful share, operand and result traffic at the memory-bound bandwidth) plus the overhead.
double gemm_seconds(double m, double n, double k, double batch, double element_bytes,
                    const ComputeSpeed& speed);

// Seconds of a memory-bound kernel moving `bytes` (at the bandwidth such kernels reach).
double memory_bound_seconds(double bytes, const ComputeSpeed& speed);

// An elementwise kernel that calls a special function `evaluations` times while moving `bytes`:
// paced by the function where, at the preset's own speeds, it outlasts the bytes (a CPU core's
// scalar tanh runs ~13 ns an element, its loads ~0.1 ns), else memory-bound. Each pass of the
// kernel evaluates the function once an element, forward and backward alike.
struct ElementwiseSeconds {
  double memory_bound_s = 0;
  double special_s = 0;  // the part the special function paces
  double total() const { return memory_bound_s + special_s; }
};
ElementwiseSeconds special_function_kernel(double evaluations, double bytes,
                                           const ComputeSpeed& speed);

// A transformer's MLP over `tokens` rows on one tensor-parallel rank, forward: the up (and gate)
// projections, the down projection, and the bytes its activation function (GeLU, SwiGLU) reads
// and writes. `groups` > 1: that many experts of a mixture, `tokens` rows each, in one grouped
// GEMM per projection (Megatron-Core's --moe-grouped-gemm, DeepSeek's): their tiles share the
// waves, one launch.
struct MlpForward {
  double up_gemm_s = 0;    // h -> f/t, twice for SwiGLU
  double down_gemm_s = 0;  // f/t -> h
  double activation_bytes = 0;
  double activation_evaluations = 0;  // GeLU's tanh or SiLU's exp, one an element of f/t
  ElementwiseSeconds activation(const ComputeSpeed& speed) const {
    return special_function_kernel(activation_evaluations, activation_bytes, speed);
  }
};
MlpForward mlp_forward(const memory::ModelConfig& model, double tokens, double ffn,
                       const memory::ActivationSetup& shape, const ComputeSpeed& speed,
                       double groups = 1);

// One micro-batch of one block on one rank, forward, by kind of work (the GEMMs' and the
// memory-bound work's backward is the forward's 2x; the attention core's backward is costed
// kernel by kernel).
struct BlockForward {
  double gemm_s = 0;            // QKV, attention out, MLP
  double qkv_gemm_s = 0;        // of which QKV's (a column-parallel layer's)
  double up_gemm_s = 0;         // and the MLP's up (and gate) projection's
  double memory_bound_s = 0;    // norms, bias-dropout-residual, GeLU/SwiGLU
  // Of memory_bound_s, the part a special function paces (the activation on a CPU): its backward
  // evaluates the function once again, where bytes-paced work moves twice the forward's bytes.
  double special_s = 0;
  double attention_core_s = 0;  // QK^T + softmax + dropout + AV, or the fused FlashAttention
  // The core's backward: materialised, dP = dO V^T and the products for dV, dQ and dK, with the
  // dropout's and softmax's backward over the scores; FlashAttention's 2.5x its forward.
  double attention_core_backward_s = 0;
  double total() const { return gemm_s + memory_bound_s + attention_core_s; }
};

struct BlockTimes {
  BlockForward parts;
  double forward_s = 0;
  double backward_s = 0;        // GEMMs and memory-bound work twice (special_s once), the core's
  double attention_core_s = 0;  // the forward's core (selective recompute redoes it)
  double recompute_s(memory::Recompute mode) const {
    if (mode == memory::Recompute::kFull) return forward_s;
    if (mode == memory::Recompute::kSelective) return attention_core_s;
    return 0;
  }
};

// One transformer block (or MLP layer) for one micro-batch on one tensor-parallel rank. `shape`
// is how the rank sees the micro-batch, as the activation estimate does: b sequences of s tokens,
// the sequence split over cp ranks, the layer over tp (the norms and residuals over tp too with
// SP), element_bytes per activation and operand, dropout masks when dropout > 0 (its recompute
// mode is ignored here: BlockTimes::recompute_s says what each mode adds).
// kWithoutMlp leaves a transformer block's MLP out: a mixture of experts' block costs its routed
// experts apart (analyzers/expert_cost.h).
enum class BlockPart { kWhole, kWithoutMlp };
BlockTimes block_times(const memory::ModelConfig& model, const memory::ActivationSetup& shape,
                       const ComputeSpeed& speed, BlockPart part = BlockPart::kWhole);
// The LM head and the loss (the last stage): forward and backward seconds together.
double head_seconds(const memory::ModelConfig& model, const memory::ActivationSetup& shape,
                    const ComputeSpeed& speed);

}  // namespace partrain::analyzers
