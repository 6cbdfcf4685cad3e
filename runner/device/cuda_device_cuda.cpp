#include <cuda_runtime.h>
#include <fmt/format.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "runner/device/cublas_library.h"
#include "runner/device/cuda_device.h"
#include "runner/device/cuda_kernels.h"
#include "runner/device/cuda_memory.h"
#include "runner/device/gemm_benchmark.h"

namespace partrain::runner {
namespace {

namespace kernels = cuda_kernels;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
// cuBLAS's workspace, given from the tracked allocator so it is counted; 32 MiB is what NVIDIA
// recommends for Hopper (cuBLAS docs, cublasSetWorkspace), and more than Ampere needs.
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;
// Pending GEMM timings are settled (without waiting) once this many accumulate.
constexpr size_t kSettleGemmTimesAt = 256;

Status cuda_status(cudaError_t error, const char* call, const char* file, int line, int ordinal) {
  if (error == cudaSuccess) return Status::ok();
  return failed("{} failed: {} ({}) ({}:{}, cuda:{})", call, cudaGetErrorString(error),
                cudaGetErrorName(error), file, line, ordinal);
}

Status cublas_status(const CublasLibrary& cublas, cublasStatus_t status, const char* call,
                     const char* file, int line, int ordinal) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::ok();
  return failed("{} failed: {} ({}) ({}:{}, cuda:{})", call, cublas.get_status_string(status),
                cublas.get_status_name(status), file, line, ordinal);
}

}  // namespace
}  // namespace partrain::runner

// The CHECK family of the CUDA device: the Status of one CUDA or cuBLAS call, naming the call, the
// error, file:line and the device. Ops pass it to keep() (the first failure becomes status());
// Status-returning helpers to RETURN_IF_ERROR.
#define CUDA_CHECK(call) \
  ::partrain::runner::cuda_status((call), #call, __FILE__, __LINE__, options_.ordinal)
#define CUBLAS_CHECK(call)                                                               \
  ::partrain::runner::cublas_status(*cublas_library_, (call), #call, __FILE__, __LINE__, \
                                    options_.ordinal)

namespace partrain::runner {
namespace {

std::string cuda_visible_devices() {
  const char* value = std::getenv("CUDA_VISIBLE_DEVICES");
  return value == nullptr ? "unset" : fmt::format("'{}'", value);
}

// cuBLAS's dimensions are int (the _64 variants aside); a larger one is refused, not truncated.
Status check_gemm_dims(std::initializer_list<int64_t> dims) {
  for (const int64_t dim : dims) {
    if (dim < 0 || dim > INT_MAX) {
      return invalid_argument("GEMM dimension {} does not fit cuBLAS's int", dim);
    }
  }
  return Status::ok();
}

cublasOperation_t operation(bool transpose) { return transpose ? CUBLAS_OP_T : CUBLAS_OP_N; }

}  // namespace

StatusOr<int> visible_cuda_devices() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    return failed("cudaGetDeviceCount failed: {} ({}); CUDA_VISIBLE_DEVICES is {}",
                  cudaGetErrorString(error), cudaGetErrorName(error), cuda_visible_devices());
  }
  return count;
}

StatusOr<std::unique_ptr<Device>> create_cuda_device(const CudaDeviceOptions& options) {
  if (options.ordinal < 0) {
    return invalid_argument("a CUDA device ordinal is 0 or more (got {})", options.ordinal);
  }
  ASSIGN_OR_RETURN(const int count, visible_cuda_devices());
  if (count == 0) {
    return failed("cudaGetDeviceCount found no CUDA device; CUDA_VISIBLE_DEVICES is {}",
                  cuda_visible_devices());
  }
  if (options.ordinal >= count) {
    return invalid_argument(
        "cuda:{} asked for, but cudaGetDeviceCount sees {} device{} "
        "(cuda:0 to cuda:{}); CUDA_VISIBLE_DEVICES is {}",
        options.ordinal, count, count == 1 ? "" : "s", count - 1, cuda_visible_devices());
  }
  std::unique_ptr<CudaDevice> device(new CudaDevice(options));
  RETURN_IF_ERROR(device->initialise());
  return std::unique_ptr<Device>(std::move(device));
}

CudaDevice::CudaDevice(CudaDeviceOptions options)
    : options_(options),
      allocator_(std::make_unique<CudaMemory>(options.ordinal)),
      scratch_(static_cast<size_t>(Scratch::kCount)) {}

