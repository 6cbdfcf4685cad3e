// The compute device a rank trains on: one op set (the math of runner/ops, llm.c style: raw float
// pointers into the device's memory plus dimensions) behind a virtual interface, so the CPU device
// and a CUDA device run the same workloads and pass the same tests. docs/ops.md lists the contract.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"
#include "runner/device/tracked_allocator.h"
#include "runner/ops/adamw.h"

namespace partrain::runner {

// A matrix operand (a GEMM's input or weight, an embedding table) in the type it is stored in:
// fp32, or bf16 under the bf16 recipes. At most one pointer is set; none for an absent operand.
struct Matrix {
  Matrix(std::nullptr_t = nullptr) {}                         // NOLINT(google-explicit-constructor)
  Matrix(const float* values) : f32(values) {}                // NOLINT(google-explicit-constructor)
  Matrix(const uint16_t* values) : bf16(values) {}            // NOLINT(google-explicit-constructor)
  bool empty() const { return f32 == nullptr && bf16 == nullptr; }
  const float* f32 = nullptr;
  const uint16_t* bf16 = nullptr;
};

// Where an op writes or adds a matrix (a weight's gradient, attention's probabilities), in the type
// it is stored in; none: not wanted.
struct MutableMatrix {
  MutableMatrix(std::nullptr_t = nullptr) {}         // NOLINT(google-explicit-constructor)
  MutableMatrix(float* values) : f32(values) {}      // NOLINT(google-explicit-constructor)
  MutableMatrix(uint16_t* values) : bf16(values) {}  // NOLINT(google-explicit-constructor)
  bool empty() const { return f32 == nullptr && bf16 == nullptr; }
  float* f32 = nullptr;
  uint16_t* bf16 = nullptr;
};

// Calls fn with the pointer of `x` (and of `out`) in the type it is stored in: one call for an op
// whose loops or kernels are templated on the element type.
template <typename Fn>
void with_stored(Matrix x, Fn&& fn) {
  if (x.bf16 != nullptr) {
    fn(x.bf16);
  } else {
    fn(x.f32);
  }
}
template <typename Fn>
void with_stored(MutableMatrix out, Matrix x, Fn&& fn) {
  if (out.bf16 != nullptr) {
    with_stored(x, [&](const auto* in) { fn(out.bf16, in); });
  } else {
    with_stored(x, [&](const auto* in) { fn(out.f32, in); });
  }
}

// embedding_forward_vocab_range's tables: ok when wpe is absent or stored in wte's type.
Status check_table_types(Matrix wte, Matrix wpe);

// Every pointer is device memory from allocator(); every backward accumulates (+=) into its
// gradients, as llm.c, so callers zero gradients once per step. Layouts and formulas are in the
// matching runner/ops header.
class Device {
 public:
  virtual ~Device() = default;

  // "cpu (OpenBLAS, 1 thread)": shown in summaries beside the measured peak.
  virtual std::string name() const = 0;
  // The rank's tracked memory on this device.
  virtual TrackedAllocator& allocator() = 0;
  // Waits until queued work has finished (timing, host reads). The CPU runs synchronously.
  virtual void synchronize() {}
  // Whether host code may read and write this device's buffers directly (the CPU device's are
  // host memory). Where not, communicators that work on host memory are staged through
  // upload/download (comm/host_staged_comm.h), and a workload touches its tensors only through
  // the calls below.
  virtual bool host_addressable() const { return false; }

  // Host <-> device copies of `bytes`, synchronous: when they return the destination holds the
  // data (a download waits for the ops queued before it). How a workload puts its initial
  // parameters and batches into device memory and reads results back; the CPU device memcpys.
  virtual void upload(void* device_destination, const void* host_source, size_t bytes) = 0;
  virtual void download(void* host_destination, const void* device_source, size_t bytes) = 0;
  // The stream the ops are queued on, as an opaque handle (a cudaStream_t on a CUDA device, so this
  // header stays CUDA-free); nullptr where ops run synchronously. A communicator working on the
  // device's buffers orders itself after it (an event recorded on it, waited on by its own stream).
  virtual void* compute_stream() { return nullptr; }
  // The first failure an op met. Ops return void, so a device whose ops can fail (a CUDA kernel, a
  // cuBLAS call) keeps it here and does nothing more; callers check it once per step. The CPU
  // device's fail only where a bf16 matmul cannot get the workspace for its rounded operands.
  virtual Status status() const { return Status::ok(); }

  // A device with its own memory reports how much of it is free, for a per-step sample beside the
  // tracked categories (which count only partrain's own buffers).
  struct MemoryInfo {
    uint64_t free_bytes = 0;
    uint64_t total_bytes = 0;
  };
  virtual StatusOr<MemoryInfo> memory_info() const {
    return unavailable("{} has no separate device memory to report", name());
  }

