// The CUDA device: the op set of device.h on one GPU, cuBLAS for the GEMMs and the small kernels
// of cuda_kernels.h (runner/ops/<op>_cuda.cu) for the rest, all queued on one compute stream. This header needs no CUDA
// (handles are forward-declared), so CPU-only code can ask for a CUDA device through
// create_cuda_device and get a Status back when the build or the machine has none.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "runner/device/device.h"
#include "runner/device/gemm_precision.h"
#include "runner/device/tracked_allocator.h"

// The CUDA runtime's and cuBLAS's handle types are pointers to these.
struct CUstream_st;
struct CUevent_st;
struct cublasContext;

namespace partrain::runner {

struct CublasLibrary;

struct CudaDeviceOptions {
  int ordinal = 0;  // the CUDA device index, as CUDA_VISIBLE_DEVICES numbers them
  GemmPrecision precision = GemmPrecision::kFp32;
};

// How many GPUs the CUDA runtime sees. Fails with a Status naming the call and CUDA's error
// ("cudaGetDeviceCount failed: no CUDA-capable device is detected (cudaErrorNoDevice)"), or
// saying that this build has no CUDA.
StatusOr<int> visible_cuda_devices();

// A CUDA device on options.ordinal. Fails cleanly, naming the CUDA call and its error, when the
// build has no CUDA, no GPU is usable or the ordinal is out of range.
StatusOr<std::unique_ptr<Device>> create_cuda_device(const CudaDeviceOptions& options);

// Ops queue on the compute stream and return at once; only the ops returning a host value,
// downloads and synchronize() wait. Not thread-safe: one rank's thread drives it (each op makes
// its ordinal the calling thread's current device, so that thread need not be the creator).
//
// Errors: the ops return void (the Device interface), so the first failing CUDA or cuBLAS call is
// kept as the device's status(), naming the call, CUDA's error and file:line, and printed once to
// stderr as it happens. From then on every op does nothing and host values are NaN: after a
// failed kernel (often a sticky context error) later results would be garbage that looks
// plausible, and NaN losses are not. Callers check status() once per step, where they can fail
// with it.
class CudaDevice final : public Device {
 public:
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  // "cuda:0 (NVIDIA H100 80GB HBM3, bf16 GEMMs, cuBLAS 13.0.1)".
  std::string name() const override { return name_; }
  TrackedAllocator& allocator() override { return allocator_; }
  void synchronize() override;
  void upload(void* device_destination, const void* host_source, size_t bytes) override;
  void download(void* host_destination, const void* device_source, size_t bytes) override;
  void* compute_stream() override { return stream_; }
  Status status() const override { return first_error_; }
  // cudaMemGetInfo: free and total bytes of the whole GPU (other processes' use included).
  StatusOr<MemoryInfo> memory_info() const override;
  // GEMM time from event pairs around each matmul, read when asked (waits for the last ones).
  GemmTotals gemm_totals() const override;
  // An 8192^3 matmul_forward as the workloads issue it (runner/device/gemm_benchmark.h): operands
  // and out in bf16 under bf16 GEMMs, else fp32; 2 warm-up calls, the mean of 5. Its buffers and
  // the scratch it grew are freed (to the cache) and the peaks restarted.
  StatusOr<PeakGemm> measure_peak_gemm() override;

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

 private:
  friend StatusOr<std::unique_ptr<Device>> create_cuda_device(const CudaDeviceOptions& options);

  // Scratch the ops keep between calls, grown on demand and tracked as workspace.
  enum class Scratch {
    kOperandA,  // a GEMM's operands rounded to bf16, or bf16 ones widened for fp32 GEMMs
    kOperandB,
    kProduct,          // a bf16 gradient's fp32 product; attention's probabilities as operand
    kAttentionScores,  // one sample's fp32 scores or dL/dP, (NH, T, T)
    kAttentionGrads,   // one sample's dL/d(scores) in bf16 under bf16 GEMMs
    kRowLosses,        // per-row losses when the caller passes none
    kCount,
  };
  struct EventPair {
    CUevent_st* start = nullptr;
    CUevent_st* stop = nullptr;
  };

  explicit CudaDevice(CudaDeviceOptions options);
  Status initialise();

