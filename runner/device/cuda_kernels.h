// Launchers of the CUDA device's own kernels: everything of the op set that is not a GEMM. Each
// op family's kernels are in runner/ops/<op>_cuda.cu beside its CPU reference (<op>.cpp), with
// the same layouts and formulas (the matching runner/ops header); fill and scale are in
// runner/device/cuda_elementwise.cu, what they share in cuda_kernel_support.cuh. Internal to the
// CUDA device (it includes the CUDA runtime's header). Each launcher queues its kernels on
// `stream` and returns the launch's error (cudaGetLastError); empty inputs launch nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace partrain::runner::cuda_kernels {

// runner/device/cuda_elementwise.cu
cudaError_t fill(cudaStream_t stream, float* x, int64_t n, float value);
cudaError_t scale(cudaStream_t stream, float* x, int64_t n, float factor);

// runner/ops/bf16_round_cuda.cu
// destination (n) = source rounded to bf16 (round to nearest even), as GEMM operands; four at a
// time where source is 16-byte and destination 8-byte aligned.
cudaError_t round_to_bf16(cudaStream_t stream, void* destination, const float* source, int64_t n);
// destination (n) = values rounded to bf16, and values rounded in place (one pass).
cudaError_t store_bf16(cudaStream_t stream, uint16_t* destination, float* values, int64_t n);
// destination (n) = source's bf16 values as fp32 (exact).
cudaError_t widen_bf16(cudaStream_t stream, float* destination, const uint16_t* source, int64_t n);
// sum (n) = bf16(sum + x): added in fp32, rounded to nearest even once.
cudaError_t accumulate_bf16(cudaStream_t stream, uint16_t* sum, const float* x, int64_t n);

// runner/ops/residual_cuda.cu
cudaError_t residual_forward(cudaStream_t stream, float* out, const float* a, const float* b,
                             int64_t n);
cudaError_t residual_backward(cudaStream_t stream, float* da, float* db, const float* dout,
                              int64_t n);

// runner/ops/gelu_cuda.cu
// Each side fp32 or bf16 as stored (a bf16 input widened as read, a bf16 output rounded as
// written; runner/ops/gelu.h).
cudaError_t gelu_forward(cudaStream_t stream, float* out, const float* inp, int64_t n);
cudaError_t gelu_forward(cudaStream_t stream, uint16_t* out, const uint16_t* inp, int64_t n);
cudaError_t gelu_forward(cudaStream_t stream, uint16_t* out, const float* inp, int64_t n);
cudaError_t gelu_forward(cudaStream_t stream, float* out, const uint16_t* inp, int64_t n);
cudaError_t gelu_backward(cudaStream_t stream, float* dinp, const float* inp, const float* dout,
                          int64_t n);
cudaError_t gelu_backward(cudaStream_t stream, float* dinp, const uint16_t* inp, const float* dout,
                          int64_t n);

// runner/ops/matmul_cuda.cu
// The bias parts of matmul: out (N, OC) += bias per row; dbias (OC) += sum over rows of dout.
cudaError_t add_bias(cudaStream_t stream, float* out, const float* bias, int64_t N, int64_t OC);
// out (N, OC bf16) = product + bias per row (bias may be null), added in fp32 and rounded once
// (nearest even): a matmul's bf16 output.
cudaError_t add_bias_and_round(cudaStream_t stream, uint16_t* out, const float* product,
                               const float* bias, int64_t N, int64_t OC);
cudaError_t bias_backward(cudaStream_t stream, float* dbias, const float* dout, int64_t N,
                          int64_t OC);

// runner/ops/layernorm_cuda.cu
cudaError_t layernorm_forward(cudaStream_t stream, float* out, float* mean, float* rstd,
                              const float* inp, const float* weight, const float* bias, int64_t N,
                              int64_t C);
cudaError_t layernorm_backward(cudaStream_t stream, float* dinp, float* dweight, float* dbias,
                               const float* dout, const float* inp, const float* weight,
                               const float* mean, const float* rstd, int64_t N, int64_t C);

// runner/ops/attention_cuda.cu
// Attention's causal softmax over `rows` rows of (T) scores, row r being query t = r % T:
// probabilities for keys t2 <= t and 0 after, written in fp32 (in place when probabilities ==
// scores; rounded to bf16 values when round_to_bf16) or as bf16; the scores are overwritten.
cudaError_t causal_softmax_forward(cudaStream_t stream, float* scores, float* probabilities,
                                   int64_t rows, int64_t T, bool round_to_bf16);
cudaError_t causal_softmax_forward(cudaStream_t stream, float* scores, uint16_t* probabilities,
                                   int64_t rows, int64_t T);
