// The compute side of the recommender's cost model: one micro-batch's forward and backward on
// one rank, GEMM by GEMM on a roofline capped at the GPU's large-GEMM efficiency (so small,
// tensor-parallel-split GEMMs run below it), plus the element-wise work (norms, softmax, GeLU,
// residuals, the loss) at memory bandwidth.
#pragma once

#include "memory/activations.h"
#include "memory/model_config.h"
#include "memory/training_layout.h"

namespace partrain::analyzers {

struct ComputeSpeed {
  double peak_flops = 0;        // per GPU, for the run's precision
  double gemm_efficiency = 0;   // the fraction of peak a large GEMM reaches
  double memory_bandwidth = 0;  // bytes/s
  double kernel_overhead_s = 0;  // launch and tail per GEMM
  double scale = 1;             // calibration: measured / predicted compute time
};

// Seconds of one GEMM (batch x [m x k] . [k x n]): max(FLOPs at the capped peak, operand and
// result traffic at memory bandwidth) plus the kernel overhead.
double gemm_seconds(double m, double n, double k, double batch, double element_bytes,
                    const ComputeSpeed& speed);

struct BlockTimes {
  double forward_s = 0;
  double backward_s = 0;         // twice the forward's GEMMs, the element-wise work again
  double attention_core_s = 0;   // QK^T, softmax and AV of the forward (selective recompute redoes it)
  double recompute_s(memory::Recompute mode) const {
    if (mode == memory::Recompute::kFull) return forward_s;
    if (mode == memory::Recompute::kSelective) return attention_core_s;
    return 0;
  }
};

// One transformer block (or MLP layer) for one micro-batch on one tensor-parallel rank. `shape`
// is how the rank sees the micro-batch, as the activation estimate does: b sequences of s tokens,
// the sequence split over cp ranks, the layer over tp, element_bytes per activation and operand
// (its recompute mode is ignored here: BlockTimes::recompute_s says what each mode adds).
BlockTimes block_times(const memory::ModelConfig& model, const memory::ActivationSetup& shape,
                       const ComputeSpeed& speed);
// The LM head and the loss (the last stage): forward and backward seconds together.
double head_seconds(const memory::ModelConfig& model, const memory::ActivationSetup& shape,
                    const ComputeSpeed& speed);

}  // namespace partrain::analyzers
