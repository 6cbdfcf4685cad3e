// A mixture of experts' routing decisions, on the host, from the router's logits: the softmax
// over all experts (the load-balancing loss reads it), the top-k experts of each token (ties go
// to the lower expert index, so every layout picks the same), the gates (Mixtral: a softmax over
// the k chosen logits), and which choices an expert's capacity drops. The capacity and the
// load-balancing loss are statistics of the whole micro-batch over every data-parallel rank: the
// caller all-gathers each rank's RouterCounts, and RouterStatistics orders the tokens by their
// global position (rank by rank, then position on the rank), so that no split changes them.
#pragma once

#include <cstdint>
#include <vector>

namespace partrain::runner {

struct Routing {
  int64_t tokens = 0;
  int experts = 0;
  int top_k = 0;
  std::vector<float> probs;     // tokens x experts: softmax over every logit
  std::vector<int32_t> choice;  // tokens x top_k: expert indices, best first
  std::vector<float> gate;      // tokens x top_k: softmax over the chosen logits
  std::vector<uint8_t> kept;    // tokens x top_k: 0 where the capacity dropped the choice
};

// Softmax, top-k and gates of `tokens` rows of `experts` logits; every choice kept.
Routing route_tokens(const float* logits, int64_t tokens, int experts, int top_k);

// One rank's share of the statistics: choices per expert and the sum of each expert's
// probability over its tokens, as the floats a collective carries (exact below 2^24 tokens).
std::vector<float> router_counts(const Routing& routing);  // 2 x experts: counts, then sums

// The statistics over the ranks that split the micro-batch, from every rank's router_counts
// (rank-major, as all_gather returns them).
struct RouterStatistics {
  std::vector<int64_t> tokens_per_expert;  // over all ranks
  std::vector<double> probability_mass;    // P_i x tokens: each expert's summed probability
  std::vector<int64_t> before_this_rank;   // choices of each expert on the lower ranks
  int64_t tokens = 0;                      // over all ranks
  int64_t capacity = 0;                    // choices an expert takes; 0: dropless
  double aux_loss = 0;                     // E x sum_i f_i P_i
};
RouterStatistics router_statistics(const std::vector<float>& gathered, int ranks, int rank,
                                   int experts, int top_k, int64_t tokens_per_rank,
                                   double capacity_factor);

// Drops the choices over each expert's capacity, in global token order; returns how many this
// rank dropped.
int64_t apply_capacity(const RouterStatistics& statistics, Routing& routing);

// dL/d(logits) (tokens x experts, overwritten) from dL/d(gate) of each choice (0 where dropped)
// and the load-balancing loss's weight in the objective: d(weight x aux)/dP through the full
// softmax, f_i taken as a constant (Switch, Fedus 2021).
void router_backward(const Routing& routing, const RouterStatistics& statistics,
                     const std::vector<float>& d_gate, double aux_weight, float* d_logits);

}  // namespace partrain::runner