// Its backward: dL/d(scores) = P (dP - sum P dP) * scale from dp = dL/dP, 0 after the diagonal;
// fp32 (in place when dscores == dp) from fp32 probabilities, or bf16 (rounded) from bf16 ones.
cudaError_t causal_softmax_backward(cudaStream_t stream, const float* dp,
                                    const float* probabilities, float* dscores, int64_t rows,
                                    int64_t T, float scale);
cudaError_t causal_softmax_backward(cudaStream_t stream, const float* dp,
                                    const uint16_t* probabilities, uint16_t* dscores, int64_t rows,
                                    int64_t T, float scale);

// runner/ops/embedding_cuda.cu
// Embeddings over rows [vocab_start, vocab_end) of the (possibly sharded) wte; wpe, dwpe may be
// nullptr.
cudaError_t embedding_forward(cudaStream_t stream, float* out, const int32_t* tokens,
                              const float* wte_shard, const float* wpe, int64_t B, int64_t T,
                              int64_t C, int64_t vocab_start, int64_t vocab_end);
// The same from tables stored in bf16, widened as they are read.
cudaError_t embedding_forward(cudaStream_t stream, float* out, const int32_t* tokens,
                              const uint16_t* wte_shard, const uint16_t* wpe, int64_t B,
                              int64_t T, int64_t C, int64_t vocab_start, int64_t vocab_end);
cudaError_t embedding_backward(cudaStream_t stream, float* dwte_shard, float* dwpe,
                               const float* dout, const int32_t* tokens, int64_t B, int64_t T,
                               int64_t C, int64_t vocab_start, int64_t vocab_end);

// runner/ops/cross_entropy_cuda.cu
// Per-row losses (N) into `losses` (never nullptr here); a target outside [0, V) gives NaN.
cudaError_t cross_entropy_forward(cudaStream_t stream, float* losses, const float* logits,
                                  const int32_t* targets, int64_t N, int64_t V);
cudaError_t cross_entropy_backward(cudaStream_t stream, float* dlogits, const float* logits,
                                   const int32_t* targets, int64_t N, int64_t V, float dloss_scale);

// runner/ops/vocab_parallel_cross_entropy_cuda.cu
cudaError_t vocab_parallel_local_max(cudaStream_t stream, float* row_max, const float* logits,
                                     int64_t N, int64_t V_local);
cudaError_t vocab_parallel_local_sum_exp(cudaStream_t stream, float* row_sum_exp,
                                         const float* logits, const float* global_max, int64_t N,
                                         int64_t V_local);
cudaError_t vocab_parallel_local_target_logit(cudaStream_t stream, float* target_logit,
                                              const float* logits, const int32_t* targets,
                                              int64_t N, int64_t V_local, int64_t vocab_start);
// Per-row losses (N) into `losses` (never nullptr here).
cudaError_t vocab_parallel_loss(cudaStream_t stream, float* losses, const float* global_max,
                                const float* global_sum_exp, const float* global_target_logit,
                                int64_t N);
cudaError_t vocab_parallel_backward(cudaStream_t stream, float* dlogits, const float* logits,
                                    const int32_t* targets, const float* global_max,
                                    const float* global_sum_exp, int64_t N, int64_t V_local,
                                    int64_t vocab_start, float dloss_scale);

// runner/ops/mean_square_loss_cuda.cu
cudaError_t mean_square_loss_backward(cudaStream_t stream, float* dy, const float* y, int64_t n,
                                      float dloss_scale);

// runner/ops/adamw_cuda.cu
// One AdamW step's scalars: bias_correction1 = 1 - beta1^step and bias_correction2 =
// 1 - beta2^step, computed by the caller as runner/ops/adamw.cpp does; each gradient is multiplied
// by grad_scale first.
struct AdamWStep {
  float learning_rate, beta1, beta2, eps, weight_decay, grad_scale;
  float bias_correction1, bias_correction2;
};
// From fp32 gradients, or from bf16 ones widened as they are read; where params_bf16 is not
// null, each updated parameter is also written into it rounded to bf16, in the same pass.
cudaError_t adamw_update(cudaStream_t stream, float* params, const float* grads, float* m, float* v,
                         uint16_t* params_bf16, int64_t n, const AdamWStep& step);
cudaError_t adamw_update(cudaStream_t stream, float* params, const uint16_t* grads, float* m,
                         float* v, uint16_t* params_bf16, int64_t n, const AdamWStep& step);

// runner/ops/global_norm_cuda.cu
// sum_i x_i^2 in double into *result (device memory), through `partials`, which holds
// kSumOfSquaresPartials doubles (device memory); x fp32, or bf16 widened.
inline constexpr int kSumOfSquaresPartials = 1024;
cudaError_t sum_of_squares(cudaStream_t stream, double* result, double* partials, const float* x,
                           int64_t n);
cudaError_t sum_of_squares(cudaStream_t stream, double* result, double* partials,
                           const uint16_t* x, int64_t n);

}  // namespace partrain::runner::cuda_kernels