  // Makes the ordinal current; false once an op has failed (the op then does nothing).
  bool begin_op();
  // Keeps the first failure as status(), printing it once; false when `status` is one.
  bool keep(const Status& status) const;
  StatusOr<void*> scratch(Scratch slot, size_t bytes);
  void copy_and_wait(void* destination, const void* source, size_t bytes, bool to_device);
  // sum_of_squares of fp32 or bf16 values, through reduction_; NaN once an op has failed.
  template <typename Value>
  double reduce_squares(const Value* x, int64_t n);

  // A matmul operand as cuBLAS reads it. fp32: under GemmPrecision::kBf16 its `elements`
  // rounded to bf16 into scratch `slot` (queued on the compute stream, so a slot can be refilled
  // for the next GEMM), else the array as it lies.
  struct GemmOperand {
    const void* data = nullptr;
    int type = 0;  // a cudaDataType_t
  };
  // A bf16 operand (a weight or activation as stored): under kBf16 the array as it lies (no
  // copy: it is what the rounding would make), else widened to fp32 into scratch `slot`.
  StatusOr<GemmOperand> gemm_operand(Scratch slot, Matrix x, int64_t elements);
  // The weight-gradient GEMM of matmul_backward: dweight (OC, C) += dout^T inp. A bf16 gradient:
  // under bf16 GEMMs cuBLAS adds into it with one rounding; under fp32 GEMMs (no fp32 x fp32 ->
  // bf16 GEMM) the product goes through kProduct and accumulate_bf16.
  Status weight_gradient(MutableMatrix dweight, GemmOperand x, GemmOperand g, int64_t N, int64_t C,
                         int64_t OC);
  // One matmul GEMM in column-major terms: c (m, n) = op(a) op(b) + beta c, summed and scaled in
  // fp32, then written in c's type (a cudaDataType_t: fp32, or bf16 rounded once).
  Status matmul_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                     GemmOperand a, int64_t lda, GemmOperand b, int64_t ldb, float beta, void* c,
                     int c_type, int64_t ldc);
  // `x` moved on by `elements` (a sample's or a head's start) of its own size.
  static GemmOperand advanced(GemmOperand x, int64_t elements);
  // Attention's GEMMs, the NH heads of one sample as a strided batch: operands of one type (fp32
  // or bf16), c fp32.
  Status attention_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                        float alpha, GemmOperand a, int64_t lda, int64_t stride_a, GemmOperand b,
                        int64_t ldb, int64_t stride_b, float beta, float* c, int64_t ldc,
                        int64_t stride_c, int64_t batch);
  // The bodies of attention_forward and _backward, failing at the first error.
  Status attention_forward_gemms(float* out, MutableMatrix att, Matrix qkv, int64_t B, int64_t T,
                                 int64_t NH, int64_t hs);
  Status attention_backward_gemms(float* dqkv, const float* dout, Matrix qkv, Matrix att, int64_t B,
                                  int64_t T, int64_t NH, int64_t hs);
  // Queues `gemms` between two events and counts their flops; the time is read later.
  Status timed_gemms(const std::function<Status()>& gemms, double flops);
  // Adds the time of finished event pairs; `wait` waits for the unfinished ones too.
  Status settle_gemm_times(bool wait) const;
  // The caller's per-row losses (n) or, when it passes none, scratch; nullptr after a failure.
  float* losses_or_scratch(float* losses, int64_t n);
  // Reads n per-row losses back and returns their mean (summed in double, as the CPU).
  float mean_of_device_losses(const float* losses, int64_t n);

  CudaDeviceOptions options_;
  std::string name_;
  TrackedAllocator allocator_;
  CUstream_st* stream_ = nullptr;
  const CublasLibrary* cublas_library_ = nullptr;  // cublas_library.h: opened, not linked
  cublasContext* cublas_ = nullptr;
  TrackedBuffer cublas_workspace_;
  TrackedBuffer reduction_;  // partial sums of sum_of_squares and its double result
  std::vector<TrackedBuffer> scratch_;
  mutable Status first_error_;
  // GEMM timing, settled lazily (gemm_totals() is const and settles the pending pairs).
  mutable std::vector<EventPair> pending_gemms_;
  mutable std::vector<EventPair> spare_events_;
  mutable GemmTotals gemm_;
};

}  // namespace partrain::runner
