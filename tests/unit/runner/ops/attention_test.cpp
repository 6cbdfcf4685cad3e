#include "runner/ops/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runner/ops/bf16_round.h"
#include "tests/unit/runner/ops/gradient_check.h"

namespace partrain::runner::ops {
namespace {

using testing::gradient_error;
using testing::numeric_gradient;
using testing::random_values;
using testing::unit_rows_qkv;
using testing::weighted_sum;

// softmax(Q K^T / sqrt(hs) + mask) V per (b, h), in double, written independently of the op.
std::vector<double> naive_attention(const std::vector<float>& qkv, int64_t B, int64_t T, int64_t NH,
                                    int64_t hs) {
  const int64_t C = NH * hs;
  auto at = [&](int64_t b, int64_t t, int64_t part, int64_t h, int64_t i) {
    return static_cast<double>(
        qkv[static_cast<size_t>((b * T + t) * 3 * C + part * C + h * hs + i)]);
  };
  std::vector<double> out(static_cast<size_t>(B * T * C), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> p(static_cast<size_t>(t + 1));
        double denominator = 0.0;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          double score = 0.0;
          for (int64_t i = 0; i < hs; ++i) score += at(b, t, 0, h, i) * at(b, t2, 1, h, i);
          p[static_cast<size_t>(t2)] = std::exp(score / std::sqrt(static_cast<double>(hs)));
          denominator += p[static_cast<size_t>(t2)];
        }
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          for (int64_t i = 0; i < hs; ++i) {
            out[static_cast<size_t>((b * T + t) * C + h * hs + i)] +=
                p[static_cast<size_t>(t2)] / denominator * at(b, t2, 2, h, i);
          }
        }
      }
    }
  }
  return out;
}

