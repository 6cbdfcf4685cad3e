#include "runner/device/isolated_cpu_device.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string_view>

#include "core/log.h"

namespace partrain::runner {
namespace {

constexpr size_t kAddressSpaceBytes = size_t{1} << 40;  // 1 TiB of addresses, none committed

}  // namespace

// The host pointers behind one op's arguments. The first argument that is not inside a live
// buffer of the device fails the device (its status(), kept like a CUDA error) and the op is
// skipped. Null stays null: several ops take optional arguments (a bias, a gradient).
class IsolatedCpuDevice::Arguments {
 public:
  Arguments(IsolatedCpuDevice& device, std::string_view op) : device_(device), op_(op) {}

  template <class T>
  T* operator()(T* pointer, int64_t count, std::string_view name) {
    if (pointer == nullptr || !ok()) return pointer;
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(count, 0)) * sizeof(T);
    void* host = device_.memory_->resolve(pointer, bytes);
    if (host == nullptr) {
      device_.fail(fmt::format(
          "{}: its argument {} ({}, {} bytes) is not inside a live buffer of the isolated "
          "device ({}): pass device memory from its allocator, in bounds",
          op_, name, fmt::ptr(pointer), bytes,
          device_.memory_->contains(pointer) ? "a freed buffer, or past a buffer's end"
                                             : "a host pointer"));
    }
    return static_cast<T*>(host);
  }
  // A matrix operand's host pointer, whichever type it is stored in.
  Matrix matrix(Matrix x, int64_t count, std::string_view name) {
    if (x.bf16 != nullptr) return (*this)(x.bf16, count, name);
    return (*this)(x.f32, count, name);
  }
  MutableMatrix mutable_matrix(MutableMatrix x, int64_t count, std::string_view name) {
    if (x.bf16 != nullptr) return (*this)(x.bf16, count, name);
    return (*this)(x.f32, count, name);
  }
  bool ok() const { return device_.status_.is_ok(); }

 private:
  IsolatedCpuDevice& device_;
  std::string_view op_;
};

StatusOr<std::unique_ptr<IsolatedCpuDevice>> IsolatedCpuDevice::create(CpuDeviceOptions options) {
  ASSIGN_OR_RETURN(std::unique_ptr<IsolatedMemory> memory,
                   IsolatedMemory::reserve(kAddressSpaceBytes));
  install_isolated_fault_report();
  return std::unique_ptr<IsolatedCpuDevice>(new IsolatedCpuDevice(options, std::move(memory)));
}

IsolatedCpuDevice::IsolatedCpuDevice(CpuDeviceOptions options,
                                     std::unique_ptr<IsolatedMemory> memory)
    : cpu_(options), memory_(memory.get()), allocator_(std::move(memory)) {}

std::string IsolatedCpuDevice::name() const {
  // "cpu-isolated (OpenBLAS, 1 thread)": the CPU device's description under this device's name.
  const std::string cpu = cpu_.name();
  return "cpu-isolated" + cpu.substr(cpu.find(' '));
}

StatusOr<Device::MemoryInfo> IsolatedCpuDevice::memory_info() const {
  const uint64_t total = memory_->reserved_bytes();
  return MemoryInfo{total - memory_->live_bytes(), total};
}

void IsolatedCpuDevice::fail(std::string message) {
  if (!status_.is_ok()) return;
  log::error("{}", message);
  status_ = failed("{}", message);
}

void IsolatedCpuDevice::upload(void* device_destination, const void* host_source, size_t bytes) {
  if (!status_.is_ok() || bytes == 0) return;
  if (memory_->contains(host_source)) {
    return fail(fmt::format("upload: its host source {} is isolated device memory: copy "
                            "between device buffers with copy()",
                            fmt::ptr(host_source)));
  }
  auto* destination =
      Arguments(*this, "upload")(static_cast<unsigned char*>(device_destination),
                                 static_cast<int64_t>(bytes), "device_destination");
  if (destination != nullptr) cpu_.upload(destination, host_source, bytes);
}

void IsolatedCpuDevice::download(void* host_destination, const void* device_source,
                                 size_t bytes) {
  if (!status_.is_ok() || bytes == 0) return;
  if (memory_->contains(host_destination)) {
    return fail(fmt::format("download: its host destination {} is isolated device memory: "
                            "copy between device buffers with copy()",
                            fmt::ptr(host_destination)));
  }
  const auto* source =
      Arguments(*this, "download")(static_cast<const unsigned char*>(device_source),
                                   static_cast<int64_t>(bytes), "device_source");
  if (source != nullptr) cpu_.download(host_destination, source, bytes);
}