  // Time spent in GEMMs (matmul forward and backward) and the FLOPs they did, since creation:
  // the compute-efficiency figure of a run (achieved GEMM GFLOP/s vs the sgemm peak).
  struct GemmTotals {
    double seconds = 0;
    double flops = 0;
  };
  virtual GemmTotals gemm_totals() const { return {}; }

  // Memory.
  virtual void fill(float* x, int64_t n, float value) = 0;
  virtual void copy(float* destination, const float* source, int64_t n) = 0;
  // bf16 storage (runner/ops/bf16_round.h): destination (n) = source's bf16 bits, rounded to
  // nearest even; and back to fp32, exactly. How bf16 parameters are written from their fp32
  // master and read into the fp32 the other ops take.
  virtual void to_bf16(uint16_t* destination, const float* source, int64_t n) = 0;
  virtual void from_bf16(float* destination, const uint16_t* source, int64_t n) = 0;
  // destination (n) = values' bf16 bits and values rounded in place to them, in one pass: how a
  // bf16 activation is kept from the fp32 its op wrote (runner/workload/activation_store.h).
  virtual void store_bf16(uint16_t* destination, float* values, int64_t n) = 0;
  // bf16 gradients: sum (n) = bf16(sum + x), added in fp32 and rounded once; and zeroed.
  virtual void accumulate_bf16(uint16_t* sum, const float* x, int64_t n) = 0;
  virtual void zero_bf16(uint16_t* x, int64_t n) = 0;
  // destination (n bf16 values) = source, bit for bit: a bf16 activation handed to or from a
  // pipeline neighbour's buffer.
  virtual void copy_bf16(uint16_t* destination, const uint16_t* source, int64_t n) = 0;

