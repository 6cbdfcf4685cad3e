#include "runner/device/cpu_device.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>
#include <vector>

#include "core/clock.h"
#include "runner/device/openblas_library.h"
#include "runner/ops/adamw.h"
#include "runner/ops/attention.h"
#include "runner/ops/bf16_round.h"
#include "runner/ops/cross_entropy.h"
#include "runner/ops/embedding.h"
#include "runner/ops/gelu.h"
#include "runner/ops/global_norm.h"
#include "runner/ops/layernorm.h"
#include "runner/ops/matmul.h"
#include "runner/ops/mean_square_loss.h"
#include "runner/ops/residual.h"
#include "runner/ops/vocab_parallel_cross_entropy.h"

namespace partrain::runner {

CpuDevice::CpuDevice(CpuDeviceOptions options)
    : allocator_(std::make_unique<HostMemory>()),
      blas_threads_(std::max(1, options.blas_threads)),
      precision_(options.precision),
      operands_(static_cast<size_t>(Operand::kCount)) {
  // The first device of a process opens OpenBLAS with a pool of its size (openblas_library.h).
  StatusOr<const OpenblasLibrary*> blas = openblas_library(blas_threads_);
  if (!blas.is_ok()) {
    status_ = blas.status();
    return;
  }
  (*blas)->set_num_threads(blas_threads_);
}

std::optional<std::string> better_blas_coretype() {
  StatusOr<const OpenblasLibrary*> blas = openblas_library();
  if (!blas.is_ok()) return std::nullopt;
  const char* core = (*blas)->get_corename();
  if (core == nullptr) return std::nullopt;
  static constexpr const char* kGeneric[] = {"prescott",  "core2",  "katmai", "coppermine",
                                             "northwood", "banias", "atom",   "nehalem"};
  std::string name(core);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const bool generic = std::any_of(std::begin(kGeneric), std::end(kGeneric),
                                   [&](const char* g) { return name == g; });
  if (!generic) return std::nullopt;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return std::nullopt;
}

std::optional<std::string> blas_kernel_warning() {
  const std::optional<std::string> better = better_blas_coretype();
  if (!better) return std::nullopt;
  return fmt::format(
      "OpenBLAS runs its '{}' kernels on this CPU, which has {} (this OpenBLAS does not know the "
      "CPU's model): GEMMs run at a fraction of the core's rate; set OPENBLAS_CORETYPE={} in "
      "the environment (or install a newer OpenBLAS)",
      loaded_openblas().get_corename(), *better == "SkylakeX" ? "AVX-512" : "AVX2", *better);
}

std::string CpuDevice::name() const {
  return fmt::format("cpu (OpenBLAS, {} thread{}{})", blas_threads_, blas_threads_ == 1 ? "" : "s",
                     precision_ == GemmPrecision::kBf16 ? ", bf16 GEMMs" : "");
}

StatusOr<Device::PeakGemm> CpuDevice::measure_peak_gemm() {
  constexpr int64_t kSize = 512;
  CpuDevice probe(CpuDeviceOptions{blas_threads_});
  ASSIGN_OR_RETURN(double gflops, probe.measure_sgemm_gflops(kSize, 3));
  return PeakGemm{gflops, fmt::format("measured sgemm, {}^3", kSize)};
}

std::optional<double> CpuDevice::measure_special_function_rate() {
  constexpr int64_t kElements = 131072;
  std::vector<float> input(kElements), output(kElements), gradient(kElements, 1.0f),
      input_gradient(kElements, 0.0f);
  for (int64_t i = 0; i < kElements; ++i) {
    input[static_cast<size_t>(i)] = static_cast<float>(i % 1000) * 0.006f - 3.0f;  // -3 to 3
  }
  int64_t best_ns = 0;
  for (int pass = 0; pass <= 5; ++pass) {  // pass 0 warms the caches
    const int64_t start = monotonic_ns();
    ops::gelu_forward(output.data(), input.data(), kElements);
    ops::gelu_backward(input_gradient.data(), input.data(), gradient.data(), kElements);
    const int64_t took = monotonic_ns() - start;
    if (pass > 0 && (best_ns == 0 || took < best_ns)) best_ns = took;
  }
  if (best_ns <= 0) return std::nullopt;
  return 2.0 * kElements / (static_cast<double>(best_ns) * 1e-9);
}

void CpuDevice::upload(void* device_destination, const void* host_source, size_t bytes) {
  if (bytes > 0) std::memcpy(device_destination, host_source, bytes);
}

void CpuDevice::download(void* host_destination, const void* device_source, size_t bytes) {
  if (bytes > 0) std::memcpy(host_destination, device_source, bytes);
}

void CpuDevice::fill(float* x, int64_t n, float value) { std::fill_n(x, n, value); }

void CpuDevice::copy(float* destination, const float* source, int64_t n) {
  std::copy_n(source, n, destination);
}

void CpuDevice::to_bf16(uint16_t* destination, const float* source, int64_t n) {
  ops::to_bf16(destination, source, n);
}

void CpuDevice::from_bf16(float* destination, const uint16_t* source, int64_t n) {
  ops::from_bf16(destination, source, n);
}

void CpuDevice::store_bf16(uint16_t* destination, float* values, int64_t n) {
  ops::store_bf16(destination, values, n);
}

void CpuDevice::accumulate_bf16(uint16_t* sum, const float* x, int64_t n) {
  ops::accumulate_bf16(sum, x, n);
}

void CpuDevice::zero_bf16(uint16_t* x, int64_t n) { std::fill_n(x, n, uint16_t{0}); }

void CpuDevice::copy_bf16(uint16_t* destination, const uint16_t* source, int64_t n) {
  std::copy_n(source, n, destination);
}

float* CpuDevice::workspace_buffer(TrackedBuffer& buffer, int64_t n) {
  Status grown = allocator_.grow(buffer, static_cast<size_t>(n) * sizeof(float),
                                 memory::Category::kWorkspace);
  if (!grown.is_ok()) {
    if (status_.is_ok()) status_ = grown;
    return nullptr;
  }
  return static_cast<float*>(buffer.data());
}

float* CpuDevice::operand_buffer(Operand slot, int64_t n) {
  return workspace_buffer(operands_[static_cast<size_t>(slot)], n);
}

const float* CpuDevice::gemm_operand(Operand slot, Matrix x, int64_t n) {
  return gemm_operand(operands_[static_cast<size_t>(slot)], x, n);
}

const float* CpuDevice::gemm_operand(TrackedBuffer& buffer, Matrix x, int64_t n) {
  if (x.bf16 != nullptr) {
    float* widened = workspace_buffer(buffer, n);
    if (widened != nullptr) ops::from_bf16(widened, x.bf16, n);
    return widened;
  }
  if (precision_ != GemmPrecision::kBf16) return x.f32;
  float* rounded = workspace_buffer(buffer, n);
  if (rounded != nullptr) ops::round_to_bf16(rounded, x.f32, n);
  return rounded;
}

void CpuDevice::add_gemm_time(int64_t start_ns, double flops) {
  gemm_.seconds += static_cast<double>(monotonic_ns() - start_ns) / 1e9;
  gemm_.flops += flops;
}

void CpuDevice::matmul_forward(MutableMatrix out, Matrix inp, Matrix weight, const float* bias,
                               int64_t N, int64_t C, int64_t OC) {
  if (!status_.is_ok()) return;
  const int64_t start = monotonic_ns();
  const float* w = gemm_operand(Operand::kA, weight, OC * C);
  const float* x = gemm_operand(Operand::kB, inp, N * C);
  // A bf16 out: the fp32 result in workspace, then rounded into it.
  float* product = out.bf16 != nullptr ? operand_buffer(Operand::kProduct, N * OC) : out.f32;
  if (w == nullptr || x == nullptr || product == nullptr) return;
  ops::matmul_forward(product, x, w, bias, N, C, OC);  // the bias is added in fp32, unrounded
  if (out.bf16 != nullptr) ops::to_bf16(out.bf16, product, N * OC);
  add_gemm_time(start,
                2.0 * static_cast<double>(N) * static_cast<double>(C) * static_cast<double>(OC));
}

void CpuDevice::matmul_backward(float* dinp, MutableMatrix dweight, float* dbias, const float* dout,
                                Matrix inp, Matrix weight, int64_t N, int64_t C, int64_t OC) {
  if (!status_.is_ok()) return;
  const int64_t start = monotonic_ns();
  // As the CUDA device: dout is rounded once for both products, dbias sums it unrounded.
  if (dinp != nullptr || !dweight.empty()) {
    const float* g = gemm_operand(Operand::kB, dout, N * OC);
    if (g == nullptr) return;
    if (dinp != nullptr) {
      const float* w = gemm_operand(Operand::kA, weight, OC * C);
      if (w == nullptr) return;
      ops::matmul_backward(dinp, nullptr, nullptr, g, nullptr, w, N, C, OC);  // inp not read
    }
    if (!dweight.empty()) {  // the weight is not read
      const float* x = gemm_operand(Operand::kA, inp, N * C);
      if (x == nullptr) return;
      if (dweight.bf16 != nullptr) {  // the fp32 product, added with one rounding
        float* product = operand_buffer(Operand::kProduct, OC * C);
        if (product == nullptr) return;
        std::fill_n(product, OC * C, 0.0f);
        ops::matmul_backward(nullptr, product, nullptr, g, x, nullptr, N, C, OC);
        ops::accumulate_bf16(dweight.bf16, product, OC * C);
      } else {
        ops::matmul_backward(nullptr, dweight.f32, nullptr, g, x, nullptr, N, C, OC);
      }
    }
  }
  if (dbias != nullptr) {
    ops::matmul_backward(nullptr, nullptr, dbias, dout, nullptr, nullptr, N, C, OC);
  }
  // dinp and dweight: two products of the forward's size each, when asked for.
  const double product =
      2.0 * static_cast<double>(N) * static_cast<double>(C) * static_cast<double>(OC);
  add_gemm_time(start, (dinp != nullptr ? product : 0.0) + (!dweight.empty() ? product : 0.0));
}

void CpuDevice::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                  const float* weight, const float* bias, int64_t N, int64_t C) {
  ops::layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
}