Status CudaDevice::initialise() {
  RETURN_IF_ERROR(CUDA_CHECK(cudaSetDevice(options_.ordinal)));
  cudaDeviceProp properties{};
  RETURN_IF_ERROR(CUDA_CHECK(cudaGetDeviceProperties(&properties, options_.ordinal)));
  cudaStream_t stream = nullptr;
  // Non-blocking: the legacy default stream (other libraries' work) never orders it.
  RETURN_IF_ERROR(CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)));
  stream_ = stream;
  ASSIGN_OR_RETURN(cublas_library_, cublas_library());
  cublasHandle_t handle = nullptr;
  RETURN_IF_ERROR(CUBLAS_CHECK(cublas_library_->create(&handle)));
  cublas_ = handle;
  RETURN_IF_ERROR(CUBLAS_CHECK(cublas_library_->set_stream(cublas_, stream_)));
  // Default math: fp32 GEMMs stay fp32 (TF32 only with CUBLAS_TF32_TENSOR_OP_MATH or a _FAST_TF32
  // compute type, neither used), which the 1e-5 equivalence with the CPU needs; bf16 operands
  // take the tensor cores anyway. No reduced-precision reductions: a GEMM writing bf16 (the weight
  // gradient, beta 1) that splits k sums its parts in fp32 and rounds once, as the CPU does
  // (PyTorch's allow_bf16_reduced_precision_reduction = False).
  RETURN_IF_ERROR(CUBLAS_CHECK(cublas_library_->set_math_mode(
      cublas_, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                         CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION))));
  // After cublasSetStream, which resets a workspace set before it.
  ASSIGN_OR_RETURN(cublas_workspace_,
                   allocator_.allocate(kCublasWorkspaceBytes, memory::Category::kWorkspace));
  RETURN_IF_ERROR(CUBLAS_CHECK(cublas_library_->set_workspace(cublas_, cublas_workspace_.data(),
                                                              cublas_workspace_.bytes())));
  ASSIGN_OR_RETURN(reduction_,
                   allocator_.allocate((kernels::kSumOfSquaresPartials + 1) * sizeof(double),
                                       memory::Category::kWorkspace));
  int version = 0;
  RETURN_IF_ERROR(CUBLAS_CHECK(cublas_library_->get_version(cublas_, &version)));
  // CUBLAS_VERSION is major * 10000 + minor * 100 + patch since cuBLAS 11.
  name_ = fmt::format("cuda:{} ({}, {} GEMMs, cuBLAS {}.{}.{})", options_.ordinal, properties.name,
                      options_.precision == GemmPrecision::kBf16 ? "bf16" : "fp32", version / 10000,
                      version / 100 % 100, version % 100);
  return Status::ok();
}

CudaDevice::~CudaDevice() {
  // Teardown reports nothing: a failure here was (or will never be) seen by status().
  (void)cudaSetDevice(options_.ordinal);
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  for (const std::vector<EventPair>* events : {&pending_gemms_, &spare_events_}) {
    for (const EventPair& pair : *events) {
      (void)cudaEventDestroy(pair.start);
      (void)cudaEventDestroy(pair.stop);
    }
  }
  if (cublas_ != nullptr) (void)cublas_library_->destroy(cublas_);
  // The buffers go back to the cache, and the cache to the GPU (cudaFree), as the members are
  // destroyed, after the stream has drained.
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  (void)cudaGetLastError();
}

bool CudaDevice::keep(const Status& status) const {
  if (status.is_ok()) return true;
  if (first_error_.is_ok()) {
    first_error_ = status;
    // Ops cannot return it, so it is also said at once, where a log of the run shows it.
    fmt::print(stderr, "partrain: {}: {}; the device's later ops are skipped\n", name_,
               status.message());
  }
  return false;
}

bool CudaDevice::begin_op() {
  if (!first_error_.is_ok()) return false;
  return keep(CUDA_CHECK(cudaSetDevice(options_.ordinal)));
}

StatusOr<void*> CudaDevice::scratch(Scratch slot, size_t bytes) {
  TrackedBuffer& buffer = scratch_[static_cast<size_t>(slot)];
  // A smaller one goes back to the cache: queued work still reading it runs first (stream order).
  RETURN_IF_ERROR(allocator_.grow(buffer, bytes, memory::Category::kWorkspace));
  return buffer.data();
}

// ---- memory and synchronisation -------------------------------------------------------------

void CudaDevice::synchronize() {
  if (!begin_op()) return;
  keep(CUDA_CHECK(cudaStreamSynchronize(stream_)));
}

void CudaDevice::upload(void* device_destination, const void* host_source, size_t bytes) {
  copy_and_wait(device_destination, host_source, bytes, /*to_device=*/true);
}

void CudaDevice::download(void* host_destination, const void* device_source, size_t bytes) {
  copy_and_wait(host_destination, device_source, bytes, /*to_device=*/false);
}

// On the compute stream, so a download sees the ops queued before it; then waited for, so the
// host buffer may be reused (upload) or read (download) on return.
void CudaDevice::copy_and_wait(void* destination, const void* source, size_t bytes,
                               bool to_device) {
  if (!begin_op() || bytes == 0) return;
  const cudaMemcpyKind kind = to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
  if (keep(CUDA_CHECK(cudaMemcpyAsync(destination, source, bytes, kind, stream_)))) {
    keep(CUDA_CHECK(cudaStreamSynchronize(stream_)));
  }
}

StatusOr<Device::MemoryInfo> CudaDevice::memory_info() const {
  RETURN_IF_ERROR(CUDA_CHECK(cudaSetDevice(options_.ordinal)));
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  RETURN_IF_ERROR(CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes)));
  return MemoryInfo{free_bytes, total_bytes};
}

void CudaDevice::fill(float* x, int64_t n, float value) {
  if (!begin_op()) return;
  keep(CUDA_CHECK(kernels::fill(stream_, x, n, value)));
}

void CudaDevice::to_bf16(uint16_t* destination, const float* source, int64_t n) {
  if (!begin_op() || n <= 0) return;
  keep(CUDA_CHECK(kernels::round_to_bf16(stream_, destination, source, n)));
}

void CudaDevice::store_bf16(uint16_t* destination, float* values, int64_t n) {
  if (!begin_op() || n <= 0) return;
  keep(CUDA_CHECK(kernels::store_bf16(stream_, destination, values, n)));
}

void CudaDevice::from_bf16(float* destination, const uint16_t* source, int64_t n) {
  if (!begin_op() || n <= 0) return;
  keep(CUDA_CHECK(kernels::widen_bf16(stream_, destination, source, n)));
}

void CudaDevice::accumulate_bf16(uint16_t* sum, const float* x, int64_t n) {
  if (!begin_op() || n <= 0) return;
  keep(CUDA_CHECK(kernels::accumulate_bf16(stream_, sum, x, n)));
}