void IsolatedCpuDevice::fill(float* x, int64_t n, float value) {
  Arguments on_host(*this, "fill");
  float* hx = on_host(x, n, "x");
  if (on_host.ok()) cpu_.fill(hx, n, value);
}

void IsolatedCpuDevice::copy(float* destination, const float* source, int64_t n) {
  Arguments on_host(*this, "copy");
  float* d = on_host(destination, n, "destination");
  const float* s = on_host(source, n, "source");
  if (on_host.ok()) cpu_.copy(d, s, n);
}

void IsolatedCpuDevice::to_bf16(uint16_t* destination, const float* source, int64_t n) {
  Arguments on_host(*this, "to_bf16");
  uint16_t* d = on_host(destination, n, "destination");
  const float* s = on_host(source, n, "source");
  if (on_host.ok()) cpu_.to_bf16(d, s, n);
}

void IsolatedCpuDevice::from_bf16(float* destination, const uint16_t* source, int64_t n) {
  Arguments on_host(*this, "from_bf16");
  float* d = on_host(destination, n, "destination");
  const uint16_t* s = on_host(source, n, "source");
  if (on_host.ok()) cpu_.from_bf16(d, s, n);
}

void IsolatedCpuDevice::store_bf16(uint16_t* destination, float* values, int64_t n) {
  Arguments on_host(*this, "store_bf16");
  uint16_t* d = on_host(destination, n, "destination");
  float* v = on_host(values, n, "values");
  if (on_host.ok()) cpu_.store_bf16(d, v, n);
}

void IsolatedCpuDevice::accumulate_bf16(uint16_t* sum, const float* x, int64_t n) {
  Arguments on_host(*this, "accumulate_bf16");
  uint16_t* s = on_host(sum, n, "sum");
  const float* hx = on_host(x, n, "x");
  if (on_host.ok()) cpu_.accumulate_bf16(s, hx, n);
}

void IsolatedCpuDevice::zero_bf16(uint16_t* x, int64_t n) {
  Arguments on_host(*this, "zero_bf16");
  uint16_t* hx = on_host(x, n, "x");
  if (on_host.ok()) cpu_.zero_bf16(hx, n);
}

void IsolatedCpuDevice::copy_bf16(uint16_t* destination, const uint16_t* source, int64_t n) {
  Arguments on_host(*this, "copy_bf16");
  uint16_t* d = on_host(destination, n, "destination");
  const uint16_t* s = on_host(source, n, "source");
  if (on_host.ok()) cpu_.copy_bf16(d, s, n);
}

void IsolatedCpuDevice::matmul_forward(MutableMatrix out, Matrix inp, Matrix weight,
                                       const float* bias, int64_t N, int64_t C, int64_t OC) {
  Arguments on_host(*this, "matmul_forward");
  const MutableMatrix o = on_host.mutable_matrix(out, N * OC, "out");
  const Matrix i = on_host.matrix(inp, N * C, "inp");
  const Matrix w = on_host.matrix(weight, OC * C, "weight");
  const float* b = on_host(bias, OC, "bias");
  if (on_host.ok()) cpu_.matmul_forward(o, i, w, b, N, C, OC);
}

void IsolatedCpuDevice::matmul_backward(float* dinp, MutableMatrix dweight, float* dbias,
                                        const float* dout, Matrix inp, Matrix weight, int64_t N,
                                        int64_t C, int64_t OC) {
  Arguments on_host(*this, "matmul_backward");
  float* di = on_host(dinp, N * C, "dinp");
  const MutableMatrix dw = on_host.mutable_matrix(dweight, OC * C, "dweight");
  float* db = on_host(dbias, OC, "dbias");
  const float* dout_h = on_host(dout, N * OC, "dout");
  const Matrix i = on_host.matrix(inp, N * C, "inp");
  const Matrix w = on_host.matrix(weight, OC * C, "weight");
  if (on_host.ok()) cpu_.matmul_backward(di, dw, db, dout_h, i, w, N, C, OC);
}

void IsolatedCpuDevice::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                          const float* weight, const float* bias, int64_t N,
                                          int64_t C) {
  Arguments on_host(*this, "layernorm_forward");
  float* o = on_host(out, N * C, "out");
  float* m = on_host(mean, N, "mean");
  float* r = on_host(rstd, N, "rstd");
  const float* i = on_host(inp, N * C, "inp");
  const float* w = on_host(weight, C, "weight");
  const float* b = on_host(bias, C, "bias");
  if (on_host.ok()) cpu_.layernorm_forward(o, m, r, i, w, b, N, C);
}

