#include "runner/ops/embedding.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/runner/ops/gradient_check.h"

namespace partrain::runner::ops {
namespace {

using testing::gradient_error;
using testing::numeric_gradient;
using testing::random_values;
using testing::weighted_sum;

constexpr int64_t B = 2, T = 3, C = 4, V = 7;
const std::vector<int32_t> kTokens = {6, 0, 3, 3, 5, 1};  // 3 repeats: its gradient rows add

TEST(Embedding, ForwardIsTokenRowPlusPositionRow) {
  auto wte = random_values(V * C, 1), wpe = random_values(T * C, 2);
  std::vector<float> out(B * T * C);
  embedding_forward(out.data(), kTokens.data(), wte.data(), wpe.data(), B, T, C);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const auto token = kTokens[static_cast<size_t>(b * T + t)];
      for (int64_t i = 0; i < C; ++i) {
        EXPECT_EQ(out[static_cast<size_t>((b * T + t) * C + i)],
                  wte[static_cast<size_t>(token * C + i)] + wpe[static_cast<size_t>(t * C + i)]);
      }
    }
  }
}

TEST(Embedding, BackwardFiniteDifferences) {
  auto wte = random_values(V * C, 3), wpe = random_values(T * C, 4);
  auto weights = random_values(B * T * C, 5);
  std::vector<float> out(B * T * C);
  auto objective = [&] {
    embedding_forward(out.data(), kTokens.data(), wte.data(), wpe.data(), B, T, C);
    return weighted_sum(out, weights);
  };
  std::vector<float> dwte(wte.size(), 0.0f), dwpe(wpe.size(), 0.0f);
  embedding_backward(dwte.data(), dwpe.data(), weights.data(), kTokens.data(), B, T, C);
  EXPECT_LT(gradient_error(dwte, numeric_gradient(wte, objective)).worst, 1e-3);
  EXPECT_LT(gradient_error(dwpe, numeric_gradient(wpe, objective)).worst, 1e-3);
  for (int64_t i = 0; i < C; ++i) EXPECT_EQ(dwte[static_cast<size_t>(2 * C + i)], 0.0f);  // unused
}

// Megatron's vocab-parallel embedding: shard outputs all-reduced (summed) equal the full lookup,
// with the position embedding added by exactly one shard; the shards' gradients tile dwte.
void check_shards(const std::vector<int64_t>& boundaries) {
  auto wte = random_values(V * C, 6), wpe = random_values(T * C, 7);
  auto dout = random_values(B * T * C, 8);
  std::vector<float> full(B * T * C), dwte_full(wte.size(), 0.0f), dwpe_full(wpe.size(), 0.0f);
  embedding_forward(full.data(), kTokens.data(), wte.data(), wpe.data(), B, T, C);
  embedding_backward(dwte_full.data(), dwpe_full.data(), dout.data(), kTokens.data(), B, T, C);

  std::vector<float> sum(full.size(), 0.0f), dwpe(wpe.size(), 0.0f);
  for (size_t s = 0; s + 1 < boundaries.size(); ++s) {
    const int64_t start = boundaries[s], end = boundaries[s + 1];
    const float* shard = wte.data() + start * C;
    const float* position = s == 0 ? wpe.data() : nullptr;
    std::vector<float> out(full.size());
    embedding_forward_vocab_range(out.data(), kTokens.data(), shard, position, B, T, C, start, end);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += out[i];

    std::vector<float> dshard(static_cast<size_t>((end - start) * C), 0.0f);
    embedding_backward_vocab_range(dshard.data(), s == 0 ? dwpe.data() : nullptr, dout.data(),
                                   kTokens.data(), B, T, C, start, end);
    for (size_t i = 0; i < dshard.size(); ++i) {
      EXPECT_EQ(dshard[i], dwte_full[static_cast<size_t>(start * C) + i]) << "shard " << s;
    }
  }
  for (size_t i = 0; i < sum.size(); ++i) EXPECT_FLOAT_EQ(sum[i], full[i]);
  EXPECT_EQ(dwpe, dwpe_full);
}

TEST(Embedding, TwoVocabShardsSumToTheFullEmbedding) { check_shards({0, 4, V}); }
TEST(Embedding, ThreeUnevenVocabShardsSumToTheFullEmbedding) { check_shards({0, 3, 5, V}); }

TEST(Embedding, TokensOutsideTheShardContributeZero) {
  auto wte = random_values(2 * C, 9);
  std::vector<float> out(B * T * C, 42.0f);
  embedding_forward_vocab_range(out.data(), kTokens.data(), wte.data(), nullptr, B, T, C, 3, 5);
  for (int64_t n = 0; n < B * T; ++n) {
    const auto token = kTokens[static_cast<size_t>(n)];
    const bool local = token >= 3 && token < 5;
    for (int64_t i = 0; i < C; ++i) {
      const float expected = local ? wte[static_cast<size_t>((token - 3) * C + i)] : 0.0f;
      EXPECT_EQ(out[static_cast<size_t>(n * C + i)], expected);
    }
  }
}

}  // namespace
}  // namespace partrain::runner::ops