void CudaDevice::zero_bf16(uint16_t* x, int64_t n) {
  if (!begin_op() || n <= 0) return;
  keep(CUDA_CHECK(cudaMemsetAsync(x, 0, static_cast<size_t>(n) * sizeof(uint16_t), stream_)));
}

void CudaDevice::copy_bf16(uint16_t* destination, const uint16_t* source, int64_t n) {
  if (!begin_op() || n <= 0) return;
  keep(CUDA_CHECK(cudaMemcpyAsync(destination, source,
                                  static_cast<size_t>(n) * sizeof(uint16_t),
                                  cudaMemcpyDeviceToDevice, stream_)));
}

void CudaDevice::copy(float* destination, const float* source, int64_t n) {
  if (!begin_op() || n <= 0) return;
  keep(CUDA_CHECK(cudaMemcpyAsync(destination, source, static_cast<size_t>(n) * sizeof(float),
                                  cudaMemcpyDeviceToDevice, stream_)));
}

// ---- GEMM timing ------------------------------------------------------------------------------

Status CudaDevice::timed_gemms(const std::function<Status()>& gemms, double flops) {
  EventPair pair;
  if (spare_events_.empty()) {
    RETURN_IF_ERROR(CUDA_CHECK(cudaEventCreate(&pair.start)));
    const Status created = CUDA_CHECK(cudaEventCreate(&pair.stop));
    if (!created.is_ok()) {
      (void)cudaEventDestroy(pair.start);
      return created;
    }
  } else {
    pair = spare_events_.back();
    spare_events_.pop_back();
  }
  Status status = CUDA_CHECK(cudaEventRecord(pair.start, stream_));
  if (status.is_ok()) status = gemms();
  if (status.is_ok()) status = CUDA_CHECK(cudaEventRecord(pair.stop, stream_));
  if (!status.is_ok()) {
    spare_events_.push_back(pair);
    return status;
  }
  pending_gemms_.push_back(pair);
  gemm_.flops += flops;
  if (pending_gemms_.size() >= kSettleGemmTimesAt) return settle_gemm_times(false);
  return Status::ok();
}

Status CudaDevice::settle_gemm_times(bool wait) const {
  size_t settled = 0;
  Status status;
  // Events on one stream complete in order: stop at the first unfinished pair.
  for (; settled < pending_gemms_.size(); ++settled) {
    const EventPair& pair = pending_gemms_[settled];
    const cudaError_t done = wait ? cudaEventSynchronize(pair.stop) : cudaEventQuery(pair.stop);
    if (done == cudaErrorNotReady) {
      // An answer, not a failure: cleared so that the next launcher's cudaGetLastError does not
      // take it for its own (as PyTorch clears it after its queries).
      (void)cudaGetLastError();
      break;
    }
    status = CUDA_CHECK(done);
    float milliseconds = 0.0f;
    if (status.is_ok()) {
      status = CUDA_CHECK(cudaEventElapsedTime(&milliseconds, pair.start, pair.stop));
    }
    if (!status.is_ok()) break;
    gemm_.seconds += static_cast<double>(milliseconds) / 1e3;
    spare_events_.push_back(pair);
  }
  pending_gemms_.erase(pending_gemms_.begin(),
                       pending_gemms_.begin() + static_cast<std::ptrdiff_t>(settled));
  return status;
}

Device::GemmTotals CudaDevice::gemm_totals() const {
  if (first_error_.is_ok() && !pending_gemms_.empty() &&
      keep(CUDA_CHECK(cudaSetDevice(options_.ordinal)))) {
    keep(settle_gemm_times(true));
  }
  return gemm_;
}

StatusOr<Device::PeakGemm> CudaDevice::measure_peak_gemm() {
  GemmBenchOptions options;
  options.shape = {8192, 8192, 8192};
  options.bf16 = options_.precision == GemmPrecision::kBf16;
  options.warmup_iters = 2;
  options.iters = 5;
  options.check_samples = 0;
  ASSIGN_OR_RETURN(GemmBenchResult result, run_gemm_bench(*this, options));
  // Its scratch (the 256 MiB fp32 product of a bf16 out) is the probe's, not the run's: given
  // back, so the run's workspace holds only what its own ops grow.
  for (TrackedBuffer& buffer : scratch_) buffer.reset();
  allocator_.reset_peaks();
  return PeakGemm{result.tflops * 1e3,
                  fmt::format("measured {} GEMM, {}", options.bf16 ? "bf16" : "fp32",
                              format_gemm_shape(options.shape))};
}

// ---- GEMMs ------------------------------------------------------------------------------------

// cuBLAS is column-major, partrain row-major. A row-major (r, c) array is, as it lies, the
// column-major (c, r) array of its transpose (same leading dimension c). So each row-major
// product Y = X1 X2 is computed as the column-major Y^T = X2^T X1^T, every operand read as it
// lies (op N) or transposed again (op T). The derivations are next to each call.
StatusOr<CudaDevice::GemmOperand> CudaDevice::gemm_operand(Scratch slot, Matrix x,
                                                          int64_t elements) {
  const bool bf16_gemm = options_.precision == GemmPrecision::kBf16;
  if (x.bf16 != nullptr) {
    if (bf16_gemm) return GemmOperand{x.bf16, CUDA_R_16BF};
    ASSIGN_OR_RETURN(void* widened, scratch(slot, static_cast<size_t>(elements) * sizeof(float)));
    RETURN_IF_ERROR(CUDA_CHECK(
        kernels::widen_bf16(stream_, static_cast<float*>(widened), x.bf16, elements)));
    return GemmOperand{widened, CUDA_R_32F};
  }
  if (!bf16_gemm) return GemmOperand{x.f32, CUDA_R_32F};
  // Rounded to bf16 in workspace; the GEMM accumulates in fp32. bf16-stored weights and
  // activations come as they lie (above); what is rounded here is fp32 operands such as the
  // gradients flowing back.
  ASSIGN_OR_RETURN(void* rounded, scratch(slot, static_cast<size_t>(elements) * 2));
  RETURN_IF_ERROR(CUDA_CHECK(kernels::round_to_bf16(stream_, rounded, x.f32, elements)));
  return GemmOperand{rounded, CUDA_R_16BF};
}

