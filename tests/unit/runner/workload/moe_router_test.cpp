// The mixture of experts' routing against values worked out by hand: the top-k tie-break (the
// lower expert index wins), Mixtral's gates, the capacity and the drops in global token order,
// the load-balancing loss (Switch's E x sum_i f_i P_i) and the router's backward (against
// central differences of the gates and the loss).
#include "runner/workload/moe_router.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace partrain::runner {
namespace {

TEST(MoeRouter, EqualLogitsGoToTheLowerExpertIndex) {
  // Token 0: experts 1 and 3 tie for first, 0 and 2 for third. Token 1: all four tie.
  const std::vector<float> logits = {0.5f, 2.0f, 0.5f, 2.0f,  //
                                     1.0f, 1.0f, 1.0f, 1.0f};
  const Routing r = route_tokens(logits.data(), 2, 4, 3);
  EXPECT_EQ(r.choice, (std::vector<int32_t>{1, 3, 0, 0, 1, 2}));
}

TEST(MoeRouter, GatesAreTheSoftmaxOverTheChosenLogits) {
  const std::vector<float> logits = {std::log(3.0f), 0.0f, std::log(1.0f / 3), 5.0f};
  // Top-2 of [ln 3, 0, -ln 3, 5]: experts 3 then 0; gates e^5 / (e^5 + 3) and 3 / (e^5 + 3).
  const Routing r = route_tokens(logits.data(), 1, 4, 2);
  ASSERT_EQ(r.choice, (std::vector<int32_t>{3, 0}));
  const double e5 = std::exp(5.0);
  EXPECT_NEAR(r.gate[0], e5 / (e5 + 3), 1e-6);
  EXPECT_NEAR(r.gate[1], 3 / (e5 + 3), 1e-6);
  // The full softmax beside them: [3, 1, 1/3, e^5] / (4 1/3 + e^5).
  const double sum = 3 + 1 + 1.0 / 3 + e5;
  EXPECT_NEAR(r.probs[0], 3 / sum, 1e-6);
  EXPECT_NEAR(r.probs[2], (1.0 / 3) / sum, 1e-6);
}

// Two ranks of 3 tokens each, top-1 over 2 experts. Every token prefers expert 0 but rank 1's
// last one. Capacity = ceil(factor x 6 tokens x 1 / 2 experts).
std::vector<float> two_rank_counts(std::vector<Routing>& routed) {
  const std::vector<std::vector<float>> logits = {{2, 0, 2, 0, 2, 0}, {2, 0, 2, 0, 0, 2}};
  std::vector<float> gathered;
  for (const auto& l : logits) {
    routed.push_back(route_tokens(l.data(), 3, 2, 1));
    const std::vector<float> counts = router_counts(routed.back());
    gathered.insert(gathered.end(), counts.begin(), counts.end());
  }
  return gathered;
}

TEST(MoeRouter, StatisticsAreTheWholeMicroBatchsOverEveryRank) {
  std::vector<Routing> routed;
  const std::vector<float> gathered = two_rank_counts(routed);
  const RouterStatistics s = router_statistics(gathered, 2, 1, 2, 1, 3, 0);
  EXPECT_EQ(s.tokens, 6);
  EXPECT_EQ(s.tokens_per_expert, (std::vector<int64_t>{5, 1}));
  EXPECT_EQ(s.before_this_rank, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(s.capacity, 0);  // dropless
  // p = e^2 / (e^2 + 1) for the preferred expert. f = (5/6, 1/6); P = (5p + (1 - p), 5(1 - p) +
  // p) / 6; aux = 2 (f0 P0 + f1 P1).
  const double p = std::exp(2.0) / (std::exp(2.0) + 1);
  const double P0 = (5 * p + (1 - p)) / 6, P1 = (5 * (1 - p) + p) / 6;
  EXPECT_NEAR(s.aux_loss, 2 * (5.0 / 6 * P0 + 1.0 / 6 * P1), 1e-6);
  // A perfectly even router gives 1: 3 tokens, one per expert, each with probabilities 1/3 (a
  // mass of 1 per expert).
  const std::vector<float> even = {1, 1, 1, 1, 1, 1};
  EXPECT_NEAR(router_statistics(even, 1, 0, 3, 1, 3, 0).aux_loss, 1.0, 1e-6);
}

TEST(MoeRouter, TheCapacityDropsTheLaterTokensInGlobalOrder) {
  std::vector<Routing> routed;
  const std::vector<float> gathered = two_rank_counts(routed);
  // factor 1: capacity ceil(6 / 2) = 3, all taken by rank 0's tokens: rank 1's two expert-0
  // tokens are dropped, its expert-1 token kept.
  const RouterStatistics on_rank0 = router_statistics(gathered, 2, 0, 2, 1, 3, 1.0);
  const RouterStatistics on_rank1 = router_statistics(gathered, 2, 1, 2, 1, 3, 1.0);
  EXPECT_EQ(on_rank1.capacity, 3);
  EXPECT_EQ(apply_capacity(on_rank0, routed[0]), 0);
  EXPECT_EQ(apply_capacity(on_rank1, routed[1]), 2);
  EXPECT_EQ(routed[1].kept, (std::vector<uint8_t>{0, 0, 1}));
  // factor 1.5: capacity ceil(4.5) = 5: nothing dropped.
  std::vector<Routing> again;
  const std::vector<float> counts = two_rank_counts(again);
  EXPECT_EQ(router_statistics(counts, 2, 1, 2, 1, 3, 1.5).capacity, 5);
  EXPECT_EQ(apply_capacity(router_statistics(counts, 2, 1, 2, 1, 3, 1.5), again[1]), 0);
}

// L = sum_c w_c gate_c + weight x aux, with aux's f held constant: the router's backward against
// central differences of the logits.
TEST(MoeRouter, BackwardMatchesCentralDifferences) {
  const int E = 4, k = 2;
  std::vector<float> logits = {0.3f, -0.2f, 0.9f, 0.1f, -0.5f, 0.4f, 0.2f, 0.0f};
  const std::vector<float> w = {0.7f, -1.3f, 0.4f, 2.0f};  // dL/dgate per choice
  const double weight = 0.5;
  const Routing base = route_tokens(logits.data(), 2, E, k);
  const RouterStatistics stats = router_statistics(router_counts(base), 1, 0, E, k, 2, 0);
  auto objective = [&](const std::vector<float>& l) {
    const Routing r = route_tokens(l.data(), 2, E, k);
    double value = 0;
    for (size_t c = 0; c < r.gate.size(); ++c) value += w[c] * r.gate[c];
    // aux with the routing's counts frozen: E sum_i f_i P_i.
    for (int e = 0; e < E; ++e) {
      const double f = static_cast<double>(stats.tokens_per_expert[e]) / (2.0 * k);
      const double P = (r.probs[e] + r.probs[E + e]) / 2.0;
      value += weight * E * f * P;
    }
    return value;
  };
  std::vector<float> d_logits(logits.size());
  router_backward(base, stats, w, weight, d_logits.data());
  for (size_t i = 0; i < logits.size(); ++i) {
    std::vector<float> up = logits, down = logits;
    up[i] += 1e-3f;
    down[i] -= 1e-3f;
    EXPECT_NEAR(d_logits[i], (objective(up) - objective(down)) / 2e-3, 2e-3) << "logit " << i;
  }
}

}  // namespace
}  // namespace partrain::runner