void CpuDevice::layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                   const float* inp, const float* weight, const float* mean,
                                   const float* rstd, int64_t N, int64_t C) {
  ops::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

void CpuDevice::attention_forward(float* out, MutableMatrix att, Matrix qkv, int64_t B, int64_t T,
                                  int64_t NH, int64_t hs) {
  if (!status_.is_ok()) return;
  const int64_t probabilities = B * NH * T * T;
  const float* q = gemm_operand(Operand::kA, qkv, B * T * 3 * NH * hs);
  TrackedBuffer fp32_probabilities;  // for a bf16 att: this call's only
  float* p = att.f32 != nullptr ? att.f32 : workspace_buffer(fp32_probabilities, probabilities);
  if (q == nullptr || p == nullptr) return;
  // A bf16 att keeps rounded probabilities, so P V reads them rounded too (as CUDA's).
  ops::attention_forward(out, p, q, B, T, NH, hs,
                         precision_ == GemmPrecision::kBf16 || att.bf16 != nullptr);
  if (att.bf16 != nullptr) ops::to_bf16(att.bf16, p, probabilities);  // exact: already rounded
}

void CpuDevice::attention_backward(float* dqkv, const float* dout, Matrix qkv, Matrix att,
                                   int64_t B, int64_t T, int64_t NH, int64_t hs) {
  if (!status_.is_ok()) return;
  const int64_t C = NH * hs;
  const float* q = gemm_operand(Operand::kA, qkv, B * T * 3 * C);
  TrackedBuffer p_operand;  // the probabilities widened or rounded: this call's only
  const float* p = gemm_operand(p_operand, att, B * NH * T * T);
  const float* dy = gemm_operand(Operand::kB, dout, B * T * C);
  if (q == nullptr || p == nullptr || dy == nullptr) return;
  ops::attention_backward(dqkv, dy, q, p, B, T, NH, hs, precision_ == GemmPrecision::kBf16);
}

void CpuDevice::gelu_forward(MutableMatrix out, Matrix inp, int64_t n) {
  with_stored(out, inp, [&](auto* o, const auto* i) { ops::gelu_forward(o, i, n); });
}

void CpuDevice::gelu_backward(float* dinp, Matrix inp, const float* dout, int64_t n) {
  with_stored(inp, [&](const auto* i) { ops::gelu_backward(dinp, i, dout, n); });
}

void CpuDevice::residual_forward(float* out, const float* a, const float* b, int64_t n) {
  ops::residual_forward(out, a, b, n);
}

void CpuDevice::residual_backward(float* da, float* db, const float* dout, int64_t n) {
  ops::residual_backward(da, db, dout, n);
}

void CpuDevice::embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                  const float* wpe, int64_t B, int64_t T, int64_t C) {
  ops::embedding_forward(out, tokens, wte, wpe, B, T, C);
}