Status CudaDevice::matmul_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                               GemmOperand a, int64_t lda, GemmOperand b, int64_t ldb, float beta,
                               void* c, int c_type, int64_t ldc) {
  RETURN_IF_ERROR(check_gemm_dims({m, n, k, lda, ldb, ldc}));
  const float alpha = 1.0f;
  return CUBLAS_CHECK(cublas_library_->gemm_ex(
      cublas_, operation(transpose_a), operation(transpose_b), static_cast<int>(m),
      static_cast<int>(n), static_cast<int>(k), &alpha, a.data, static_cast<cudaDataType_t>(a.type),
      static_cast<int>(lda), b.data, static_cast<cudaDataType_t>(b.type), static_cast<int>(ldb),
      &beta, c, static_cast<cudaDataType_t>(c_type), static_cast<int>(ldc), CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
}

Status CudaDevice::attention_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                                  int64_t k, float alpha, GemmOperand a, int64_t lda,
                                  int64_t stride_a, GemmOperand b, int64_t ldb, int64_t stride_b,
                                  float beta, float* c, int64_t ldc, int64_t stride_c,
                                  int64_t batch) {
  RETURN_IF_ERROR(check_gemm_dims({m, n, k, lda, ldb, ldc, batch}));
  // Both operands are of one type (gemm_operand follows the precision): fp32 with TF32 off, for
  // the 1e-5 equivalence with the CPU, or bf16 on the tensor cores with fp32 accumulation.
  return CUBLAS_CHECK(cublas_library_->gemm_strided_batched_ex(
      cublas_, operation(transpose_a), operation(transpose_b), static_cast<int>(m),
      static_cast<int>(n), static_cast<int>(k), &alpha, a.data, static_cast<cudaDataType_t>(a.type),
      static_cast<int>(lda), stride_a, b.data, static_cast<cudaDataType_t>(b.type),
      static_cast<int>(ldb), stride_b, &beta, c, CUDA_R_32F, static_cast<int>(ldc), stride_c,
      static_cast<int>(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void CudaDevice::matmul_forward(MutableMatrix out, Matrix inp, Matrix weight, const float* bias,
                                int64_t N, int64_t C, int64_t OC) {
  if (!begin_op() || N <= 0 || OC <= 0) return;
  const double flops =
      2.0 * static_cast<double>(N) * static_cast<double>(C) * static_cast<double>(OC);
  keep(timed_gemms(
      [&]() -> Status {
        // A bf16 out: the fp32 product in scratch, then one pass adds the bias and rounds (as the
        // CPU's fp32 op and to_bf16; no fp32 copy for the caller to round).
        float* product = out.f32;
        if (out.bf16 != nullptr) {
          ASSIGN_OR_RETURN(void* memory,
                           scratch(Scratch::kProduct, static_cast<size_t>(N * OC) * sizeof(float)));
          product = static_cast<float*>(memory);
        }
        if (C <= 0) {  // an empty product; cuBLAS refuses a leading dimension of 0
          RETURN_IF_ERROR(CUDA_CHECK(kernels::fill(stream_, product, N * OC, 0.0f)));
        } else {
          // out (N, OC) = inp (N, C) @ W^T with W (OC, C). Column-major:
          //   out^T (OC, N) = W (OC, C) inp^T (C, N);
          // W is the transpose of weight as it lies (W^T, (C, OC), ld C): op T, lda C;
          // inp^T is inp as it lies ((C, N), ld C): op N, ldb C; out^T lies as out, ldc OC.
          RETURN_IF_ERROR(check_gemm_dims({N, C, OC}));  // before any operand is read
          ASSIGN_OR_RETURN(GemmOperand w, gemm_operand(Scratch::kOperandA, weight, OC * C));
          ASSIGN_OR_RETURN(GemmOperand x, gemm_operand(Scratch::kOperandB, inp, N * C));
          RETURN_IF_ERROR(
              matmul_gemm(true, false, OC, N, C, w, C, x, C, 0.0f, product, CUDA_R_32F, OC));
        }
        if (out.bf16 != nullptr) {
          return CUDA_CHECK(kernels::add_bias_and_round(stream_, out.bf16, product, bias, N, OC));
        }
        if (bias == nullptr) return Status::ok();
        return CUDA_CHECK(kernels::add_bias(stream_, out.f32, bias, N, OC));
      },
      flops));
}

void CudaDevice::matmul_backward(float* dinp, MutableMatrix dweight, float* dbias,
                                 const float* dout, Matrix inp, Matrix weight, int64_t N, int64_t C,
                                 int64_t OC) {
  if (!begin_op() || N <= 0 || C <= 0 || OC <= 0) return;
  // dinp and dweight: two products of the forward's size each, when asked for (as the CPU).
  const double product =
      2.0 * static_cast<double>(N) * static_cast<double>(C) * static_cast<double>(OC);
  const double flops = (dinp != nullptr ? product : 0.0) + (!dweight.empty() ? product : 0.0);
  keep(timed_gemms(
      [&]() -> Status {
        RETURN_IF_ERROR(check_gemm_dims({N, C, OC}));  // before any operand is read
        // dout is an operand of both products: rounded once (not at all for dbias alone).
        GemmOperand g;
        if (dinp != nullptr || !dweight.empty()) {
          ASSIGN_OR_RETURN(g, gemm_operand(Scratch::kOperandB, dout, N * OC));
        }
        if (dinp != nullptr) {
          // dinp (N, C) += dout (N, OC) @ W (OC, C). Column-major:
          //   dinp^T (C, N) += W^T (C, OC) dout^T (OC, N);
          // W^T is weight as it lies (ld C), dout^T is dout as it lies (ld OC): both op N.
          ASSIGN_OR_RETURN(GemmOperand w, gemm_operand(Scratch::kOperandA, weight, OC * C));
          RETURN_IF_ERROR(
              matmul_gemm(false, false, C, N, OC, w, C, g, OC, 1.0f, dinp, CUDA_R_32F, C));
        }
        if (!dweight.empty()) {
          ASSIGN_OR_RETURN(GemmOperand x, gemm_operand(Scratch::kOperandA, inp, N * C));
          RETURN_IF_ERROR(weight_gradient(dweight, x, g, N, C, OC));
        }
        if (dbias == nullptr) return Status::ok();
        return CUDA_CHECK(kernels::bias_backward(stream_, dbias, dout, N, OC));
      },
      flops));
}

// dweight (OC, C) += dout^T (OC, N) @ inp (N, C). Column-major:
//   dweight^T (C, OC) += inp^T (C, N) dout (N, OC);
// inp^T is inp as it lies (ld C): op N; dout is the transpose of dout as it lies (dout^T,
// (OC, N), ld OC): op T.
Status CudaDevice::weight_gradient(MutableMatrix dweight, GemmOperand x, GemmOperand g, int64_t N,
                                   int64_t C, int64_t OC) {
  if (dweight.f32 != nullptr) {
    return matmul_gemm(false, true, C, OC, N, x, C, g, OC, 1.0f, dweight.f32, CUDA_R_32F, C);
  }
  // bf16 operands: cuBLAS adds into the bf16 gradient itself, in fp32 and rounded once: the
  // handle's math mode forbids summing split-k parts in the output type (unmeasured on a GPU;
  // docs/gpu-validation.md says what would show it).
  if (x.type == CUDA_R_16BF) {
    return matmul_gemm(false, true, C, OC, N, x, C, g, OC, 1.0f, dweight.bf16, CUDA_R_16BF, C);
  }
  ASSIGN_OR_RETURN(void* product, scratch(Scratch::kProduct,
                                          static_cast<size_t>(OC * C) * sizeof(float)));
  RETURN_IF_ERROR(matmul_gemm(false, true, C, OC, N, x, C, g, OC, 0.0f, product, CUDA_R_32F, C));
  return CUDA_CHECK(
      kernels::accumulate_bf16(stream_, dweight.bf16, static_cast<float*>(product), OC * C));
}

// ---- attention --------------------------------------------------------------------------------

CudaDevice::GemmOperand CudaDevice::advanced(GemmOperand x, int64_t elements) {
  const int64_t bytes = elements * (x.type == CUDA_R_16BF ? 2 : 4);
  return {static_cast<const char*>(x.data) + bytes, x.type};
}

// Per sample, the NH heads are one strided batch: head h's Q, K, V start h * hs into their part of
// qkv (row stride 3C), its scores and probabilities (T, T) at h * T * T, its output h * hs into
// out (row stride C). Samples are a loop (their qkv stride, T * 3C, is not a multiple of hs), which
// also bounds the fp32 scores and gradients in scratch to one sample's (NH, T, T).
void CudaDevice::attention_forward(float* out, MutableMatrix att, Matrix qkv, int64_t B, int64_t T,
                                   int64_t NH, int64_t hs) {
  if (!begin_op() || B <= 0 || T <= 0 || NH <= 0 || hs <= 0) return;
  keep(attention_forward_gemms(out, att, qkv, B, T, NH, hs));
}

Status CudaDevice::attention_forward_gemms(float* out, MutableMatrix att, Matrix qkv, int64_t B,
                                           int64_t T, int64_t NH, int64_t hs) {
  const int64_t C = NH * hs;
  const int64_t per_sample = NH * T * T;
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)));
  const bool bf16_gemm = options_.precision == GemmPrecision::kBf16;
  ASSIGN_OR_RETURN(GemmOperand x, gemm_operand(Scratch::kOperandA, qkv, B * T * 3 * C));
  // The scores: in att itself when it is fp32 (the softmax then works in place), else in scratch.
  float* scores = att.f32;
  if (scores == nullptr) {
    ASSIGN_OR_RETURN(void* memory, scratch(Scratch::kAttentionScores,
                                           static_cast<size_t>(per_sample) * sizeof(float)));
    scores = static_cast<float*>(memory);
  }
  for (int64_t b = 0; b < B; ++b) {
    const GemmOperand q = advanced(x, b * T * 3 * C);
    const GemmOperand k = advanced(q, C);
    const GemmOperand v = advanced(q, 2 * C);
    float* s = att.f32 != nullptr ? att.f32 + b * per_sample : scores;
    // scores_h (T, T) = scale Q_h K_h^T. Column-major: scores_h^T (T, T) = scale K_h Q_h^T;
    // K_h is the transpose of K as it lies ((hs, T), ld 3C): op T; Q_h^T is Q as it lies: op N.
    RETURN_IF_ERROR(attention_gemm(true, false, T, T, hs, scale, k, 3 * C, hs, q, 3 * C, hs, 0.0f,
                                   s, T, T * T, NH));
    // The probabilities in att's type: bf16 (rounded), or fp32, rounded to bf16 values under
    // bf16 GEMMs; P V then reads them as matmul reads a stored operand.
    Matrix p;
    if (att.bf16 != nullptr) {
      uint16_t* probabilities = att.bf16 + b * per_sample;
      RETURN_IF_ERROR(
          CUDA_CHECK(kernels::causal_softmax_forward(stream_, s, probabilities, NH * T, T)));
      p = probabilities;
    } else {
      RETURN_IF_ERROR(
          CUDA_CHECK(kernels::causal_softmax_forward(stream_, s, s, NH * T, T, bf16_gemm)));
      p = s;
    }
    ASSIGN_OR_RETURN(const GemmOperand p_operand, gemm_operand(Scratch::kProduct, p, per_sample));
    // out_h (T, hs) = P_h (T, T) V_h (T, hs). Column-major: out_h^T (hs, T) = V_h^T P_h^T, V_h^T
    // being V as it lies ((hs, T), ld 3C) and P_h^T the probabilities as they lie (ld T).
    RETURN_IF_ERROR(attention_gemm(false, false, hs, T, T, 1.0f, v, 3 * C, hs, p_operand, T, T * T,
                                   0.0f, out + b * T * C, C, hs, NH));
  }
  return Status::ok();
}

void CudaDevice::attention_backward(float* dqkv, const float* dout, Matrix qkv, Matrix att,
                                    int64_t B, int64_t T, int64_t NH, int64_t hs) {
  if (!begin_op() || B <= 0 || T <= 0 || NH <= 0 || hs <= 0) return;
  keep(attention_backward_gemms(dqkv, dout, qkv, att, B, T, NH, hs));
}

Status CudaDevice::attention_backward_gemms(float* dqkv, const float* dout, Matrix qkv, Matrix att,
                                            int64_t B, int64_t T, int64_t NH, int64_t hs) {
  const int64_t C = NH * hs;
  const int64_t per_sample = NH * T * T;
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)));
  ASSIGN_OR_RETURN(GemmOperand x, gemm_operand(Scratch::kOperandA, qkv, B * T * 3 * C));
  ASSIGN_OR_RETURN(GemmOperand dy_all, gemm_operand(Scratch::kOperandB, dout, B * T * C));
  // The probabilities as the GEMMs read them: a bf16 att as it lies under bf16 GEMMs (a copy only
  // where the type differs from the precision's, which no workload asks for).
  ASSIGN_OR_RETURN(GemmOperand p_all, gemm_operand(Scratch::kProduct, att, B * per_sample));
  // dL/dP of one sample's heads in fp32, then dL/d(scores): in place in fp32, or rounded into a
  // bf16 copy the bf16 GEMMs read. Reused by every sample (stream order).
  ASSIGN_OR_RETURN(void* dp_memory, scratch(Scratch::kAttentionScores,
                                            static_cast<size_t>(per_sample) * sizeof(float)));
  auto* dp = static_cast<float*>(dp_memory);
  uint16_t* ds_bf16 = nullptr;
  if (p_all.type == CUDA_R_16BF) {
    ASSIGN_OR_RETURN(void* ds_memory,
                     scratch(Scratch::kAttentionGrads, static_cast<size_t>(per_sample) * 2));
    ds_bf16 = static_cast<uint16_t*>(ds_memory);
  }
  const GemmOperand ds =
      ds_bf16 != nullptr ? GemmOperand{ds_bf16, CUDA_R_16BF} : GemmOperand{dp, CUDA_R_32F};
  for (int64_t b = 0; b < B; ++b) {
    const GemmOperand q = advanced(x, b * T * 3 * C);
    const GemmOperand k = advanced(q, C);
    const GemmOperand v = advanced(q, 2 * C);
    const GemmOperand p = advanced(p_all, b * per_sample);
    const GemmOperand dy = advanced(dy_all, b * T * C);
    float* dq = dqkv + b * T * 3 * C;
    float* dk = dq + C;
    float* dv = dq + 2 * C;
    // dP_h (T, T) = dY_h V_h^T. Column-major: dP_h^T = V_h dY_h^T; V_h is the transpose of V as
    // it lies (op T, ld 3C), dY_h^T is dout as it lies (op N, ld C).
    RETURN_IF_ERROR(attention_gemm(true, false, T, T, hs, 1.0f, v, 3 * C, hs, dy, C, hs, 0.0f, dp,
                                   T, T * T, NH));
    // dV_h (T, hs) += P_h^T dY_h. Column-major: dV_h^T (hs, T) += dY_h^T P_h; dY_h^T is dout as
    // it lies (op N, ld C), P_h the transpose of the probabilities as they lie (op T, ld T).
    RETURN_IF_ERROR(attention_gemm(false, true, hs, T, T, 1.0f, dy, C, hs, p, T, T * T, 1.0f, dv,
                                   3 * C, hs, NH));
    // dS = P (dP - sum_j P dP) * scale; 0 after the diagonal.
    if (ds_bf16 != nullptr) {
      RETURN_IF_ERROR(CUDA_CHECK(kernels::causal_softmax_backward(
          stream_, dp, static_cast<const uint16_t*>(p.data), ds_bf16, NH * T, T, scale)));
    } else {
      RETURN_IF_ERROR(CUDA_CHECK(kernels::causal_softmax_backward(
          stream_, dp, static_cast<const float*>(p.data), dp, NH * T, T, scale)));
    }
    // dQ_h (T, hs) += dS_h K_h. Column-major: dQ_h^T (hs, T) += K_h^T dS_h^T, K_h^T as K lies
    // (op N, ld 3C), dS_h^T as dscores lies (op N, ld T).
    RETURN_IF_ERROR(attention_gemm(false, false, hs, T, T, 1.0f, k, 3 * C, hs, ds, T, T * T, 1.0f,
                                   dq, 3 * C, hs, NH));
    // dK_h (T, hs) += dS_h^T Q_h. Column-major: dK_h^T (hs, T) += Q_h^T dS_h, Q_h^T as Q lies
    // (op N, ld 3C), dS_h the transpose of dscores as it lies (op T, ld T).
    RETURN_IF_ERROR(attention_gemm(false, true, hs, T, T, 1.0f, q, 3 * C, hs, ds, T, T * T, 1.0f,
                                   dk, 3 * C, hs, NH));
  }
  return Status::ok();
}