  // runner/ops/matmul.h. The input, the weight and the weight's gradient are each fp32 or bf16
  // as stored (Matrix, MutableMatrix): a bf16 operand is read as its widened values, so the results
  // are the fp32 op's on them, bit for bit (a bf16 GEMM's rounding leaves a bf16 value as it is),
  // without a widened copy or a rounding pass; a bf16 gradient gets the fp32 product added with
  // one rounding, as accumulate_bf16 (docs/ops.md "bf16 model states"). The output too is fp32 or
  // bf16 as stored: a bf16 out holds the fp32 result, bias added, rounded once (nearest even), as
  // the fp32 op followed by to_bf16, without the fp32 result passing through the caller.
  virtual void matmul_forward(MutableMatrix out, Matrix inp, Matrix weight, const float* bias,
                              int64_t N, int64_t C, int64_t OC) = 0;
  virtual void matmul_backward(float* dinp, MutableMatrix dweight, float* dbias, const float* dout,
                               Matrix inp, Matrix weight, int64_t N, int64_t C, int64_t OC) = 0;
  // runner/ops/layernorm.h
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                 const float* weight, const float* bias, int64_t N, int64_t C) = 0;
  virtual void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const float* inp, const float* weight, const float* mean,
                                  const float* rstd, int64_t N, int64_t C) = 0;
  // runner/ops/attention.h. qkv is read and the probabilities written (att, forward) and read
  // (backward) as stored, fp32 or bf16. The four products take their operands as matmul's: under
  // bf16 GEMMs, Q, K, V, dout and the probabilities are bf16 values (the probabilities rounded
  // where the softmax computes them, so P V reads what att keeps, which a bf16 att always is), and
  // dL/d(scores) is rounded before dQ and dK; softmax and its backward compute in fp32.
  virtual void attention_forward(float* out, MutableMatrix att, Matrix qkv, int64_t B, int64_t T,
                                 int64_t NH, int64_t hs) = 0;
  virtual void attention_backward(float* dqkv, const float* dout, Matrix qkv, Matrix att, int64_t B,
                                  int64_t T, int64_t NH, int64_t hs) = 0;
  // runner/ops/gelu.h. The input and the output each fp32 or bf16 as stored: a bf16 input is read
  // widened and a bf16 output written rounded (nearest even), so under the bf16 recipes the MLP's
  // activations need no fp32 copy and no separate rounding pass.
  virtual void gelu_forward(MutableMatrix out, Matrix inp, int64_t n) = 0;
  virtual void gelu_backward(float* dinp, Matrix inp, const float* dout, int64_t n) = 0;
  // runner/ops/residual.h
  virtual void residual_forward(float* out, const float* a, const float* b, int64_t n) = 0;
  virtual void residual_backward(float* da, float* db, const float* dout, int64_t n) = 0;
  // runner/ops/embedding.h
  virtual void embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                 const float* wpe, int64_t B, int64_t T, int64_t C) = 0;
  virtual void embedding_backward(float* dwte, float* dwpe, const float* dout,
                                  const int32_t* tokens, int64_t B, int64_t T, int64_t C) = 0;
  // The tables fp32 or bf16 as stored, both in one type (wpe may be absent); a mix fails the
  // device (status()) and writes nothing.
  virtual void embedding_forward_vocab_range(float* out, const int32_t* tokens, Matrix wte_shard,
                                             Matrix wpe, int64_t B, int64_t T, int64_t C,
                                             int64_t vocab_start, int64_t vocab_end) = 0;
  virtual void embedding_backward_vocab_range(float* dwte_shard, float* dwpe, const float* dout,
                                              const int32_t* tokens, int64_t B, int64_t T,
                                              int64_t C, int64_t vocab_start,
                                              int64_t vocab_end) = 0;
  // runner/ops/cross_entropy.h
  virtual float cross_entropy_forward(float* losses, const float* logits, const int32_t* targets,
                                      int64_t N, int64_t V) = 0;
  virtual void cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets,
                                      int64_t N, int64_t V, float dloss_scale) = 0;
  // runner/ops/vocab_parallel_cross_entropy.h
  virtual void vocab_parallel_local_max(float* row_max, const float* logits, int64_t N,
                                        int64_t V_local) = 0;
  virtual void vocab_parallel_local_sum_exp(float* row_sum_exp, const float* logits,
                                            const float* global_max, int64_t N,
                                            int64_t V_local) = 0;
  virtual void vocab_parallel_local_target_logit(float* target_logit, const float* logits,
                                                 const int32_t* targets, int64_t N, int64_t V_local,
                                                 int64_t vocab_start) = 0;
  virtual float vocab_parallel_loss(float* losses, const float* global_max,
                                    const float* global_sum_exp, const float* global_target_logit,
                                    int64_t N) = 0;
  virtual void vocab_parallel_backward(float* dlogits, const float* logits, const int32_t* targets,
                                       const float* global_max, const float* global_sum_exp,
                                       int64_t N, int64_t V_local, int64_t vocab_start,
                                       float dloss_scale) = 0;
  // runner/ops/mean_square_loss.h
  virtual float mean_square_loss_forward(const float* y, int64_t n) = 0;
  virtual void mean_square_loss_backward(float* dy, const float* y, int64_t n,
                                         float dloss_scale) = 0;
  // runner/ops/adamw.h and runner/ops/global_norm.h; the uint16_t overloads read bf16 gradients,
  // widened exactly as they are read (no fp32 copy of them is made). Where params_bf16 is not
  // null, the updated params are also written into it rounded to bf16 (to_bf16's bits), in the
  // same pass: how the bf16 parameters follow their fp32 master.
  virtual void adamw_update(float* params, const float* grads, float* m, float* v, int64_t n,
                            const ops::AdamWConfig& config, int64_t step,
                            uint16_t* params_bf16) = 0;
  virtual void adamw_update(float* params, const uint16_t* grads, float* m, float* v, int64_t n,
                            const ops::AdamWConfig& config, int64_t step,
                            uint16_t* params_bf16) = 0;
  virtual double sum_of_squares(const float* x, int64_t n) = 0;
  virtual double sum_of_squares(const uint16_t* x, int64_t n) = 0;
  virtual void scale(float* x, int64_t n, float factor) = 0;

  // The device's sgemm throughput, the peak MFU is measured against: the best of `repeats` timed
  // (size x size) @ (size x size)^T products through matmul_forward, after one warm-up, in
  // GFLOP/s (2 size^3 flops each). Its buffers are tracked as workspace and freed on return.
  // 512 is near the workloads' GEMM shapes, and OpenBLAS peaks there on a single core (1024
  // measured ~30% lower on the development machine).
  StatusOr<double> measure_sgemm_gflops(int64_t size = 512, int repeats = 5);

  // The GEMM rate a run's MFU is measured against, and how it was had ("measured GEMM,
  // 4096^3"). By default the large-GEMM rate, in the device's own precision, on this device; its
  // workspace is freed and the memory peaks restarted, so the run's figures do not include it.
  struct PeakGemm {
    double gflops = 0;
    std::string source;
  };
  virtual StatusOr<PeakGemm> measure_peak_gemm();

  // Evaluations per second of the special function the workloads' GeLU calls per element (tanh),
  // over a forward and a backward, where it and not memory paces the kernel: a CPU core's scalar
  // tanh (the recommender's `special_function_rate`). nullopt where memory paces it (a GPU).
  virtual std::optional<double> measure_special_function_rate() { return std::nullopt; }
};

}  // namespace partrain::runner
