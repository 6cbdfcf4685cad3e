#include "runner/device/device.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/clock.h"

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
  const auto matrix_bytes = static_cast<size_t>(size * size) * sizeof(float);
  ASSIGN_OR_RETURN(TrackedBuffer a,
                   allocator().allocate(matrix_bytes, memory::Category::kWorkspace));
  ASSIGN_OR_RETURN(TrackedBuffer b,
                   allocator().allocate(matrix_bytes, memory::Category::kWorkspace));
  ASSIGN_OR_RETURN(TrackedBuffer c,
                   allocator().allocate(matrix_bytes, memory::Category::kWorkspace));
  auto* pa = static_cast<float*>(a.data());
  auto* pb = static_cast<float*>(b.data());
  auto* pc = static_cast<float*>(c.data());
  // Non-zero, non-denormal inputs: some BLAS kernels take shortcuts on zeros.
  fill(pa, size * size, 0.5f);
  fill(pb, size * size, 0.25f);

  matmul_forward(pc, pa, pb, nullptr, size, size, size);  // warm-up: threads, caches, page faults
  synchronize();
  int64_t best_ns = std::numeric_limits<int64_t>::max();
  for (int i = 0; i < repeats; ++i) {
    const int64_t start = monotonic_ns();
    matmul_forward(pc, pa, pb, nullptr, size, size, size);
    synchronize();
    best_ns = std::min(best_ns, monotonic_ns() - start);
  }
  const double flops =
      2.0 * static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(size);
  return flops / static_cast<double>(std::max<int64_t>(best_ns, 1));  // flop/ns = GFLOP/s
}

StatusOr<Device::PeakGemm> Device::measure_peak_gemm() {
  constexpr int64_t kSize = 4096;
  ASSIGN_OR_RETURN(double gflops, measure_sgemm_gflops(kSize, 3));
  allocator().reset_peaks();
  return PeakGemm{gflops, fmt::format("measured GEMM, {}^3", kSize)};
}

}  // namespace partrain::runner