// ---- element-wise, normalisation, embeddings --------------------------------------------------

void CudaDevice::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                   const float* weight, const float* bias, int64_t N, int64_t C) {
  if (!begin_op()) return;
  keep(CUDA_CHECK(kernels::layernorm_forward(stream_, out, mean, rstd, inp, weight, bias, N, C)));
}

void CudaDevice::layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                    const float* inp, const float* weight, const float* mean,
                                    const float* rstd, int64_t N, int64_t C) {
  if (!begin_op()) return;
  keep(CUDA_CHECK(kernels::layernorm_backward(stream_, dinp, dweight, dbias, dout, inp, weight,
                                              mean, rstd, N, C)));
}

void CudaDevice::gelu_forward(MutableMatrix out, Matrix inp, int64_t n) {
  if (!begin_op()) return;
  with_stored(out, inp, [&](auto* o, const auto* i) {
    keep(CUDA_CHECK(kernels::gelu_forward(stream_, o, i, n)));
  });
}

void CudaDevice::gelu_backward(float* dinp, Matrix inp, const float* dout, int64_t n) {
  if (!begin_op()) return;
  with_stored(inp, [&](const auto* i) {
    keep(CUDA_CHECK(kernels::gelu_backward(stream_, dinp, i, dout, n)));
  });
}

