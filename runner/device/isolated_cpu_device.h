// The CPU device with its memory out of the host's reach (`--device cpu-isolated`): the CPU
// device's ops and arithmetic, over IsolatedMemory, so every pointer a workload holds is as
// unusable on the host as a GPU pointer. Each op first finds the host bytes behind its pointers
// and fails (the sticky status(), as a CUDA device's) when one is not inside a live buffer of this
// device; host code that dereferences one faults. Running a workload here is how, without a GPU,
// its code is shown to touch device memory only through Device calls, the condition for it to
// run on the CUDA device; the results are the CPU device's, bit for bit.
#pragma once

#include <memory>
#include <string>

#include "runner/device/cpu_device.h"
#include "runner/device/device.h"
#include "runner/device/isolated_memory.h"

namespace partrain::runner {

class IsolatedCpuDevice final : public Device {
 public:
  // Reserves the device's address space (1 TiB of addresses, no memory) and installs the fault
  // report once per process.
  static StatusOr<std::unique_ptr<IsolatedCpuDevice>> create(CpuDeviceOptions options = {});

  std::string name() const override;
  TrackedAllocator& allocator() override { return allocator_; }
  bool host_addressable() const override { return false; }
  Status status() const override { return status_.is_ok() ? cpu_.status() : status_; }
  GemmTotals gemm_totals() const override { return cpu_.gemm_totals(); }
  StatusOr<PeakGemm> measure_peak_gemm() override { return cpu_.measure_peak_gemm(); }
  std::optional<double> measure_special_function_rate() override {
    return cpu_.measure_special_function_rate();
  }
  // Its reserved address space as the total, and what its live buffers take as used.
  StatusOr<MemoryInfo> memory_info() const override;

  // The host side must be host memory and the device side inside one buffer of this device.
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

 private:
  class Arguments;
  IsolatedCpuDevice(CpuDeviceOptions options, std::unique_ptr<IsolatedMemory> memory);
  void fail(std::string message);  // keeps the first failure, logged once
  template <typename Value>
  void checked_adamw(float* params, const Value* grads, float* m, float* v, int64_t n,
                     const ops::AdamWConfig& config, int64_t step, uint16_t* params_bf16);
  template <typename Value>
  double checked_sum_of_squares(const Value* x, int64_t n);

  CpuDevice cpu_;                 // the arithmetic; its own allocator is used only for the peak
  IsolatedMemory* memory_;        // owned by allocator_
  TrackedAllocator allocator_;
  Status status_;                 // the first failure; every op after it does nothing
};

}  // namespace partrain::runner
