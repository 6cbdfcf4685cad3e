#include "runner/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace partrain::runner::ops {
namespace {

float dot(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// Where one head of one token lives in the (B, T, 3C) qkv tensor.
struct QkvIndex {
  int64_t T, C, hs;
  int64_t query(int64_t b, int64_t t, int64_t h) const { return (b * T + t) * 3 * C + h * hs; }
  int64_t key(int64_t b, int64_t t, int64_t h) const { return query(b, t, h) + C; }
  int64_t value(int64_t b, int64_t t, int64_t h) const { return query(b, t, h) + 2 * C; }
};

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t NH,
                       int64_t hs) {
  const int64_t C = NH * hs;
  const QkvIndex index{T, C, hs};
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < NH; ++h) {
        const float* q = qkv + index.query(b, t, h);
        float* att_row = att + ((b * NH + h) * T + t) * T;
        // Scores, then a softmax shifted by the row maximum so exp cannot overflow.
        float max_score = -std::numeric_limits<float>::infinity();
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          att_row[t2] = dot(q, qkv + index.key(b, t2, h), hs) * scale;
          max_score = std::max(max_score, att_row[t2]);
        }
        float exp_sum = 0.0f;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          att_row[t2] = std::exp(att_row[t2] - max_score);
          exp_sum += att_row[t2];
        }
        const float inv_sum = 1.0f / exp_sum;
        for (int64_t t2 = 0; t2 <= t; ++t2) att_row[t2] *= inv_sum;
        for (int64_t t2 = t + 1; t2 < T; ++t2) att_row[t2] = 0.0f;  // the causal mask

        float* y = out + (b * T + t) * C + h * hs;
        for (int64_t i = 0; i < hs; ++i) y[i] = 0.0f;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          const float* v = qkv + index.value(b, t2, h);
          const float p = att_row[t2];
          for (int64_t i = 0; i < hs; ++i) y[i] += p * v[i];
        }
      }
    }
  }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                        int64_t B, int64_t T, int64_t NH, int64_t hs) {
  const int64_t C = NH * hs;
  const QkvIndex index{T, C, hs};
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)));
  // One row of dL/d(probabilities): T floats of scratch, reused for every (b, t, h).
  std::vector<float> datt(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < NH; ++h) {
        const float* att_row = att + ((b * NH + h) * T + t) * T;
        const float* dy = dout + (b * T + t) * C + h * hs;
        // y = sum_t2 p[t2] v[t2]: dp[t2] = dy . v[t2], dv[t2] += p[t2] dy.
        float weighted_sum = 0.0f;  // sum_j p[j] dp[j], the softmax Jacobian's rank-one part
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          const float* v = qkv + index.value(b, t2, h);
          float* dv = dqkv + index.value(b, t2, h);
          const float p = att_row[t2];
          datt[static_cast<size_t>(t2)] = dot(dy, v, hs);
          weighted_sum += p * datt[static_cast<size_t>(t2)];
          for (int64_t i = 0; i < hs; ++i) dv[i] += p * dy[i];
        }
        // Softmax backward: dscore[t2] = p[t2] (dp[t2] - sum_j p[j] dp[j]); score = q . k * scale.
        const float* q = qkv + index.query(b, t, h);
        float* dq = dqkv + index.query(b, t, h);
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          const float dscore = att_row[t2] * (datt[static_cast<size_t>(t2)] - weighted_sum) * scale;
          const float* k = qkv + index.key(b, t2, h);
          float* dk = dqkv + index.key(b, t2, h);
          for (int64_t i = 0; i < hs; ++i) {
            dq[i] += dscore * k[i];
            dk[i] += dscore * q[i];
          }
        }
      }
    }
  }
}

}  // namespace partrain::runner::ops