void CudaDevice::residual_forward(float* out, const float* a, const float* b, int64_t n) {
  if (!begin_op()) return;
  keep(CUDA_CHECK(kernels::residual_forward(stream_, out, a, b, n)));
}

void CudaDevice::residual_backward(float* da, float* db, const float* dout, int64_t n) {
  if (!begin_op()) return;
  keep(CUDA_CHECK(kernels::residual_backward(stream_, da, db, dout, n)));
}

void CudaDevice::embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                   const float* wpe, int64_t B, int64_t T, int64_t C) {
  // The full table is the shard holding every token id, as in runner/ops/embedding.cpp.
  embedding_forward_vocab_range(out, tokens, wte, wpe, B, T, C, 0,
                                std::numeric_limits<int64_t>::max());
}

void CudaDevice::embedding_backward(float* dwte, float* dwpe, const float* dout,
                                    const int32_t* tokens, int64_t B, int64_t T, int64_t C) {
  embedding_backward_vocab_range(dwte, dwpe, dout, tokens, B, T, C, 0,
                                 std::numeric_limits<int64_t>::max());
}

void CudaDevice::embedding_forward_vocab_range(float* out, const int32_t* tokens,
                                               Matrix wte_shard, Matrix wpe, int64_t B, int64_t T,
                                               int64_t C, int64_t vocab_start, int64_t vocab_end) {
  if (!begin_op()) return;
  if (!keep(check_table_types(wte_shard, wpe))) return;
  if (wte_shard.bf16 != nullptr) {
    keep(CUDA_CHECK(kernels::embedding_forward(stream_, out, tokens, wte_shard.bf16, wpe.bf16, B,
                                               T, C, vocab_start, vocab_end)));
  } else {
    keep(CUDA_CHECK(kernels::embedding_forward(stream_, out, tokens, wte_shard.f32, wpe.f32, B, T,
                                               C, vocab_start, vocab_end)));
  }
}

