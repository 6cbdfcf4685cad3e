#include "runner/device/device.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "runner/device/gemm_benchmark.h"

namespace partrain::runner {

Status check_table_types(Matrix wte, Matrix wpe) {
  if (wpe.empty() || (wte.bf16 != nullptr) == (wpe.bf16 != nullptr)) return Status::ok();
  return invalid_argument(
      "embedding_forward_vocab_range: wte is stored in {} and wpe in {}; store both in one type",
      wte.bf16 != nullptr ? "bf16" : "fp32", wpe.bf16 != nullptr ? "bf16" : "fp32");
}

StatusOr<double> Device::measure_sgemm_gflops(int64_t size, int repeats) {
  if (size <= 0 || repeats <= 0) {
    return invalid_argument(
        "sgemm peak measurement needs a positive size and repeat count "
        "(got size {}, repeats {})",
        size, repeats);
  }
  // One timed call at a time (the first after a warm-up: threads, caches, page faults), the
  // best kept: the CPU's rate varies from call to call with its neighbours.
  GemmBenchOptions options;
  options.shape = {size, size, size};
  options.warmup_iters = 1;
  options.iters = 1;
  options.check_samples = 0;
  double best_tflops = 0;
  for (int i = 0; i < repeats; ++i) {
    ASSIGN_OR_RETURN(GemmBenchResult result, run_gemm_bench(*this, options));
    best_tflops = std::max(best_tflops, result.tflops);
    options.warmup_iters = 0;
  }
  return best_tflops * 1e3;  // GFLOP/s
}

StatusOr<Device::PeakGemm> Device::measure_peak_gemm() {
  constexpr int64_t kSize = 4096;
  ASSIGN_OR_RETURN(double gflops, measure_sgemm_gflops(kSize, 3));
  allocator().reset_peaks();
  return PeakGemm{gflops, fmt::format("measured GEMM, {}^3", kSize)};
}

}  // namespace partrain::runner
