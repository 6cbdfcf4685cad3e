#include "runner/workload/moe_router.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace partrain::runner {

Routing route_tokens(const float* logits, int64_t tokens, int experts, int top_k) {
  Routing r;
  r.tokens = tokens;
  r.experts = experts;
  r.top_k = top_k;
  const auto E = static_cast<size_t>(experts);
  const auto k = static_cast<size_t>(top_k);
  r.probs.resize(static_cast<size_t>(tokens) * E);
  r.choice.resize(static_cast<size_t>(tokens) * k);
  r.gate.resize(static_cast<size_t>(tokens) * k);
  r.kept.assign(static_cast<size_t>(tokens) * k, 1);
  std::vector<int32_t> order(E);
  std::vector<double> exps;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits + static_cast<size_t>(t) * E;
    const float max = *std::max_element(row, row + E);
    exps.resize(E);
    double sum = 0;
    for (size_t e = 0; e < E; ++e) sum += exps[e] = std::exp(static_cast<double>(row[e] - max));
    float* probs = r.probs.data() + static_cast<size_t>(t) * E;
    for (size_t e = 0; e < E; ++e) probs[e] = static_cast<float>(exps[e] / sum);
    // The k largest logits (only those are ordered); of equal ones the lower index wins.
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(
        order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
        [row](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    int32_t* choice = r.choice.data() + static_cast<size_t>(t) * k;
    float* gate = r.gate.data() + static_cast<size_t>(t) * k;
    double chosen_sum = 0;
    for (size_t c = 0; c < k; ++c) {
      choice[c] = order[c];
      chosen_sum += std::exp(static_cast<double>(row[order[c]] - row[order[0]]));
    }
    for (size_t c = 0; c < k; ++c) {
      gate[c] = static_cast<float>(std::exp(static_cast<double>(row[order[c]] - row[order[0]])) /
                                   chosen_sum);
    }
  }
  return r;
}

std::vector<float> router_counts(const Routing& r) {
  const auto E = static_cast<size_t>(r.experts);
  std::vector<float> counts(2 * E, 0.0f);
  std::vector<double> mass(E, 0.0);
  for (size_t i = 0; i < r.choice.size(); ++i) counts[static_cast<size_t>(r.choice[i])] += 1;
  for (size_t i = 0; i < r.probs.size(); ++i) mass[i % E] += r.probs[i];
  for (size_t e = 0; e < E; ++e) counts[E + e] = static_cast<float>(mass[e]);
  return counts;
}

RouterStatistics router_statistics(const std::vector<float>& gathered, int ranks, int rank,
                                   int experts, int top_k, int64_t tokens_per_rank,
                                   double capacity_factor) {
  RouterStatistics s;
  const auto E = static_cast<size_t>(experts);
  s.tokens_per_expert.assign(E, 0);
  s.probability_mass.assign(E, 0.0);
  s.before_this_rank.assign(E, 0);
  s.tokens = tokens_per_rank * ranks;
  for (int from = 0; from < ranks; ++from) {
    const float* counts = gathered.data() + static_cast<size_t>(from) * 2 * E;
    for (size_t e = 0; e < E; ++e) {
      const auto n = static_cast<int64_t>(std::lround(counts[e]));
      s.tokens_per_expert[e] += n;
      s.probability_mass[e] += counts[E + e];
      if (from < rank) s.before_this_rank[e] += n;
    }
  }
  if (capacity_factor > 0) {
    // GShard / Megatron-LM: an even share of the k choices of every token, times the factor.
    s.capacity = static_cast<int64_t>(std::ceil(capacity_factor * static_cast<double>(s.tokens) *
                                                top_k / static_cast<double>(experts)));
  }
  // f_i = choices of i / (tokens x k), P_i = mass of i / tokens: 1 when perfectly balanced.
  const double tokens = static_cast<double>(s.tokens);
  for (size_t e = 0; e < E; ++e) {
    const double f = static_cast<double>(s.tokens_per_expert[e]) / (tokens * top_k);
    s.aux_loss += f * s.probability_mass[e] / tokens;
  }
  s.aux_loss *= experts;
  return s;
}

int64_t apply_capacity(const RouterStatistics& s, Routing& r) {
  if (s.capacity == 0) return 0;
  std::vector<int64_t> taken = s.before_this_rank;
  int64_t dropped = 0;
  // A token names an expert at most once, so an expert's queue is in token order.
  for (size_t i = 0; i < r.choice.size(); ++i) {
    int64_t& slots = taken[static_cast<size_t>(r.choice[i])];
    r.kept[i] = slots < s.capacity ? 1 : 0;
    ++slots;
    if (r.kept[i] == 0) ++dropped;
  }
  return dropped;
}

void router_backward(const Routing& r, const RouterStatistics& s, const std::vector<float>& d_gate,
                     double aux_weight, float* d_logits) {
  const auto E = static_cast<size_t>(r.experts);
  const auto k = static_cast<size_t>(r.top_k);
  const double tokens = static_cast<double>(s.tokens);
  // d(weight x aux)/dP_i(token) = weight x E x f_i / tokens.
  std::vector<double> d_prob(E);
  for (size_t e = 0; e < E; ++e) {
    const double f = static_cast<double>(s.tokens_per_expert[e]) / (tokens * r.top_k);
    d_prob[e] = aux_weight * r.experts * f / tokens;
  }
  for (int64_t t = 0; t < r.tokens; ++t) {
    float* out = d_logits + static_cast<size_t>(t) * E;
    const float* probs = r.probs.data() + static_cast<size_t>(t) * E;
    double dot = 0;
    for (size_t e = 0; e < E; ++e) dot += probs[e] * d_prob[e];
    for (size_t e = 0; e < E; ++e) out[e] = static_cast<float>(probs[e] * (d_prob[e] - dot));
    // The gates' softmax over the chosen logits: dl_c = g_c (dg_c - sum_c' g_c' dg_c').
    const size_t first = static_cast<size_t>(t) * k;
    double gated = 0;
    for (size_t c = 0; c < k; ++c) gated += r.gate[first + c] * d_gate[first + c];
    for (size_t c = 0; c < k; ++c) {
      out[r.choice[first + c]] +=
          static_cast<float>(r.gate[first + c] * (d_gate[first + c] - gated));
    }
  }
}

}  // namespace partrain::runner
