// The CPU device: OpenBLAS sgemm for the GEMMs and the runner/ops reference code for the rest;
// one BLAS thread per rank unless told otherwise, since the launcher already runs a rank per core.
// The ops take fp32; under GemmPrecision::kBf16 each matmul rounds its operands to bf16 first, as
// the CUDA device does, so bf16 training has a CPU reference.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runner/device/device.h"
#include "runner/device/gemm_precision.h"
#include "runner/device/tracked_allocator.h"

namespace partrain::runner {

// OpenBLAS picks its kernels for the CPU model it recognises; an older OpenBLAS that does not know
// a new model falls back to its generic x86-64 kernels (Debian 12's 0.3.21 on a 2023 Xeon chose
// "Prescott", SSE3: sgemm at a quarter of the core's rate). The warning that says so, with the
// fix, when that happened on a CPU with AVX2; nullopt otherwise.
std::optional<std::string> blas_kernel_warning();
// The OPENBLAS_CORETYPE that gives such a CPU its kernels (SkylakeX with AVX-512 F/BW/VL/DQ,
// Haswell with AVX2 and FMA); nullopt when OpenBLAS chose well itself. Read by OpenBLAS when it
// loads: a process sets it for the processes it starts.
std::optional<std::string> better_blas_coretype();

struct CpuDeviceOptions {
  // OpenBLAS threads for this process. Its thread count is process-wide state inside OpenBLAS, so
  // the last CpuDevice constructed in a process decides it; the first opens OpenBLAS, with a pool
  // of this size (openblas_library.h), unless something opened it before.
  int blas_threads = 1;
  GemmPrecision precision = GemmPrecision::kFp32;
};

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(CpuDeviceOptions options = {});

  std::string name() const override;
  TrackedAllocator& allocator() override { return allocator_; }
  bool host_addressable() const override { return true; }
  // Fails only where a bf16 matmul could not get the workspace for its rounded operands (the op
  // then did nothing).
  Status status() const override { return status_; }
  // sgemm at 512^3 on a probe device of its own, so the run's memory never holds its buffers:
  // 512 is near the workloads' GEMM shapes. sgemm in both precisions: bf16 operands go through
  // the same sgemm, the CPU having no faster bf16 path.
  StatusOr<PeakGemm> measure_peak_gemm() override;
  // GeLU's forward and backward over 131,072 elements (the built-in GPT's MLP width at its
  // shapes), the best of 5 pairs after a warm-up (~20 ms), on host buffers of its own, untracked
  // (freed before the first step).
  std::optional<double> measure_special_function_rate() override;
  int blas_threads() const { return blas_threads_; }

  // Host memory is the device's memory: plain copies.
  void upload(void* device_destination, const void* host_source, size_t bytes) override;
  void download(void* host_destination, const void* device_source, size_t bytes) override;