void CpuDevice::embedding_backward(float* dwte, float* dwpe, const float* dout,
                                   const int32_t* tokens, int64_t B, int64_t T, int64_t C) {
  ops::embedding_backward(dwte, dwpe, dout, tokens, B, T, C);
}

void CpuDevice::embedding_forward_vocab_range(float* out, const int32_t* tokens, Matrix wte_shard,
                                              Matrix wpe, int64_t B, int64_t T, int64_t C,
                                              int64_t vocab_start, int64_t vocab_end) {
  if (!status_.is_ok()) return;
  if (Status types = check_table_types(wte_shard, wpe); !types.is_ok()) {
    status_ = types;
    return;
  }
  if (wte_shard.bf16 != nullptr) {
    ops::embedding_forward_vocab_range(out, tokens, wte_shard.bf16, wpe.bf16, B, T, C, vocab_start,
                                       vocab_end);
  } else {
    ops::embedding_forward_vocab_range(out, tokens, wte_shard.f32, wpe.f32, B, T, C, vocab_start,
                                       vocab_end);
  }
}

void CpuDevice::embedding_backward_vocab_range(float* dwte_shard, float* dwpe, const float* dout,
                                               const int32_t* tokens, int64_t B, int64_t T,
                                               int64_t C, int64_t vocab_start, int64_t vocab_end) {
  ops::embedding_backward_vocab_range(dwte_shard, dwpe, dout, tokens, B, T, C, vocab_start,
                                      vocab_end);
}

