// A GEMM's rate through a device, as the workloads issue it: matmul_forward on operands stored in
// the type the run keeps them (bf16 input, weight and output under the bf16 recipes, fp32
// otherwise), timed over back-to-back calls, a sample of the results checked against a host
// reference. `partrain bench gemm` prints it; a run's peak GEMM rate (Device::measure_peak_gemm)
// is measured with it.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "runner/device/device.h"

namespace partrain::runner {

// out (m, n) = inp (m, k) @ weight (n, k)^T (+ bias (n)): matmul_forward's N, OC and C.
struct GemmShape {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  }
};

// "8192" (a cube) or "MxNxK" ("4096x16384x4096"): each dimension positive. kInvalidArgument
// names the text and the accepted forms.
StatusOr<GemmShape> parse_gemm_shape(const std::string& text);
// "8192^3" for a cube, else "4096x16384x4096".
std::string format_gemm_shape(const GemmShape& shape);

struct GemmBenchOptions {
  GemmShape shape;
  bool bf16 = false;  // operands and output stored in bf16 (else fp32)
  bool bias = false;  // an fp32 bias of n added, as the workloads' linear layers do
  int warmup_iters = 2;
  int iters = 10;
  int check_samples = 16;  // output entries compared with a host reference; 0: none
  uint64_t seed = 1;
};

struct GemmBenchResult {
  GemmShape shape;
  bool bf16 = false;
  bool bias = false;
  int iters = 0;
  double mean_us = 0;    // wall time of `iters` back-to-back calls, synchronized, / iters
  double tflops = 0;     // shape.flops() / mean time, in TFLOP/s (the bias add not counted)
  int checked = 0;       // output entries compared with the reference
  int wrong = 0;         // of those, outside the tolerance below
  double max_error = 0;  // the largest |got - reference| / tolerance among them (<= 1 passes)
};

// Runs it on `device`: operands in [-1, 1) from `seed`, its buffers tracked as workspace and freed
// on return. A sampled entry is wrong when |got - ref| exceeds the output's rounding (2^-8 |ref|
// for bf16, 2^-22 |ref| for fp32) plus fp32 accumulation's worst case over k terms
// ((k + 2) 2^-23 sum |inp_i weight_i|, truncating tensor-core adds included), ref being the
// double-precision sum of the stored operands' products: a value from the wrong row, column or
// operand is off by far more. Fails with the device's status when an op failed, and on a shape
// whose buffers cannot be allocated.
StatusOr<GemmBenchResult> run_gemm_bench(Device& device, const GemmBenchOptions& options);

}  // namespace partrain::runner