void IsolatedCpuDevice::layernorm_backward(float* dinp, float* dweight, float* dbias,
                                           const float* dout, const float* inp,
                                           const float* weight, const float* mean,
                                           const float* rstd, int64_t N, int64_t C) {
  Arguments on_host(*this, "layernorm_backward");
  float* di = on_host(dinp, N * C, "dinp");
  float* dw = on_host(dweight, C, "dweight");
  float* db = on_host(dbias, C, "dbias");
  const float* d = on_host(dout, N * C, "dout");
  const float* i = on_host(inp, N * C, "inp");
  const float* w = on_host(weight, C, "weight");
  const float* m = on_host(mean, N, "mean");
  const float* r = on_host(rstd, N, "rstd");
  if (on_host.ok()) cpu_.layernorm_backward(di, dw, db, d, i, w, m, r, N, C);
}

void IsolatedCpuDevice::attention_forward(float* out, MutableMatrix att, Matrix qkv, int64_t B,
                                          int64_t T, int64_t NH, int64_t hs) {
  Arguments on_host(*this, "attention_forward");
  const int64_t C = NH * hs;
  float* o = on_host(out, B * T * C, "out");
  const MutableMatrix a = on_host.mutable_matrix(att, B * NH * T * T, "att");
  const Matrix q = on_host.matrix(qkv, B * T * 3 * C, "qkv");
  if (on_host.ok()) cpu_.attention_forward(o, a, q, B, T, NH, hs);
}

void IsolatedCpuDevice::attention_backward(float* dqkv, const float* dout, Matrix qkv, Matrix att,
                                           int64_t B, int64_t T, int64_t NH, int64_t hs) {
  Arguments on_host(*this, "attention_backward");
  const int64_t C = NH * hs;
  float* dq = on_host(dqkv, B * T * 3 * C, "dqkv");
  const float* d = on_host(dout, B * T * C, "dout");
  const Matrix q = on_host.matrix(qkv, B * T * 3 * C, "qkv");
  const Matrix a = on_host.matrix(att, B * NH * T * T, "att");
  if (on_host.ok()) cpu_.attention_backward(dq, d, q, a, B, T, NH, hs);
}

void IsolatedCpuDevice::gelu_forward(MutableMatrix out, Matrix inp, int64_t n) {
  Arguments on_host(*this, "gelu_forward");
  const MutableMatrix o = on_host.mutable_matrix(out, n, "out");
  const Matrix i = on_host.matrix(inp, n, "inp");
  if (on_host.ok()) cpu_.gelu_forward(o, i, n);
}

void IsolatedCpuDevice::gelu_backward(float* dinp, Matrix inp, const float* dout, int64_t n) {
  Arguments on_host(*this, "gelu_backward");
  float* di = on_host(dinp, n, "dinp");
  const Matrix i = on_host.matrix(inp, n, "inp");
  const float* d = on_host(dout, n, "dout");
  if (on_host.ok()) cpu_.gelu_backward(di, i, d, n);
}

void IsolatedCpuDevice::residual_forward(float* out, const float* a, const float* b, int64_t n) {
  Arguments on_host(*this, "residual_forward");
  float* o = on_host(out, n, "out");
  const float* ha = on_host(a, n, "a");
  const float* hb = on_host(b, n, "b");
  if (on_host.ok()) cpu_.residual_forward(o, ha, hb, n);
}

void IsolatedCpuDevice::residual_backward(float* da, float* db, const float* dout, int64_t n) {
  Arguments on_host(*this, "residual_backward");
  float* hda = on_host(da, n, "da");
  float* hdb = on_host(db, n, "db");
  const float* d = on_host(dout, n, "dout");
  if (on_host.ok()) cpu_.residual_backward(hda, hdb, d, n);
}

// The full-vocabulary embedding's table size is not among its arguments: wte is checked for one
// row, and the CPU op's own bounds (tokens below the vocabulary) do the rest.
void IsolatedCpuDevice::embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                          const float* wpe, int64_t B, int64_t T, int64_t C) {
  Arguments on_host(*this, "embedding_forward");
  float* o = on_host(out, B * T * C, "out");
  const int32_t* t = on_host(tokens, B * T, "tokens");
  const float* e = on_host(wte, C, "wte");
  const float* p = on_host(wpe, T * C, "wpe");
  if (on_host.ok()) cpu_.embedding_forward(o, t, e, p, B, T, C);
}

