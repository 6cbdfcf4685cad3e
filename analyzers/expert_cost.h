// The mixture-of-experts terms of the recommender's step model (DESIGN.md "Recommender"): one
// MoE block's router, routed experts and shared experts on one rank, through compute_cost's
// shape-aware GEMM model, and the all_to_all that dispatches tokens to the experts' ranks and
// combines their outputs.
#pragma once

#include "analyzers/collective_cost.h"
#include "analyzers/compute_cost.h"
#include "memory/activations.h"
#include "memory/model_config.h"
#include "memory/training_layout.h"

namespace partrain::analyzers {

// One MoE block's MLP for one micro-batch on one rank, forward seconds. Each backward is twice
// its forward (GEMMs and memory-bound work, as compute_cost's blocks).
struct ExpertForward {
  double router_s = 0;  // the router GEMM (h -> experts) and its fp32 softmax and top-k (with SP
                        // on the rank's 1/t of the tokens)
  double routed_s = 0;           // the local experts' GEMMs and activations, tokens permuted in/out
  double shared_s = 0;           // the shared experts every token runs through
  // Of routed_s and of shared_s, the activations' part a special function paces (BlockForward's
  // special_s): their backward evaluates it once again, not twice.
  double routed_special_s = 0;
  double shared_special_s = 0;
  int local_experts = 0;         // routed experts per rank: experts / ep
  double tokens_per_expert = 0;  // rows of each local expert's GEMMs
  double total() const { return router_s + routed_s + shared_s; }
};

// Rows each local expert's GEMMs run over: the ep group's tokens (ep x the rank's b s / cp) sent
// top_k times, spread evenly over the experts (a balanced router), times the capacity factor
// when experts are capped (the padded slots are computed too).
double tokens_per_expert(const memory::ModelConfig& model, const memory::ActivationSetup& shape,
                         int ep);

// The experts split by t (expert tensor parallelism) and ep; zero for a dense model.
ExpertForward expert_forward(const memory::ModelConfig& model, const memory::ActivationSetup& shape,
                             int ep, const ComputeSpeed& speed);

// One dispatch (or combine) all_to_all of one MoE block and micro-batch: each rank sends its
// tokens' top_k copies (times the capacity factor when capped), (ep - 1)/ep of them to other
// ranks, over the link its ep group lies on (memory::expert_stride). With SP a rank dispatches
// its 1/t of the sequence.
struct AllToAll {
  double bytes = 0;  // a rank's send buffer: b s / cp (/ t with SP) x top_k x h x activation bytes
  double seconds = 0;
  int ranks = 1;  // ep
  LinkLevel level = LinkLevel::kIntraNode;
};
AllToAll expert_all_to_all(const CollectiveCost& comm, const memory::ModelConfig& model,
                           const memory::ActivationSetup& shape,
                           const memory::TrainingLayout& layout);

// With SP and tp > 1 (which Megatron-Core requires of a mixture of experts) the MLP's
// all-gather over tp before it and reduce-scatter after move the dispatched copies (top_k x the
// capacity factor of the tokens) instead of the tokens: what one such pair costs beyond the
// dense block's, counted in tp_comm as often as the MLP's pair (forward, backward, full
// recompute's forward).
double expert_tp_exchange_seconds(const CollectiveCost& comm, const memory::ModelConfig& model,
                                  const memory::ActivationSetup& shape,
                                  const memory::TrainingLayout& layout);

// All_to_alls per MoE block and micro-batch: dispatch and combine forward and their gradients
// backward (4), 2 more when full recompute reruns the forward.
int all_to_alls_per_block(memory::Recompute recompute);

}  // namespace partrain::analyzers