float CpuDevice::cross_entropy_forward(float* losses, const float* logits, const int32_t* targets,
                                       int64_t N, int64_t V) {
  return ops::cross_entropy_forward(losses, logits, targets, N, V);
}

void CpuDevice::cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets,
                                       int64_t N, int64_t V, float dloss_scale) {
  ops::cross_entropy_backward(dlogits, logits, targets, N, V, dloss_scale);
}

void CpuDevice::vocab_parallel_local_max(float* row_max, const float* logits, int64_t N,
                                         int64_t V_local) {
  ops::vocab_parallel_local_max(row_max, logits, N, V_local);
}

void CpuDevice::vocab_parallel_local_sum_exp(float* row_sum_exp, const float* logits,
                                             const float* global_max, int64_t N, int64_t V_local) {
  ops::vocab_parallel_local_sum_exp(row_sum_exp, logits, global_max, N, V_local);
}

void CpuDevice::vocab_parallel_local_target_logit(float* target_logit, const float* logits,
                                                  const int32_t* targets, int64_t N,
                                                  int64_t V_local, int64_t vocab_start) {
  ops::vocab_parallel_local_target_logit(target_logit, logits, targets, N, V_local, vocab_start);
}

float CpuDevice::vocab_parallel_loss(float* losses, const float* global_max,
                                     const float* global_sum_exp, const float* global_target_logit,
                                     int64_t N) {
  return ops::vocab_parallel_loss(losses, global_max, global_sum_exp, global_target_logit, N);
}

void CpuDevice::vocab_parallel_backward(float* dlogits, const float* logits, const int32_t* targets,
                                        const float* global_max, const float* global_sum_exp,
                                        int64_t N, int64_t V_local, int64_t vocab_start,
                                        float dloss_scale) {
  ops::vocab_parallel_backward(dlogits, logits, targets, global_max, global_sum_exp, N, V_local,
                               vocab_start, dloss_scale);
}

float CpuDevice::mean_square_loss_forward(const float* y, int64_t n) {
  return ops::mean_square_loss_forward(y, n);
}

void CpuDevice::mean_square_loss_backward(float* dy, const float* y, int64_t n, float dloss_scale) {
  ops::mean_square_loss_backward(dy, y, n, dloss_scale);
}

void CpuDevice::adamw_update(float* params, const float* grads, float* m, float* v, int64_t n,
                             const ops::AdamWConfig& config, int64_t step, uint16_t* params_bf16) {
  ops::adamw_update(params, grads, m, v, n, config, step);
  if (params_bf16 != nullptr) ops::to_bf16(params_bf16, params, n);
}

void CpuDevice::adamw_update(float* params, const uint16_t* grads, float* m, float* v, int64_t n,
                             const ops::AdamWConfig& config, int64_t step, uint16_t* params_bf16) {
  ops::adamw_update(params, grads, m, v, n, config, step);
  if (params_bf16 != nullptr) ops::to_bf16(params_bf16, params, n);
}

double CpuDevice::sum_of_squares(const float* x, int64_t n) { return ops::sum_of_squares(x, n); }

double CpuDevice::sum_of_squares(const uint16_t* x, int64_t n) {
  return ops::sum_of_squares(x, n);
}

void CpuDevice::scale(float* x, int64_t n, float factor) { ops::scale(x, n, factor); }

}  // namespace partrain::runner