  void fill(float* x, int64_t n, float value) override;
  void copy(float* destination, const float* source, int64_t n) override;
  void to_bf16(uint16_t* destination, const float* source, int64_t n) override;
  void from_bf16(float* destination, const uint16_t* source, int64_t n) override;
  void store_bf16(uint16_t* destination, float* values, int64_t n) override;
  void accumulate_bf16(uint16_t* sum, const float* x, int64_t n) override;
  void zero_bf16(uint16_t* x, int64_t n) override;
  void copy_bf16(uint16_t* destination, const uint16_t* source, int64_t n) override;
  void matmul_forward(MutableMatrix out, Matrix inp, Matrix weight, const float* bias, int64_t N,
                      int64_t C, int64_t OC) override;
  void matmul_backward(float* dinp, MutableMatrix dweight, float* dbias, const float* dout,
                       Matrix inp, Matrix weight, int64_t N, int64_t C, int64_t OC) override;
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, int64_t N, int64_t C) override;
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, const float* mean,
                          const float* rstd, int64_t N, int64_t C) override;
  void attention_forward(float* out, MutableMatrix att, Matrix qkv, int64_t B, int64_t T,
                         int64_t NH, int64_t hs) override;
  void attention_backward(float* dqkv, const float* dout, Matrix qkv, Matrix att, int64_t B,
                          int64_t T, int64_t NH, int64_t hs) override;
  void gelu_forward(MutableMatrix out, Matrix inp, int64_t n) override;
  void gelu_backward(float* dinp, Matrix inp, const float* dout, int64_t n) override;
  void residual_forward(float* out, const float* a, const float* b, int64_t n) override;
  void residual_backward(float* da, float* db, const float* dout, int64_t n) override;
  void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                         int64_t B, int64_t T, int64_t C) override;
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                          int64_t B, int64_t T, int64_t C) override;
  void embedding_forward_vocab_range(float* out, const int32_t* tokens, Matrix wte_shard,
                                     Matrix wpe, int64_t B, int64_t T, int64_t C,
                                     int64_t vocab_start, int64_t vocab_end) override;
  void embedding_backward_vocab_range(float* dwte_shard, float* dwpe, const float* dout,
                                      const int32_t* tokens, int64_t B, int64_t T, int64_t C,
                                      int64_t vocab_start, int64_t vocab_end) override;
  float cross_entropy_forward(float* losses, const float* logits, const int32_t* targets, int64_t N,
                              int64_t V) override;
  void cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets,
                              int64_t N, int64_t V, float dloss_scale) override;
  void vocab_parallel_local_max(float* row_max, const float* logits, int64_t N,
                                int64_t V_local) override;
  void vocab_parallel_local_sum_exp(float* row_sum_exp, const float* logits,
                                    const float* global_max, int64_t N, int64_t V_local) override;
  void vocab_parallel_local_target_logit(float* target_logit, const float* logits,
                                         const int32_t* targets, int64_t N, int64_t V_local,
                                         int64_t vocab_start) override;
  float vocab_parallel_loss(float* losses, const float* global_max, const float* global_sum_exp,
                            const float* global_target_logit, int64_t N) override;
  void vocab_parallel_backward(float* dlogits, const float* logits, const int32_t* targets,
                               const float* global_max, const float* global_sum_exp, int64_t N,
                               int64_t V_local, int64_t vocab_start, float dloss_scale) override;
  float mean_square_loss_forward(const float* y, int64_t n) override;
  void mean_square_loss_backward(float* dy, const float* y, int64_t n, float dloss_scale) override;
  void adamw_update(float* params, const float* grads, float* m, float* v, int64_t n,
                    const ops::AdamWConfig& config, int64_t step, uint16_t* params_bf16) override;
  void adamw_update(float* params, const uint16_t* grads, float* m, float* v, int64_t n,
                    const ops::AdamWConfig& config, int64_t step, uint16_t* params_bf16) override;
  double sum_of_squares(const float* x, int64_t n) override;
  double sum_of_squares(const uint16_t* x, int64_t n) override;
  void scale(float* x, int64_t n, float factor) override;

  GemmTotals gemm_totals() const override { return gemm_; }

 private:
  enum class Operand { kA, kB, kProduct, kCount };  // kProduct: a bf16 gradient's fp32 product
  // The operand as sgemm reads it, in fp32: an fp32 one itself, or under bf16 GEMMs its `n`
  // values rounded into workspace `slot` (tracked as kWorkspace, kept and grown across calls, as
  // the CUDA device's scratch); a bf16 one widened into `slot` (exactly its values, which a bf16
  // GEMM's rounding leaves as they are). nullptr, with status_ set, when the workspace cannot
  // grow.
  const float* gemm_operand(Operand slot, Matrix x, int64_t n);
  // The same into `buffer` (attention's probabilities: a (B, NH, T, T) copy is not worth keeping
  // between calls, so the caller frees it, as the fp32 workspace the activation store used to
  // lend for them).
  const float* gemm_operand(TrackedBuffer& buffer, Matrix x, int64_t n);
  // `slot`'s workspace, or `buffer`, grown to n floats; nullptr, with status_ set, when it
  // cannot grow.
  float* operand_buffer(Operand slot, int64_t n);
  float* workspace_buffer(TrackedBuffer& buffer, int64_t n);
  void add_gemm_time(int64_t start_ns, double flops);

  TrackedAllocator allocator_;  // host memory, 64-byte aligned
  int blas_threads_;
  GemmPrecision precision_;
  GemmTotals gemm_;
  std::vector<TrackedBuffer> operands_;  // bf16: the rounded operands, one per Operand
  Status status_;
};

}  // namespace partrain::runner
