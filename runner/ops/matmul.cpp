#include "runner/ops/matmul.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "runner/device/openblas_library.h"

namespace partrain::runner::ops {
namespace {

// OpenBLAS's LP64 interface takes int dimensions; a larger one is a caller bug, not a run-time
// condition, so it throws rather than silently truncating.
blasint blas_dim(int64_t value) {
  if (value < 0 || value > std::numeric_limits<blasint>::max()) {
    throw std::out_of_range(fmt::format("matrix dimension {} does not fit a BLAS int", value));
  }
  return static_cast<blasint>(value);
}

}  // namespace

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N,
                    int64_t C, int64_t OC) {
  if (N == 0 || OC == 0) return;
  if (C == 0) {  // an empty product: sgemm rejects a leading dimension of 0
    for (int64_t n = 0; n < N; ++n) {
      if (bias != nullptr)
        std::copy_n(bias, OC, out + n * OC);
      else
        std::fill_n(out + n * OC, OC, 0.0f);
    }
    return;
  }
  // Start from the bias (or zero) and let sgemm add the product (beta = 1).
  float beta = 0.0f;
  if (bias != nullptr) {
    for (int64_t n = 0; n < N; ++n) std::copy_n(bias, OC, out + n * OC);
    beta = 1.0f;
  }
  loaded_openblas().sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blas_dim(N), blas_dim(OC),
                          blas_dim(C), 1.0f, inp, blas_dim(C), weight, blas_dim(C), beta, out,
                          blas_dim(OC));
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t N, int64_t C, int64_t OC) {
  if (N == 0 || C == 0 || OC == 0) return;
  const OpenblasLibrary& blas = loaded_openblas();
  if (dinp != nullptr) {
    blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blas_dim(N), blas_dim(C), blas_dim(OC),
               1.0f, dout, blas_dim(OC), weight, blas_dim(C), 1.0f, dinp, blas_dim(C));
  }
  if (dweight != nullptr) {
    blas.sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, blas_dim(OC), blas_dim(C), blas_dim(N),
               1.0f, dout, blas_dim(OC), inp, blas_dim(C), 1.0f, dweight, blas_dim(C));
  }
  if (dbias != nullptr) {
    for (int64_t n = 0; n < N; ++n) {
      const float* dout_row = dout + n * OC;
      for (int64_t o = 0; o < OC; ++o) dbias[o] += dout_row[o];
    }
  }
}

}  // namespace partrain::runner::ops
