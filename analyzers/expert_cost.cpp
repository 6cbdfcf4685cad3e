#include "analyzers/expert_cost.h"

#include "memory/mesh_order.h"

namespace partrain::analyzers {
namespace {

double d(int64_t value) { return static_cast<double>(value); }

double rank_tokens(const memory::ActivationSetup& shape) {
  return shape.micro_batch * shape.seq / shape.cp;
}

// The tokens a rank routes and dispatches: with SP its 1/t of the sequence (Megatron-Core's MoE
// layer takes the sequence-parallel input as it is), else all of them.
double dispatching_tokens(const memory::ActivationSetup& shape) {
  return rank_tokens(shape) / (shape.sp ? shape.tp : 1);
}

// Copies of a token the experts compute: top_k, times the capacity factor when capped.
double slots_per_token(const memory::MixtureOfExperts& moe) {
  return d(moe.top_k) * (moe.capacity_factor > 0 ? moe.capacity_factor : 1);
}

// An MLP's forward seconds, and of them the part a special function paces.
struct MlpSeconds {
  double total_s = 0, special_s = 0;
};
MlpSeconds mlp_seconds(const MlpForward& mlp, const ComputeSpeed& speed) {
  const ElementwiseSeconds activation = mlp.activation(speed);
  return {mlp.up_gemm_s + mlp.down_gemm_s + activation.total(), activation.special_s};
}

}  // namespace

double tokens_per_expert(const memory::ModelConfig& model, const memory::ActivationSetup& shape,
                         int ep) {
  return rank_tokens(shape) * ep * slots_per_token(model.moe) / d(model.moe.experts);
}

ExpertForward expert_forward(const memory::ModelConfig& model, const memory::ActivationSetup& shape,
                             int ep, const ComputeSpeed& speed) {
  ExpertForward f;
  if (!model.is_moe()) return f;
  const memory::MixtureOfExperts& moe = model.moe;
  const double tokens = dispatching_tokens(shape);
  const double h = d(model.hidden);
  const double e = shape.element_bytes;
  const double experts = d(moe.experts);
  // The router's logits in fp32: written, read by the softmax, its probabilities written and read
  // by the top-k.
  f.router_s = gemm_seconds(tokens, experts, h, 1, e, speed) +
               memory_bound_seconds(4 * 4 * tokens * experts, speed);
  f.local_experts = static_cast<int>(moe.experts / ep);
  f.tokens_per_expert = tokens_per_expert(model, shape, ep);
  // The local experts in one grouped GEMM per projection.
  const MlpForward experts_mlp =
      mlp_forward(model, f.tokens_per_expert, d(moe.expert_ffn), shape, speed, f.local_experts);
  // The dispatched copies are permuted into expert order and back (read and written each way).
  const double permuted = 2 * 2 * tokens * slots_per_token(moe) * h * e;
  const MlpSeconds routed = mlp_seconds(experts_mlp, speed);
  f.routed_s = routed.total_s + memory_bound_seconds(permuted, speed);
  f.routed_special_s = routed.special_s;
  if (moe.shared_experts > 0) {
    // The shared experts run as one MLP of their summed width (DeepSeekMoE fuses them).
    const MlpForward shared = mlp_forward(model, rank_tokens(shape),
                                          d(moe.shared_experts * moe.expert_ffn), shape, speed);
    const MlpSeconds shared_seconds = mlp_seconds(shared, speed);
    f.shared_s = shared_seconds.total_s;
    f.shared_special_s = shared_seconds.special_s;
  }
  return f;
}

AllToAll expert_all_to_all(const CollectiveCost& comm, const memory::ModelConfig& model,
                           const memory::ActivationSetup& shape,
                           const memory::TrainingLayout& layout) {
  AllToAll a;
  if (!model.is_moe()) return a;
  a.ranks = layout.ep;
  a.bytes = dispatching_tokens(shape) * slots_per_token(model.moe) * d(model.hidden) *
            shape.element_bytes;
  a.level = comm.machines().level_of_group(layout.ep, memory::expert_stride(layout));
  a.seconds = comm.seconds(CostedOp::kAllToAll, a.bytes, layout.ep, a.level);
  return a;
}

double expert_tp_exchange_seconds(const CollectiveCost& comm, const memory::ModelConfig& model,
                                  const memory::ActivationSetup& shape,
                                  const memory::TrainingLayout& layout) {
  if (!model.is_moe() || !shape.sp || layout.tp < 2) return 0;
  const LinkLevel level =
      comm.machines().level_of_group(layout.tp, memory::mesh_stride(memory::MeshAxis::kTp, layout));
  const double block = rank_tokens(shape) * d(model.hidden) * shape.element_bytes;
  const double dispatched = block * slots_per_token(model.moe);
  auto pair = [&](double bytes) {
    return comm.seconds(CostedOp::kAllGather, bytes, layout.tp, level) +
           comm.seconds(CostedOp::kReduceScatter, bytes, layout.tp, level);
  };
  return pair(dispatched) - pair(block);
}

int all_to_alls_per_block(memory::Recompute recompute) {
  return recompute == memory::Recompute::kFull ? 6 : 4;
}

}  // namespace partrain::analyzers