void IsolatedCpuDevice::embedding_backward(float* dwte, float* dwpe, const float* dout,
                                           const int32_t* tokens, int64_t B, int64_t T,
                                           int64_t C) {
  Arguments on_host(*this, "embedding_backward");
  float* de = on_host(dwte, C, "dwte");
  float* dp = on_host(dwpe, T * C, "dwpe");
  const float* d = on_host(dout, B * T * C, "dout");
  const int32_t* t = on_host(tokens, B * T, "tokens");
  if (on_host.ok()) cpu_.embedding_backward(de, dp, d, t, B, T, C);
}

void IsolatedCpuDevice::embedding_forward_vocab_range(float* out, const int32_t* tokens,
                                                      Matrix wte_shard, Matrix wpe, int64_t B,
                                                      int64_t T, int64_t C, int64_t vocab_start,
                                                      int64_t vocab_end) {
  Arguments on_host(*this, "embedding_forward_vocab_range");
  float* o = on_host(out, B * T * C, "out");
  const int32_t* t = on_host(tokens, B * T, "tokens");
  const Matrix e = on_host.matrix(wte_shard, (vocab_end - vocab_start) * C, "wte_shard");
  const Matrix p = on_host.matrix(wpe, T * C, "wpe");
  if (on_host.ok()) cpu_.embedding_forward_vocab_range(o, t, e, p, B, T, C, vocab_start, vocab_end);
}

void IsolatedCpuDevice::embedding_backward_vocab_range(float* dwte_shard, float* dwpe,
                                                       const float* dout, const int32_t* tokens,
                                                       int64_t B, int64_t T, int64_t C,
                                                       int64_t vocab_start, int64_t vocab_end) {
  Arguments on_host(*this, "embedding_backward_vocab_range");
  float* de = on_host(dwte_shard, (vocab_end - vocab_start) * C, "dwte_shard");
  float* dp = on_host(dwpe, T * C, "dwpe");
  const float* d = on_host(dout, B * T * C, "dout");
  const int32_t* t = on_host(tokens, B * T, "tokens");
  if (on_host.ok()) {
    cpu_.embedding_backward_vocab_range(de, dp, d, t, B, T, C, vocab_start, vocab_end);
  }
}

float IsolatedCpuDevice::cross_entropy_forward(float* losses, const float* logits,
                                               const int32_t* targets, int64_t N, int64_t V) {
  Arguments on_host(*this, "cross_entropy_forward");
  float* l = on_host(losses, N, "losses");
  const float* x = on_host(logits, N * V, "logits");
  const int32_t* t = on_host(targets, N, "targets");
  if (!on_host.ok()) return std::numeric_limits<float>::quiet_NaN();
  return cpu_.cross_entropy_forward(l, x, t, N, V);
}

void IsolatedCpuDevice::cross_entropy_backward(float* dlogits, const float* logits,
                                               const int32_t* targets, int64_t N, int64_t V,
                                               float dloss_scale) {
  Arguments on_host(*this, "cross_entropy_backward");
  float* d = on_host(dlogits, N * V, "dlogits");
  const float* x = on_host(logits, N * V, "logits");
  const int32_t* t = on_host(targets, N, "targets");
  if (on_host.ok()) cpu_.cross_entropy_backward(d, x, t, N, V, dloss_scale);
}

void IsolatedCpuDevice::vocab_parallel_local_max(float* row_max, const float* logits, int64_t N,
                                                 int64_t V_local) {
  Arguments on_host(*this, "vocab_parallel_local_max");
  float* m = on_host(row_max, N, "row_max");
  const float* x = on_host(logits, N * V_local, "logits");
  if (on_host.ok()) cpu_.vocab_parallel_local_max(m, x, N, V_local);
}

void IsolatedCpuDevice::vocab_parallel_local_sum_exp(float* row_sum_exp, const float* logits,
                                                     const float* global_max, int64_t N,
                                                     int64_t V_local) {
  Arguments on_host(*this, "vocab_parallel_local_sum_exp");
  float* s = on_host(row_sum_exp, N, "row_sum_exp");
  const float* x = on_host(logits, N * V_local, "logits");
  const float* m = on_host(global_max, N, "global_max");
  if (on_host.ok()) cpu_.vocab_parallel_local_sum_exp(s, x, m, N, V_local);
}

void IsolatedCpuDevice::vocab_parallel_local_target_logit(float* target_logit,
                                                          const float* logits,
                                                          const int32_t* targets, int64_t N,
                                                          int64_t V_local, int64_t vocab_start) {
  Arguments on_host(*this, "vocab_parallel_local_target_logit");
  float* o = on_host(target_logit, N, "target_logit");
  const float* x = on_host(logits, N * V_local, "logits");
  const int32_t* t = on_host(targets, N, "targets");
  if (on_host.ok()) cpu_.vocab_parallel_local_target_logit(o, x, t, N, V_local, vocab_start);
}

