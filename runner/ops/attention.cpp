#include "runner/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runner/device/openblas_library.h"
#include "runner/ops/bf16_round.h"

namespace partrain::runner::ops {
namespace {

// Where one head of one token lives in the (B, T, 3C) qkv tensor.
struct QkvIndex {
  int64_t T, C, hs;
  int64_t query(int64_t b, int64_t t, int64_t h) const { return (b * T + t) * 3 * C + h * hs; }
  int64_t key(int64_t b, int64_t t, int64_t h) const { return query(b, t, h) + C; }
  int64_t value(int64_t b, int64_t t, int64_t h) const { return query(b, t, h) + 2 * C; }
};

}  // namespace

// Per (sample, head) the scores, the probabilities' use and every gradient are matrix products
// over strided views of qkv, so they run through sgemm (the same arithmetic as the per-token
// loops of llm.c's reference, at GEMM speed); only the causal softmax is a row loop.
void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t NH,
                       int64_t hs, bool bf16_products) {
  const int64_t C = NH * hs;
  const QkvIndex index{T, C, hs};
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)));
  const auto n = static_cast<blasint>(T);
  const auto k = static_cast<blasint>(hs);
  const auto stride = static_cast<blasint>(3 * C);
  const OpenblasLibrary& blas = loaded_openblas();
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      const float* q = qkv + index.query(b, 0, h);
      const float* key = qkv + index.key(b, 0, h);
      const float* value = qkv + index.value(b, 0, h);
      float* scores = att + (b * NH + h) * T * T;
      // scores (T, T) = scale * Q K^T
      blas.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, k, scale, q, stride, key, stride,
                 0.0f, scores, n);
      for (int64_t t = 0; t < T; ++t) {
        float* row = scores + t * T;
        // A softmax shifted by the row maximum so exp cannot overflow; keys after t are masked.
        float max_score = -std::numeric_limits<float>::infinity();
        for (int64_t t2 = 0; t2 <= t; ++t2) max_score = std::max(max_score, row[t2]);
        float exp_sum = 0.0f;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          row[t2] = std::exp(row[t2] - max_score);
          exp_sum += row[t2];
        }
        const float inv_sum = 1.0f / exp_sum;
        for (int64_t t2 = 0; t2 <= t; ++t2) row[t2] *= inv_sum;
        if (bf16_products) round_to_bf16(row, row, t + 1);
        for (int64_t t2 = t + 1; t2 < T; ++t2) row[t2] = 0.0f;
      }
      // out (T, hs) of this head = P V
      blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, k, n, 1.0f, scores, n, value, stride,
                 0.0f, out + (b * T) * C + h * hs, static_cast<blasint>(C));
    }
  }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                        int64_t B, int64_t T, int64_t NH, int64_t hs, bool bf16_products) {
  const int64_t C = NH * hs;
  const QkvIndex index{T, C, hs};
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)));
  const auto n = static_cast<blasint>(T);
  const auto k = static_cast<blasint>(hs);
  const auto stride = static_cast<blasint>(3 * C);
  const auto out_stride = static_cast<blasint>(C);
  const OpenblasLibrary& blas = loaded_openblas();
  // dL/d(probabilities), then dL/d(scores), of one (sample, head): T x T floats of scratch.
  std::vector<float> dscores(static_cast<size_t>(T * T));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      const float* p = att + (b * NH + h) * T * T;
      const float* dy = dout + (b * T) * C + h * hs;
      const float* q = qkv + index.query(b, 0, h);
      const float* key = qkv + index.key(b, 0, h);
      const float* value = qkv + index.value(b, 0, h);
      float* dq = dqkv + index.query(b, 0, h);
      float* dk = dqkv + index.key(b, 0, h);
      float* dv = dqkv + index.value(b, 0, h);
      // y = P V: dP = dY V^T, dV += P^T dY.
      blas.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, k, 1.0f, dy, out_stride, value,
                 stride, 0.0f, dscores.data(), n);
      blas.sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, k, n, 1.0f, p, n, dy, out_stride, 1.0f,
                 dv, stride);
      // Softmax backward per row: dS = P (dP - sum_j P dP), times the score scale.
      for (int64_t t = 0; t < T; ++t) {
        const float* p_row = p + t * T;
        float* d_row = dscores.data() + t * T;
        float weighted_sum = 0.0f;
        for (int64_t t2 = 0; t2 <= t; ++t2) weighted_sum += p_row[t2] * d_row[t2];
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          d_row[t2] = p_row[t2] * (d_row[t2] - weighted_sum) * scale;
        }
        if (bf16_products) round_to_bf16(d_row, d_row, t + 1);
        for (int64_t t2 = t + 1; t2 < T; ++t2) d_row[t2] = 0.0f;
      }
      // scores = Q K^T: dQ += dS K, dK += dS^T Q.
      blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, k, n, 1.0f, dscores.data(), n, key,
                 stride, 1.0f, dq, stride);
      blas.sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, k, n, 1.0f, dscores.data(), n, q,
                 stride, 1.0f, dk, stride);
    }
  }
}

}  // namespace partrain::runner::ops
