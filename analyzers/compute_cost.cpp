#include "analyzers/compute_cost.h"

#include <algorithm>
#include <cmath>

namespace partrain::analyzers {
namespace {

constexpr double kTile = 128;  // cuBLAS's common output tile on sm_80/sm_90 (128 x 128)
// FlashAttention-2's backward runs 5 matrix products to the forward's 2 (it recomputes the
// scores): 2.5 times the forward's work.
constexpr double kFlashBackwardFactor = 2.5;

}  // namespace

double memory_bound_seconds(double bytes, const ComputeSpeed& speed) {
  return bytes / (speed.memory_bandwidth * speed.memory_efficiency) * speed.scale *
         speed.memory_scale;
}

ElementwiseSeconds special_function_kernel(double evaluations, double bytes,
                                           const ComputeSpeed& speed) {
  const double rate = speed.special_function_rate;
  if (rate <= 0 ||
      evaluations / rate <= bytes / (speed.memory_bandwidth * speed.memory_efficiency)) {
    return {memory_bound_seconds(bytes, speed), 0};
  }
  return {0, evaluations / rate * speed.scale * speed.special_scale};
}

MlpForward mlp_forward(const memory::ModelConfig& model, double tokens, double ffn,
                       const memory::ActivationSetup& shape, const ComputeSpeed& speed,
                       double groups) {
  const double t = shape.tp;
  const double h = static_cast<double>(model.hidden);
  const double e = shape.element_bytes;
  const bool swiglu = model.mlp == memory::MlpKind::kSwiglu;
  const double matrices = swiglu ? 3 : 2;
  const double activation = swiglu ? 3 : 2;  // GeLU reads and writes; SwiGLU reads two halves
  return {(matrices - 1) * gemm_seconds(tokens, ffn / t, h, groups, e, speed),
          gemm_seconds(tokens, h, ffn / t, groups, e, speed),
          tokens * ffn / t * activation * e * groups, tokens * ffn / t * groups};
}

ComputeSpeed compute_speed(const memory::GpuSpec& gpu, bool fp32) {
  return {fp32 ? gpu.fp32_flops : gpu.bf16_flops,
          gpu.gemm_efficiency,
          gpu.hbm_bandwidth,
          gpu.gemm_overhead_us * 1e-6,
          1,
          gpu.memory_efficiency,
          static_cast<int>(gpu.sm_count),
          gpu.flash_attention_efficiency,
          static_cast<int>(gpu.collective_sms),
          1,
          1,
          gpu.special_function_rate};
}

ComputeSpeed contended(const ComputeSpeed& speed) {
  if (speed.collective_sms <= 0 || speed.sm_count <= speed.collective_sms) return speed;
  ComputeSpeed slower = speed;
  slower.sm_count = speed.sm_count - speed.collective_sms;
  slower.peak_flops = speed.peak_flops * slower.sm_count / speed.sm_count;
  return slower;
}

double wave_efficiency(double m, double n, double batch, int sm_count) {
  if (sm_count <= 0) return 1;
  const double tiles = std::ceil(m / kTile) * std::ceil(n / kTile) * batch;
  const double waves = std::ceil(tiles / sm_count);
  // Partial tiles at the edges do a full tile's work: m n over the tiles' area.
  const double filled = m * n * batch / (tiles * kTile * kTile);
  return filled * tiles / (waves * sm_count);
}

double gemm_seconds(double m, double n, double k, double batch, double element_bytes,
                    const ComputeSpeed& speed) {
  const double flops = 2 * m * n * k * batch;
  const double traffic = (m * k + k * n + m * n) * batch * element_bytes;
  const double compute = flops / (speed.peak_flops * speed.gemm_efficiency *
                                  wave_efficiency(m, n, batch, speed.sm_count));
  const double seconds =
      std::max(compute, traffic / (speed.memory_bandwidth * speed.memory_efficiency));
  return (seconds + speed.kernel_overhead_s) * speed.scale * speed.gemm_scale;
}

BlockTimes block_times(const memory::ModelConfig& model, const memory::ActivationSetup& shape,
                       const ComputeSpeed& speed, BlockPart part) {
  const double t = shape.tp;
  const double tokens = shape.micro_batch * shape.seq / shape.cp;  // this rank's queries
  const double h = static_cast<double>(model.hidden);
  const double f = static_cast<double>(model.ffn);
  const double e = shape.element_bytes;
  const double mask = shape.dropout > 0 ? 1 : 0;  // a 1-byte dropout mask per element
  auto gemm = [&](double m, double n, double k, double batch = 1) {
    return gemm_seconds(m, n, k, batch, e, speed);
  };
  BlockTimes times;
  BlockForward& p = times.parts;
  if (model.architecture == memory::Architecture::kMlp) {
    // The lecture's MLP: one GEMM, its activation read and written.
    memory::ActivationSetup kept = shape;
    kept.recompute = memory::Recompute::kNone;
    p.gemm_s = gemm(tokens, h / t, h);
    p.memory_bound_s = memory_bound_seconds(2 * memory::layer_activation_bytes(model, kept), speed);
  } else {
    const double heads = static_cast<double>(model.heads) / t;
    const double d = static_cast<double>(model.head_dim());
    const double queries = shape.seq / shape.cp;
    const MlpForward mlp =
        part == BlockPart::kWhole ? mlp_forward(model, tokens, f, shape, speed) : MlpForward{};
    const double q_width = static_cast<double>(model.q_dim());
    p.qkv_gemm_s = gemm(tokens, (q_width + 2 * static_cast<double>(model.kv_dim())) / t, h);
    p.up_gemm_s = mlp.up_gemm_s;
    p.gemm_s = p.qkv_gemm_s + gemm(tokens, h, q_width / t) +  // attention out
               mlp.up_gemm_s + mlp.down_gemm_s;
    // Each rank's queries attend to the whole sequence (context parallelism passes K and V).
    const double batch = shape.micro_batch * heads;
    if (shape.flash_attention) {
      // One fused kernel: QK^T and AV at FlashAttention's efficiency, the causal mask skipping
      // the blocks above the diagonal (half the scores); nothing s^2 touches memory.
      const double flops = 2 * 2 * queries * shape.seq * d * batch / 2;
      const double efficiency =
          speed.flash_efficiency > 0 ? speed.flash_efficiency : speed.gemm_efficiency;
      p.attention_core_s = (flops / (speed.peak_flops * efficiency) + speed.kernel_overhead_s) *
                           speed.scale * speed.gemm_scale;
      p.attention_core_backward_s = kFlashBackwardFactor * p.attention_core_s;
    } else {
      // Megatron's core. Forward: QK^T writes the scores, the fused scale-mask-softmax reads and
      // writes them, dropout reads and writes the probabilities and writes its mask, AV reads
      // them. Backward: dP = dO V^T writes a score-sized gradient; dV = P^T dO, dQ = dS K and
      // dK = dS^T Q each read one; dropout's backward reads the gradient and the mask and writes
      // it, softmax's reads it and the probabilities and writes dS. Per score element 13 bytes
      // forward, 19 backward at 16 bits (with dropout), not twice: where the scores' traffic sets
      // the pace (long sequences, small heads), the backward is ~1.5x the forward.
      const double scores = queries * shape.seq * batch;
      const double scores_product = gemm(queries, shape.seq, d, batch);   // QK^T, dO V^T
      const double reading_product = gemm(queries, d, shape.seq, batch);  // AV, P^T dO, ...
      const double dropout = mask > 0 ? 2 * e + mask : 0;                 // read, write, mask
      p.attention_core_s = scores_product + reading_product +
                           memory_bound_seconds(scores * (2 * e + dropout), speed);
      p.attention_core_backward_s = scores_product + 3 * reading_product +
                                    memory_bound_seconds(scores * (3 * e + dropout), speed);
    }
    // The replicated region (norms, bias-dropout-residual) runs on every tp rank's whole
    // sequence, or on its 1/t of it with SP: 2 norms (read, write), 2 bias-dropout-adds (input
    // and residual read, output written, a mask), the MLP activation (GeLU read and written;
    // SwiGLU reads two halves).
    const double replicated = shape.sp ? tokens / t : tokens;
    const ElementwiseSeconds activation = mlp.activation(speed);
    p.special_s = activation.special_s;
    p.memory_bound_s =
        memory_bound_seconds(replicated * h * (2 * 2 * e + 2 * (3 * e + mask)), speed) +
        activation.total();
  }
  times.attention_core_s = p.attention_core_s;
  times.forward_s = p.total();
  times.backward_s = 2 * (p.gemm_s + p.memory_bound_s) - p.special_s + p.attention_core_backward_s;
  return times;
}

double head_seconds(const memory::ModelConfig& model, const memory::ActivationSetup& shape,
                    const ComputeSpeed& speed) {
  if (model.architecture == memory::Architecture::kMlp) return 0;
  const double tokens = shape.micro_batch * shape.seq / shape.cp;
  const double vocab = static_cast<double>(model.vocab) / shape.tp;
  const double logits =
      gemm_seconds(tokens, vocab, static_cast<double>(model.hidden), 1, shape.element_bytes, speed);
  // fp32 logits: written, read by softmax and cross-entropy, gradient written.
  return 3 * logits + memory_bound_seconds(3 * 4 * tokens * vocab, speed);
}

}  // namespace partrain::analyzers