void CudaDevice::embedding_backward_vocab_range(float* dwte_shard, float* dwpe, const float* dout,
                                                const int32_t* tokens, int64_t B, int64_t T,
                                                int64_t C, int64_t vocab_start, int64_t vocab_end) {
  if (!begin_op()) return;
  keep(CUDA_CHECK(kernels::embedding_backward(stream_, dwte_shard, dwpe, dout, tokens, B, T, C,
                                              vocab_start, vocab_end)));
}

// ---- losses -------------------------------------------------------------------------------------

float CudaDevice::mean_of_device_losses(const float* losses, int64_t n) {
  std::vector<float> host(static_cast<size_t>(n));
  download(host.data(), losses, host.size() * sizeof(float));
  if (!first_error_.is_ok()) return kNan;
  double total = 0.0;
  for (const float loss : host) total += loss;
  return static_cast<float>(total / static_cast<double>(n));
}

float* CudaDevice::losses_or_scratch(float* losses, int64_t n) {
  if (losses != nullptr) return losses;
  StatusOr<void*> memory = scratch(Scratch::kRowLosses, static_cast<size_t>(n) * sizeof(float));
  return keep(memory.status()) ? static_cast<float*>(*memory) : nullptr;
}

float CudaDevice::cross_entropy_forward(float* losses, const float* logits, const int32_t* targets,
                                        int64_t N, int64_t V) {
  if (!begin_op()) return kNan;
  if (N <= 0) return 0.0f;
  float* row_losses = losses_or_scratch(losses, N);
  if (row_losses == nullptr) return kNan;
  if (!keep(
          CUDA_CHECK(kernels::cross_entropy_forward(stream_, row_losses, logits, targets, N, V)))) {
    return kNan;
  }
  return mean_of_device_losses(row_losses, N);
}

