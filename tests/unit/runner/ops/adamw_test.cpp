#include "runner/ops/adamw.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "runner/ops/bf16_round.h"

namespace partrain::runner::ops {
namespace {

// Two steps of one parameter, computed by hand:
//   step 1, g = 0.5:   m = 0.05, v = 0.00025, m_hat = 0.5, v_hat = 0.25,
//                      p = 1 - 0.1 (0.5 / (0.5 + 1e-8) + 0.01 * 1) = 0.899000002
//   step 2, g = -0.25: m = 0.9 * 0.05 - 0.025 = 0.02, v = 0.999 * 0.00025 + 0.001 * 0.0625 =
//                      0.00031225, m_hat = 0.02 / 0.19, v_hat = 0.00031225 / 0.001999,
//                      p = 0.899000002 - 0.1 (0.1052632 / 0.3952254 + 0.01 * 0.899000002)
//                        = 0.8714673
TEST(AdamW, TwoHandComputedSteps) {
  const AdamWConfig config{
      .learning_rate = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};
  float p = 1.0f, m = 0.0f, v = 0.0f;
  float g = 0.5f;
  adamw_update(&p, &g, &m, &v, 1, config, 1);
  EXPECT_NEAR(m, 0.05f, 1e-7);
  EXPECT_NEAR(v, 0.00025f, 1e-8);  // 1 - 0.999 rounds in float: 1.3e-5 relative
  EXPECT_NEAR(p, 0.899000002f, 1e-6);
  g = -0.25f;
  adamw_update(&p, &g, &m, &v, 1, config, 2);
  EXPECT_NEAR(m, 0.02f, 1e-7);
  EXPECT_NEAR(v, 0.00031225f, 1e-8);
  EXPECT_NEAR(p, 0.8714673f, 2e-6);
}

TEST(AdamW, DecayIsDecoupledFromTheGradient) {
  // A zero gradient still shrinks the weight by lr * weight_decay * p (Adam with L2 would not:
  // its decay would pass through m / sqrt(v)).
  const AdamWConfig config{.learning_rate = 0.1f, .weight_decay = 0.5f};
  std::vector<float> p = {2.0f, -4.0f}, g = {0.0f, 0.0f}, m = {0.0f, 0.0f}, v = {0.0f, 0.0f};
  adamw_update(p.data(), g.data(), m.data(), v.data(), 2, config, 1);
  EXPECT_FLOAT_EQ(p[0], 2.0f * (1.0f - 0.05f));
  EXPECT_FLOAT_EQ(p[1], -4.0f * (1.0f - 0.05f));
}

TEST(AdamW, FirstStepMovesEachParameterByAboutTheLearningRate) {
  // Bias correction makes step 1's update g / |g| whatever the gradient's magnitude.
  const AdamWConfig config{.learning_rate = 0.01f};
  std::vector<float> p = {0.0f, 0.0f, 0.0f}, g = {1e-3f, -7.0f, 250.0f};
  std::vector<float> m(3, 0.0f), v(3, 0.0f);
  adamw_update(p.data(), g.data(), m.data(), v.data(), 3, config, 1);
  EXPECT_NEAR(p[0], -0.01f, 1e-6);
  EXPECT_NEAR(p[1], 0.01f, 1e-6);
  EXPECT_NEAR(p[2], -0.01f, 1e-6);
}

// Clipping fused into the update: the same parameters and moments, bit for bit, as scaling the
// gradients first (the pass it replaces), and the gradients are left as they were.
TEST(AdamW, GradScaleIsTheSameAsScalingTheGradientsFirst) {
  AdamWConfig fused{.learning_rate = 0.05f, .weight_decay = 0.01f, .grad_scale = 0.37f};
  AdamWConfig plain = fused;
  plain.grad_scale = 1.0f;
  std::vector<float> p = {0.5f, -1.25f, 3.0f}, g = {0.8f, -2.5f, 1e-3f};
  std::vector<float> p2 = p, m(3, 0.1f), m2 = m, v(3, 0.2f), v2 = v;
  const std::vector<float> original_g = g;
  std::vector<float> scaled = g;
  for (float& x : scaled) x *= fused.grad_scale;
  for (int64_t step = 1; step <= 3; ++step) {
    adamw_update(p.data(), g.data(), m.data(), v.data(), 3, fused, step);
    adamw_update(p2.data(), scaled.data(), m2.data(), v2.data(), 3, plain, step);
  }
  EXPECT_EQ(p, p2);
  EXPECT_EQ(m, m2);
  EXPECT_EQ(v, v2);
  EXPECT_EQ(g, original_g);
  EXPECT_NE(p, std::vector<float>({0.5f, -1.25f, 3.0f}));
}

// bf16 gradients (bf16-mixed) are widened as they are read: the same master and moments, bit
// for bit, as widening them all into fp32 first.
TEST(AdamW, Bf16GradientsAreTheirWidenedValues) {
  const AdamWConfig config{.learning_rate = 0.05f, .weight_decay = 0.01f, .grad_scale = 0.37f};
  const std::vector<float> values = {0.8f, -2.5f, 1e-3f, 3.14159f, -0.0f};
  std::vector<uint16_t> bf16(values.size());
  std::vector<float> widened(values.size());
  const auto n = static_cast<int64_t>(values.size());
  to_bf16(bf16.data(), values.data(), n);
  from_bf16(widened.data(), bf16.data(), n);
  ASSERT_NE(widened, values);  // the gradients did lose bits
  std::vector<float> p = {0.5f, -1.25f, 3.0f, 1.0f, -2.0f};
  std::vector<float> p2 = p, m(values.size(), 0.1f), m2 = m, v(values.size(), 0.2f), v2 = v;
  for (int64_t step = 1; step <= 3; ++step) {
    adamw_update(p.data(), bf16.data(), m.data(), v.data(), n, config, step);
    adamw_update(p2.data(), widened.data(), m2.data(), v2.data(), n, config, step);
  }
  EXPECT_EQ(p, p2);
  EXPECT_EQ(m, m2);
  EXPECT_EQ(v, v2);
}

}  // namespace
}  // namespace partrain::runner::ops