float IsolatedCpuDevice::vocab_parallel_loss(float* losses, const float* global_max,
                                             const float* global_sum_exp,
                                             const float* global_target_logit, int64_t N) {
  Arguments on_host(*this, "vocab_parallel_loss");
  float* l = on_host(losses, N, "losses");
  const float* m = on_host(global_max, N, "global_max");
  const float* s = on_host(global_sum_exp, N, "global_sum_exp");
  const float* t = on_host(global_target_logit, N, "global_target_logit");
  if (!on_host.ok()) return std::numeric_limits<float>::quiet_NaN();
  return cpu_.vocab_parallel_loss(l, m, s, t, N);
}

void IsolatedCpuDevice::vocab_parallel_backward(float* dlogits, const float* logits,
                                                const int32_t* targets, const float* global_max,
                                                const float* global_sum_exp, int64_t N,
                                                int64_t V_local, int64_t vocab_start,
                                                float dloss_scale) {
  Arguments on_host(*this, "vocab_parallel_backward");
  float* d = on_host(dlogits, N * V_local, "dlogits");
  const float* x = on_host(logits, N * V_local, "logits");
  const int32_t* t = on_host(targets, N, "targets");
  const float* m = on_host(global_max, N, "global_max");
  const float* s = on_host(global_sum_exp, N, "global_sum_exp");
  if (on_host.ok()) {
    cpu_.vocab_parallel_backward(d, x, t, m, s, N, V_local, vocab_start, dloss_scale);
  }
}

float IsolatedCpuDevice::mean_square_loss_forward(const float* y, int64_t n) {
  Arguments on_host(*this, "mean_square_loss_forward");
  const float* hy = on_host(y, n, "y");
  if (!on_host.ok()) return std::numeric_limits<float>::quiet_NaN();
  return cpu_.mean_square_loss_forward(hy, n);
}

void IsolatedCpuDevice::mean_square_loss_backward(float* dy, const float* y, int64_t n,
                                                  float dloss_scale) {
  Arguments on_host(*this, "mean_square_loss_backward");
  float* d = on_host(dy, n, "dy");
  const float* hy = on_host(y, n, "y");
  if (on_host.ok()) cpu_.mean_square_loss_backward(d, hy, n, dloss_scale);
}

template <typename Value>
void IsolatedCpuDevice::checked_adamw(float* params, const Value* grads, float* m, float* v,
                                      int64_t n, const ops::AdamWConfig& config, int64_t step,
                                      uint16_t* params_bf16) {
  Arguments on_host(*this, "adamw_update");
  float* p = on_host(params, n, "params");
  const Value* g = on_host(grads, n, "grads");
  float* hm = on_host(m, n, "m");
  float* hv = on_host(v, n, "v");
  uint16_t* pb = on_host(params_bf16, n, "params_bf16");
  if (on_host.ok()) cpu_.adamw_update(p, g, hm, hv, n, config, step, pb);
}

void IsolatedCpuDevice::adamw_update(float* params, const float* grads, float* m, float* v,
                                     int64_t n, const ops::AdamWConfig& config, int64_t step,
                                     uint16_t* params_bf16) {
  checked_adamw(params, grads, m, v, n, config, step, params_bf16);
}

void IsolatedCpuDevice::adamw_update(float* params, const uint16_t* grads, float* m, float* v,
                                     int64_t n, const ops::AdamWConfig& config, int64_t step,
                                     uint16_t* params_bf16) {
  checked_adamw(params, grads, m, v, n, config, step, params_bf16);
}

template <typename Value>
double IsolatedCpuDevice::checked_sum_of_squares(const Value* x, int64_t n) {
  Arguments on_host(*this, "sum_of_squares");
  const Value* hx = on_host(x, n, "x");
  if (!on_host.ok()) return std::numeric_limits<double>::quiet_NaN();
  return cpu_.sum_of_squares(hx, n);
}

double IsolatedCpuDevice::sum_of_squares(const float* x, int64_t n) {
  return checked_sum_of_squares(x, n);
}

double IsolatedCpuDevice::sum_of_squares(const uint16_t* x, int64_t n) {
  return checked_sum_of_squares(x, n);
}

void IsolatedCpuDevice::scale(float* x, int64_t n, float factor) {
  Arguments on_host(*this, "scale");
  float* hx = on_host(x, n, "x");
  if (on_host.ok()) cpu_.scale(hx, n, factor);
}

}  // namespace partrain::runner