void CudaDevice::cross_entropy_backward(float* dlogits, const float* logits, const int32_t* targets,
                                        int64_t N, int64_t V, float dloss_scale) {
  if (!begin_op()) return;
  keep(CUDA_CHECK(
      kernels::cross_entropy_backward(stream_, dlogits, logits, targets, N, V, dloss_scale)));
}

void CudaDevice::vocab_parallel_local_max(float* row_max, const float* logits, int64_t N,
                                          int64_t V_local) {
  if (!begin_op()) return;
  keep(CUDA_CHECK(kernels::vocab_parallel_local_max(stream_, row_max, logits, N, V_local)));
}

void CudaDevice::vocab_parallel_local_sum_exp(float* row_sum_exp, const float* logits,
                                              const float* global_max, int64_t N, int64_t V_local) {
  if (!begin_op()) return;
  keep(CUDA_CHECK(
      kernels::vocab_parallel_local_sum_exp(stream_, row_sum_exp, logits, global_max, N, V_local)));
}

void CudaDevice::vocab_parallel_local_target_logit(float* target_logit, const float* logits,
                                                   const int32_t* targets, int64_t N,
                                                   int64_t V_local, int64_t vocab_start) {
  if (!begin_op()) return;
  keep(CUDA_CHECK(kernels::vocab_parallel_local_target_logit(stream_, target_logit, logits, targets,
                                                             N, V_local, vocab_start)));
}

float CudaDevice::vocab_parallel_loss(float* losses, const float* global_max,
                                      const float* global_sum_exp, const float* global_target_logit,
                                      int64_t N) {
  if (!begin_op()) return kNan;
  if (N <= 0) return 0.0f;
  float* row_losses = losses_or_scratch(losses, N);
  if (row_losses == nullptr) return kNan;
  if (!keep(CUDA_CHECK(kernels::vocab_parallel_loss(stream_, row_losses, global_max, global_sum_exp,
                                                    global_target_logit, N)))) {
    return kNan;
  }
  return mean_of_device_losses(row_losses, N);
}

void CudaDevice::vocab_parallel_backward(float* dlogits, const float* logits,
                                         const int32_t* targets, const float* global_max,
                                         const float* global_sum_exp, int64_t N, int64_t V_local,
                                         int64_t vocab_start, float dloss_scale) {
  if (!begin_op()) return;
  keep(CUDA_CHECK(kernels::vocab_parallel_backward(stream_, dlogits, logits, targets, global_max,
                                                   global_sum_exp, N, V_local, vocab_start,
                                                   dloss_scale)));
}

float CudaDevice::mean_square_loss_forward(const float* y, int64_t n) {
  const double sum = sum_of_squares(y, n);
  if (!first_error_.is_ok()) return kNan;
  return n > 0 ? static_cast<float>(sum / static_cast<double>(n)) : 0.0f;
}

void CudaDevice::mean_square_loss_backward(float* dy, const float* y, int64_t n,
                                           float dloss_scale) {
  if (!begin_op()) return;
  keep(CUDA_CHECK(kernels::mean_square_loss_backward(stream_, dy, y, n, dloss_scale)));
}

// ---- optimizer and global norm ------------------------------------------------------------------

namespace {

// The bias corrections rounded as runner/ops/adamw.cpp rounds them.
kernels::AdamWStep adamw_step(const ops::AdamWConfig& config, int64_t step) {
  const auto exponent = static_cast<double>(step);
  return {config.learning_rate,
          config.beta1,
          config.beta2,
          config.eps,
          config.weight_decay,
          config.grad_scale,
          static_cast<float>(1.0 - std::pow(config.beta1, exponent)),
          static_cast<float>(1.0 - std::pow(config.beta2, exponent))};
}

}  // namespace

void CudaDevice::adamw_update(float* params, const float* grads, float* m, float* v, int64_t n,
                              const ops::AdamWConfig& config, int64_t step, uint16_t* params_bf16) {
  if (!begin_op()) return;
  const kernels::AdamWStep scalars = adamw_step(config, step);
  keep(CUDA_CHECK(kernels::adamw_update(stream_, params, grads, m, v, params_bf16, n, scalars)));
}

void CudaDevice::adamw_update(float* params, const uint16_t* grads, float* m, float* v, int64_t n,
                              const ops::AdamWConfig& config, int64_t step, uint16_t* params_bf16) {
  if (!begin_op()) return;
  const kernels::AdamWStep scalars = adamw_step(config, step);
  keep(CUDA_CHECK(kernels::adamw_update(stream_, params, grads, m, v, params_bf16, n, scalars)));
}

template <typename Value>
double CudaDevice::reduce_squares(const Value* x, int64_t n) {
  if (!begin_op()) return kNan;
  auto* partials = static_cast<double*>(reduction_.data());
  double* result = partials + kernels::kSumOfSquaresPartials;
  if (!keep(CUDA_CHECK(kernels::sum_of_squares(stream_, result, partials, x, n)))) {
    return kNan;
  }
  double sum = 0.0;
  download(&sum, result, sizeof sum);
  return first_error_.is_ok() ? sum : kNan;
}

double CudaDevice::sum_of_squares(const float* x, int64_t n) { return reduce_squares(x, n); }

double CudaDevice::sum_of_squares(const uint16_t* x, int64_t n) { return reduce_squares(x, n); }

void CudaDevice::scale(float* x, int64_t n, float factor) {
  if (!begin_op()) return;
  keep(CUDA_CHECK(kernels::scale(stream_, x, n, factor)));
}

}  // namespace partrain::runner
