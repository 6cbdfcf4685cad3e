// Test support for the ops: deterministic random inputs and finite-difference gradient checks
// (central differences of a double-valued objective), the evidence that each backward is the
// derivative of its forward.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <vector>

namespace partrain::runner::ops::testing {

inline std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 engine(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(n);
  for (float& value : values) value = normal(engine);
  return values;
}

// Random qkv (T, 3T) of one attention head (NH 1, hs = T) whose part `part` (1: K, 2: V) has the
// unit vectors e_t as rows: then P V is P, row for row, and dS K is dS, so the outputs show the
// probabilities and dL/d(scores) the products read, exactly (one product with 1 plus zeros).
inline std::vector<float> unit_rows_qkv(int64_t T, int64_t part, uint32_t seed) {
  auto qkv = random_values(static_cast<size_t>(T * 3 * T), seed);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < T; ++i) {
      qkv[static_cast<size_t>(t * 3 * T + part * T + i)] = i == t ? 1.0f : 0.0f;
    }
  }
  return qkv;
}

// sum_i weights[i] * out[i] in double: an objective whose gradient with respect to out is weights,
// so a backward fed dout = weights must produce the objective's gradient.
inline double weighted_sum(std::span<const float> out, std::span<const float> weights) {
  double sum = 0.0;
  for (size_t i = 0; i < out.size(); ++i) sum += static_cast<double>(out[i]) * weights[i];
  return sum;
}

// d objective / d x[i] for every i, by (f(x + h) - f(x - h)) / (the step actually taken in float).
inline std::vector<double> numeric_gradient(std::span<float> x,
                                            const std::function<double()>& objective,
                                            float h = 1e-2f) {
  std::vector<double> gradient(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float saved = x[i];
    const float up = saved + h;
    const float down = saved - h;
    x[i] = up;
    const double f_up = objective();
    x[i] = down;
    const double f_down = objective();
    x[i] = saved;
    gradient[i] = (f_up - f_down) / (static_cast<double>(up) - static_cast<double>(down));
  }
  return gradient;
}

struct GradientError {
  double normwise = 0.0;  // ||analytic - numeric|| / ||numeric||
  double worst = 0.0;     // max_i |a_i - n_i| / max(|a_i|, |n_i|, 1% of max_j |n_j|)
};

inline GradientError gradient_error(std::span<const float> analytic,
                                    const std::vector<double>& numeric) {
  double difference_norm = 0.0;
  double numeric_norm = 0.0;
  double largest = 0.0;
  for (double value : numeric) largest = std::max(largest, std::abs(value));
  GradientError error;
  for (size_t i = 0; i < numeric.size(); ++i) {
    const double difference = analytic[i] - numeric[i];
    difference_norm += difference * difference;
    numeric_norm += numeric[i] * numeric[i];
    // The floor keeps elements whose true gradient is ~0 from dividing float noise by ~0.
    const double reference = std::max(
        {std::abs(static_cast<double>(analytic[i])), std::abs(numeric[i]), 0.01 * largest, 1e-12});
    error.worst = std::max(error.worst, std::abs(difference) / reference);
  }
  error.normwise = std::sqrt(difference_norm) / std::max(std::sqrt(numeric_norm), 1e-12);
  return error;
}

}  // namespace partrain::runner::ops::testing