TEST(Attention, ForwardMatchesNaiveSoftmaxAttention) {
  const int64_t B = 2, T = 6, NH = 3, hs = 4, C = NH * hs;
  auto qkv = random_values(static_cast<size_t>(B * T * 3 * C), 1);
  std::vector<float> out(static_cast<size_t>(B * T * C)), att(static_cast<size_t>(B * NH * T * T));
  attention_forward(out.data(), att.data(), qkv.data(), B, T, NH, hs);
  auto expected = naive_attention(qkv, B, T, NH, hs);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], expected[i], 1e-5) << i;
  // att (B, NH, T, T): each row a distribution over keys t2 <= t, zero above the diagonal.
  for (int64_t row = 0; row < B * NH * T; ++row) {
    const int64_t t = row % T;
    double sum = 0.0;
    for (int64_t t2 = 0; t2 < T; ++t2) {
      const float p = att[static_cast<size_t>(row * T + t2)];
      if (t2 > t)
        EXPECT_EQ(p, 0.0f);
      else
        EXPECT_GT(p, 0.0f);
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
}

TEST(Attention, FutureTokensDoNotChangeEarlierOutputs) {
  const int64_t B = 1, T = 5, NH = 2, hs = 3, C = NH * hs;
  auto qkv = random_values(static_cast<size_t>(B * T * 3 * C), 2);
  std::vector<float> out(static_cast<size_t>(T * C)), att(static_cast<size_t>(NH * T * T));
  attention_forward(out.data(), att.data(), qkv.data(), B, T, NH, hs);
  const auto before = out;
  for (int64_t i = 0; i < 3 * C; ++i) qkv[static_cast<size_t>((T - 1) * 3 * C + i)] += 1.0f;
  attention_forward(out.data(), att.data(), qkv.data(), B, T, NH, hs);
  for (int64_t i = 0; i < (T - 1) * C; ++i) {
    EXPECT_EQ(out[static_cast<size_t>(i)], before[static_cast<size_t>(i)]);
  }
  EXPECT_NE(out[static_cast<size_t>((T - 1) * C)], before[static_cast<size_t>((T - 1) * C)]);
}

// Tensor parallelism hands a rank a subset of heads, laid out [Q_sub | K_sub | V_sub] per token.
TEST(Attention, ASubsetOfHeadsEqualsThoseHeadsOfTheFullLayer) {
  const int64_t B = 2, T = 4, NH = 4, hs = 3, C = NH * hs;
  const int64_t first = 2, local = 2, local_C = local * hs;
  auto qkv = random_values(static_cast<size_t>(B * T * 3 * C), 3);
  std::vector<float> out(static_cast<size_t>(B * T * C)), att(static_cast<size_t>(B * NH * T * T));
  attention_forward(out.data(), att.data(), qkv.data(), B, T, NH, hs);

  std::vector<float> local_qkv(static_cast<size_t>(B * T * 3 * local_C));
  for (int64_t token = 0; token < B * T; ++token) {
    for (int64_t part = 0; part < 3; ++part) {
      for (int64_t i = 0; i < local_C; ++i) {
        local_qkv[static_cast<size_t>(token * 3 * local_C + part * local_C + i)] =
            qkv[static_cast<size_t>(token * 3 * C + part * C + first * hs + i)];
      }
    }
  }
  std::vector<float> local_out(static_cast<size_t>(B * T * local_C));
  std::vector<float> local_att(static_cast<size_t>(B * local * T * T));
  attention_forward(local_out.data(), local_att.data(), local_qkv.data(), B, T, local, hs);
  for (int64_t token = 0; token < B * T; ++token) {
    for (int64_t i = 0; i < local_C; ++i) {
      EXPECT_EQ(local_out[static_cast<size_t>(token * local_C + i)],
                out[static_cast<size_t>(token * C + first * hs + i)]);
    }
  }
}

TEST(Attention, BackwardFiniteDifferences) {
  const int64_t B = 2, T = 5, NH = 2, hs = 3, C = NH * hs;
  auto qkv = random_values(static_cast<size_t>(B * T * 3 * C), 4);
  auto weights = random_values(static_cast<size_t>(B * T * C), 5);
  std::vector<float> out(weights.size()), att(static_cast<size_t>(B * NH * T * T));
  auto objective = [&] {
    attention_forward(out.data(), att.data(), qkv.data(), B, T, NH, hs);
    return weighted_sum(out, weights);
  };
  objective();
  std::vector<float> dqkv(qkv.size(), 0.0f);
  attention_backward(dqkv.data(), weights.data(), qkv.data(), att.data(), B, T, NH, hs);
  auto error = gradient_error(dqkv, numeric_gradient(qkv, objective, 1e-3f));
  EXPECT_LT(error.normwise, 1e-3);
  EXPECT_LT(error.worst, 1e-2);
}

bool is_bf16_value(float x) {
  float rounded = 0.0f;
  round_to_bf16(&rounded, &x, 1);
  return rounded == x;
}

TEST(Attention, Bf16ProductsMultiplyTheRoundedProbabilities) {
  const int64_t T = 7;
  const auto qkv = unit_rows_qkv(T, 2, 11);  // V = identity: out = P
  std::vector<float> out(static_cast<size_t>(T * T)), att(out.size());
  std::vector<float> fp32_out(out.size()), fp32_att(out.size());
  attention_forward(fp32_out.data(), fp32_att.data(), qkv.data(), 1, T, 1, T);
  attention_forward(out.data(), att.data(), qkv.data(), 1, T, 1, T, true);
  std::vector<float> rounded(fp32_att.size());
  round_to_bf16(rounded.data(), fp32_att.data(), static_cast<int64_t>(rounded.size()));
  int64_t unrounded = 0;
  for (size_t i = 0; i < att.size(); ++i) {
    EXPECT_EQ(att[i], rounded[i]) << i;  // the fp32 softmax, rounded once
    EXPECT_EQ(out[i], att[i]) << i;      // and P V multiplied what att keeps
    EXPECT_EQ(fp32_out[i], fp32_att[i]) << i;
    if (!is_bf16_value(fp32_att[i])) ++unrounded;
  }
  EXPECT_GT(unrounded, T) << "fp32 probabilities that are bf16 values already show nothing";
}

TEST(Attention, Bf16ProductsRoundTheScoreGradientsBeforeDqAndDk) {
  const int64_t T = 7;
  const auto qkv = unit_rows_qkv(T, 1, 12);  // K = identity: dQ = dS K = dS
  const auto dout = random_values(static_cast<size_t>(T * T), 13);
  std::vector<float> out(static_cast<size_t>(T * T)), att(out.size());
  attention_forward(out.data(), att.data(), qkv.data(), 1, T, 1, T, true);
  std::vector<float> dqkv(qkv.size(), 0.0f), fp32_dqkv(qkv.size(), 0.0f);
  attention_backward(fp32_dqkv.data(), dout.data(), qkv.data(), att.data(), 1, T, 1, T);
  attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), 1, T, 1, T, true);
  int64_t unrounded = 0;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t t2 = 0; t2 < T; ++t2) {
      const auto i = static_cast<size_t>(t * 3 * T + t2);  // dQ[t][t2] = dS[t][t2]
      float expected = fp32_dqkv[i];
      round_to_bf16(&expected, &expected, 1);
      EXPECT_EQ(dqkv[i], expected) << "dS[" << t << "][" << t2 << "]";
      if (!is_bf16_value(fp32_dqkv[i])) ++unrounded;
    }
  }
  EXPECT_GT(unrounded, T);
  // dV = P^T dY does not go through dS: the same in both (att and dout as given).
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < T; ++i) {
      const auto v = static_cast<size_t>(t * 3 * T + 2 * T + i);
      EXPECT_EQ(dqkv[v], fp32_dqkv[v]) << "dV[" << t << "][" << i << "]";
    }
  }
}

TEST(Attention, BackwardAccumulates) {
  const int64_t B = 1, T = 3, NH = 1, hs = 2, C = NH * hs;
  auto qkv = random_values(static_cast<size_t>(B * T * 3 * C), 6);
  auto dout = random_values(static_cast<size_t>(B * T * C), 7);
  std::vector<float> out(dout.size()), att(static_cast<size_t>(B * NH * T * T));
  attention_forward(out.data(), att.data(), qkv.data(), B, T, NH, hs);
  std::vector<float> once(qkv.size(), 0.0f), base = random_values(qkv.size(), 8);
  auto accumulated = base;
  attention_backward(once.data(), dout.data(), qkv.data(), att.data(), B, T, NH, hs);
  attention_backward(accumulated.data(), dout.data(), qkv.data(), att.data(), B, T, NH, hs);
  for (size_t i = 0; i < qkv.size(); ++i) EXPECT_NEAR(accumulated[i], base[i] + once[i], 1e-6);
}

}  // namespace
}  // namespace partrain::runner::ops
