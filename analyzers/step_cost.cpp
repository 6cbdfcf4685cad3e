#include "analyzers/step_cost.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "analyzers/arrival_wait.h"
#include "memory/flops.h"
#include "memory/mesh_order.h"
#include "memory/pipeline.h"

namespace partrain::analyzers {
namespace {

using memory::mesh_stride;
using memory::MeshAxis;

// One micro-batch on one pipeline stage.
struct StageMicroBatch {
  double forward_s = 0;
  double backward_s = 0;  // recomputation included
  double recompute_s = 0;
  double tp_comm_s = 0;
  double cp_comm_s = 0;
  double ep_comm_s = 0;  // all_to_all dispatch and combine
  double layers = 0;
  int moe_blocks = 0;
  double layer_forward_s = 0;   // one block's forward (ZeRO-3 overlaps a unit's gather with it)
  double layer_backward_s = 0;  // one block's backward, its recompute included
  ComputeParts parts;           // forward + backward + recompute by kind
  double total() const { return forward_s + backward_s + tp_comm_s + cp_comm_s + ep_comm_s; }
};

// A block's times: a dense block's, and a mixture of experts' (its attention as a dense block's,
// its MLP the router and experts').
struct Blocks {
  BlockTimes dense;
  BlockTimes moe;
  ExpertForward experts;
  AllToAll all_to_all;
  double tp_exchange_s = 0;  // expert_tp_exchange_seconds
};

// The MLP's tensor-parallel all-gather/reduce-scatter pairs per block and micro-batch: forward,
// backward, and full recompute's forward.
int mlp_tp_pairs(memory::Recompute recompute) {
  return recompute == memory::Recompute::kFull ? 3 : 2;
}

// An MoE block: the block without its MLP, the experts' forward added (backward twice it, but
// for their special-function-paced activations, once).
BlockTimes moe_block(const BlockTimes& without_mlp, const ExpertForward& experts) {
  BlockTimes b = without_mlp;
  b.forward_s += experts.total();
  b.backward_s += 2 * experts.total() - experts.routed_special_s - experts.shared_special_s;
  return b;
}

Blocks blocks_for(const CostModel& cm, const memory::ResolvedLayout& r,
                  const memory::ActivationSetup& shape, const ComputeSpeed& speed) {
  Blocks b;
  b.dense = block_times(cm.model, shape, speed);
  if (!cm.model.is_moe()) return b;
  b.experts = expert_forward(cm.model, shape, r.layout.ep, speed);
  b.moe = moe_block(block_times(cm.model, shape, speed, BlockPart::kWithoutMlp), b.experts);
  b.all_to_all = expert_all_to_all(cm.comm, cm.model, shape, r.layout);
  b.tp_exchange_s = expert_tp_exchange_seconds(cm.comm, cm.model, shape, r.layout);
  return b;
}

int moe_blocks_of(const memory::ModelConfig& model, const memory::ResolvedLayout& r, size_t stage) {
  if (!model.is_moe()) return 0;
  int count = 0;
  for (int64_t layer : memory::stage_blocks(r, static_cast<int>(stage))) {
    count += model.is_moe_layer(layer) ? 1 : 0;
  }
  return count;
}

ComputeParts stage_parts(const BlockTimes& block, memory::Recompute recompute, double layers,
                         double head_s) {
  const BlockForward& f = block.parts;
  const bool full = recompute == memory::Recompute::kFull;
  const double core_recompute = recompute == memory::Recompute::kNone ? 0 : 1;
  // Forward, backward (twice the forward but for special_s, once), the recompute's forward.
  return {layers * f.gemm_s * (3 + (full ? 1 : 0)),
          layers * (f.memory_bound_s * (3 + (full ? 1 : 0)) - f.special_s),
          layers * (f.attention_core_s * (1 + core_recompute) + f.attention_core_backward_s),
          head_s};
}

// The MoE blocks' parts: their attention's (the block without its MLP) and their experts'.
void add_moe_parts(ComputeParts& parts, const Blocks& blocks, memory::Recompute recompute,
                   double moe_blocks) {
  const ComputeParts attention = stage_parts(blocks.moe, recompute, moe_blocks, 0);
  parts.gemm_s += attention.gemm_s;
  parts.memory_bound_s += attention.memory_bound_s;
  parts.attention_core_s += attention.attention_core_s;
  const double passes = moe_blocks * (recompute == memory::Recompute::kFull ? 4 : 3);
  parts.router_s = passes * blocks.experts.router_s;
  // The experts' activations paced by a special function: once backward, not twice.
  parts.routed_experts_s =
      passes * blocks.experts.routed_s - moe_blocks * blocks.experts.routed_special_s;
  parts.shared_experts_s =
      passes * blocks.experts.shared_s - moe_blocks * blocks.experts.shared_special_s;
}

// Adding one micro-batch's weight gradients into the accumulation buffer, in its backward: the
// stage's parameters on this GPU (their shard when ZeRO-2/3 reduce-scatters every micro-batch),
// `grad_accumulation_bytes` each at the memory-bound rate.
double grad_accumulation_seconds(const CostModel& cm, const memory::TrainingLayout& l,
                                 const memory::StageMemory& stage, const ComputeSpeed& speed) {
  if (cm.grad_accumulation_bytes <= 0) return 0;
  double params = stage.params_count;
  if (l.zero >= 2) {
    const double dense = stage.params_count - stage.expert_params_count;
    params = dense / (l.dp * l.cp) + stage.expert_params_count / memory::expert_data_ranks(l);
  }
  return memory_bound_seconds(params * cm.grad_accumulation_bytes, speed);
}

// How much longer `compute_s` of work lasts when `comm_s` of communication runs beside it: while
// both run the collective holds its SMs and the compute goes at its contended pace (all of it
// would take `contended_s`), after that at full speed; when the communication outlasts the
// contended compute, it sets the pace.
double overlap_extension(double comm_s, double compute_s, double contended_s) {
  if (comm_s <= 0) return 0;
  if (comm_s >= contended_s) return comm_s - compute_s;
  return comm_s * (1 - compute_s / std::max(contended_s, compute_s));
}

// One block's tensor-parallel collectives for one micro-batch, what each pass leaves exposed.
// Megatron: 2 all-reduces of b s h forward and 2 backward per block (Narayanan 2021 sec. 3.2;
// the MLP lecture model has one each way), 2 more when full recompute reruns the forward; with SP
// each is an all-gather plus a reduce-scatter of the same bytes, and the backward all-gathers
// each column-parallel layer's input again for its weight gradient (Korthikanti 2022 sec. 4.2.2).
struct TpBlockComm {
  double forward_s = 0;
  double recompute_s = 0;  // full recompute's forward again
  double backward_s = 0;
  double embedding_s = 0;  // the vocab-parallel embedding's sum (the first stage, once)
  double per_block() const { return forward_s + recompute_s + backward_s; }
};

// `alone` and `slow` are the dense block alone on its GPU and beside a collective.
TpBlockComm tp_block_comm(const CostModel& cm, const memory::ResolvedLayout& r,
                          const BlockForward& alone, const BlockForward& slow) {
  const memory::TrainingLayout& l = r.layout;
  TpBlockComm c;
  if (l.tp <= 1) return c;
  const bool transformer = cm.model.architecture == memory::Architecture::kTransformer;
  const double bytes = static_cast<double>(l.micro_batch) * static_cast<double>(r.seq) / l.cp *
                       static_cast<double>(cm.model.hidden) * cm.recipe.activation_bytes;
  const LinkLevel level = cm.comm.machines().level_of_group(l.tp, mesh_stride(MeshAxis::kTp, l));
  const double gather = cm.comm.seconds(CostedOp::kAllGather, bytes, l.tp, level);
  const double scatter = cm.comm.seconds(CostedOp::kReduceScatter, bytes, l.tp, level);
  const double one =
      l.sp ? gather + scatter : cm.comm.seconds(CostedOp::kAllReduce, bytes, l.tp, level);
  const double forward_ops = transformer ? 2 : 1;
  c.forward_s = forward_ops * one;
  if (l.recompute == memory::Recompute::kFull) c.recompute_s = forward_ops * one;
  c.embedding_s = transformer ? one : 0;
  const bool async_backward = transformer && cm.overlaps_communication && cm.tp_backward_overlap;
  if (!async_backward) {
    c.backward_s = forward_ops * (one + (l.sp ? gather : 0));
    return c;
  }
  // Megatron-LM since 2022 (LinearWithGradAccumulationAndAsyncCommunication): a column-parallel
  // layer's (QKV's, the MLP's up projection's) input gradient is all-reduced (with SP
  // reduce-scattered) while its weight gradient is computed, and with SP its input is re-gathered
  // while its input gradient is computed; the collective's SMs slow those GEMMs. The row-parallel
  // layers' gradient gathers (SP) stay in line.
  for (auto [gemm_s, slow_gemm_s] :
       {std::pair{alone.qkv_gemm_s, slow.qkv_gemm_s}, {alone.up_gemm_s, slow.up_gemm_s}}) {
    c.backward_s += l.sp ? gather + overlap_extension(gather, gemm_s, slow_gemm_s) +
                               overlap_extension(scatter, gemm_s, slow_gemm_s)
                         : overlap_extension(one, gemm_s, slow_gemm_s);
  }
  return c;
}

StageMicroBatch stage_micro_batch(const CostModel& cm, const memory::ResolvedLayout& r,
                                  size_t stage, const Blocks& blocks, const TpBlockComm& tp,
                                  double head_s, double grad_accumulation_s) {
  const memory::TrainingLayout& l = r.layout;
  const auto& m = cm.model;
  const double layers = static_cast<double>(r.stage_layers[stage]);
  const bool last = stage + 1 == r.stage_layers.size();
  StageMicroBatch mb;
  mb.layers = layers;
  mb.moe_blocks = moe_blocks_of(m, r, stage);
  const BlockTimes& block = blocks.dense;
  const double dense = layers - mb.moe_blocks;
  mb.recompute_s = dense * block.recompute_s(l.recompute);
  mb.forward_s = dense * block.forward_s;
  mb.backward_s = dense * block.backward_s + mb.recompute_s;
  mb.layer_forward_s = block.forward_s;
  mb.layer_backward_s = block.backward_s + block.recompute_s(l.recompute);
  if (mb.moe_blocks > 0) {
    const BlockTimes& moe = blocks.moe;
    const double moe_recompute = mb.moe_blocks * moe.recompute_s(l.recompute);
    mb.recompute_s += moe_recompute;
    mb.forward_s += mb.moe_blocks * moe.forward_s;
    mb.backward_s += mb.moe_blocks * moe.backward_s + moe_recompute;
    // ZeRO-3's unit is a block: the stage's average one.
    mb.layer_forward_s = mb.forward_s / layers;
    mb.layer_backward_s = mb.backward_s / layers;
    mb.ep_comm_s = mb.moe_blocks * all_to_alls_per_block(l.recompute) * blocks.all_to_all.seconds;
  }
  if (last) {
    mb.forward_s += head_s / 3;
    mb.backward_s += head_s * 2 / 3;
  }
  mb.parts = stage_parts(block, l.recompute, dense, last ? head_s : 0);
  if (mb.moe_blocks > 0) add_moe_parts(mb.parts, blocks, l.recompute, mb.moe_blocks);
  mb.backward_s += grad_accumulation_s;
  mb.layer_backward_s += grad_accumulation_s / std::max(layers, 1.0);
  mb.parts.grad_accumulation_s = grad_accumulation_s;
  const double elem = cm.recipe.activation_bytes;
  const double b = static_cast<double>(l.micro_batch);
  const double s = static_cast<double>(r.seq) / l.cp;
  const bool transformer = m.architecture == memory::Architecture::kTransformer;
  if (l.tp > 1) {
    mb.tp_comm_s = layers * tp.per_block();
    if (stage == 0) mb.tp_comm_s += tp.embedding_s;
    // Each waits for the last tp rank, which drifted over the compute since the one before: a
    // transformer block's attention and MLP halves (its MLP alone for the MLP model).
    const double each_way = transformer ? 2 : 1;
    auto wait = [&](double segment_s) {
      return each_way * arrival_wait_s(cm.arrival_drift, l.tp, segment_s / each_way);
    };
    double block_wait = wait(block.forward_s) + wait(block.backward_s);
    if (l.recompute == memory::Recompute::kFull) block_wait += wait(block.forward_s);
    mb.tp_comm_s += layers * block_wait;
    if (stage == 0 && transformer) mb.tp_comm_s += wait(block.forward_s) / each_way;
    mb.tp_comm_s += mb.moe_blocks * mlp_tp_pairs(l.recompute) * blocks.tp_exchange_s;
  }
  if (l.cp > 1 && transformer) {
    // Context parallelism passes K and V around the cp ranks forward, and again with their
    // gradients backward (Megatron-Core's ring attention): 2 gathers + 1 scatter per block.
    const double kv_bytes =
        2 * b * static_cast<double>(r.seq) * static_cast<double>(m.kv_dim()) / l.tp * elem;
    const LinkLevel level = cm.comm.machines().level_of_group(l.cp, mesh_stride(MeshAxis::kCp, l));
    const double comm = 2 * cm.comm.seconds(CostedOp::kAllGather, kv_bytes, l.cp, level) +
                        cm.comm.seconds(CostedOp::kReduceScatter, kv_bytes, l.cp, level);
    const double hidden_behind =
        cm.overlaps_communication ? block.attention_core_s + block.parts.attention_core_backward_s
                                  : 0;
    mb.cp_comm_s = layers * std::max(0.0, comm - hidden_behind);
  }
  return mb;
}

// A stage's micro-batch alone on its GPU and beside a collective (the collective's SMs taken).
struct Paces {
  const StageMicroBatch& alone;
  const StageMicroBatch& contended;
};

// A reduction overlapped bucket by bucket with the compute that produces its gradients (or, for
// gathers, consumes its weights): bucket i is reduced once its gradients exist, the reductions run
// one after another. All but the last bucket's run beside the compute after the first bucket was
// ready, slowing it; the last bucket's (`tail_s`) shows after it. When the reductions are slower
// than that window, they set the pace.
double bucketed_exposed(double comm_s, double tail_s, double window_s, double contended_window_s,
                        double bytes, double bucket_bytes) {
  const double buckets = std::max(1.0, std::ceil(bytes / std::max(1.0, bucket_bytes)));
  const double share = 1 - 1 / buckets;
  return tail_s + overlap_extension(comm_s - tail_s, window_s * share, contended_window_s * share);
}

// ZeRO-3/FSDP: each block (the unit) is gathered before its forward and again before its
// backward (and, where the framework does, for full recompute's repeated forward on its own:
// CostModel::zero3_regathers_for_recompute), its gradients reduce-scattered after; one unit is
// prefetched while the previous computes, slowing it by the SMs the collective holds. Per unit
// the slower of the two sets the pace, and the first gather and the last reduce-scatter never
// hide.
double zero3_exposed(const CostModel& cm, Paces pace, double gather_s, double scatter_s,
                     bool full_recompute) {
  const StageMicroBatch& mb = pace.alone;
  const StageMicroBatch& slow = pace.contended;
  if (mb.layers <= 0) return gather_s + scatter_s;
  const double unit_gather = gather_s / mb.layers;
  const double unit_scatter = scatter_s / mb.layers;
  auto exposed = [&](double comm, double compute, double contended_compute) {
    return cm.overlaps_communication ? overlap_extension(comm, compute, contended_compute) : comm;
  };
  // The recomputed forward behind a gather of its own, or inside the backward's window.
  const bool regathers = full_recompute && cm.zero3_regathers_for_recompute;
  const double recompute = regathers ? mb.layer_forward_s : 0;
  const double slow_recompute = regathers ? slow.layer_forward_s : 0;
  const double forward = exposed(unit_gather, mb.layer_forward_s, slow.layer_forward_s);
  const double regather = regathers ? exposed(unit_gather, recompute, slow_recompute) : 0;
  const double backward = exposed(unit_gather + unit_scatter, mb.layer_backward_s - recompute,
                                  slow.layer_backward_s - slow_recompute);
  return mb.layers * (forward + regather + backward) + unit_gather + unit_scatter;
}

// The ranks that hold the same weights of the heaviest stage and reduce their gradients: the
// dense weights' dp x cp (cp and dp are neighbours in the rank order: together one group, as
// strided as cp), a mixture's routed experts' dp x cp / ep (memory::expert_data_stride). ZeRO
// shards over all of them, or in a hybrid (memory::TrainingLayout::shard) over shard groups of
// neighbours whose replicas all-reduce the gradient shards.
struct WeightGroup {
  double params = 0;
  int ranks = 1;
  LinkLevel level = LinkLevel::kIntraNode;
  int shard = 1;  // ranks ZeRO's gathers and reduce-scatters span
  LinkLevel shard_level = LinkLevel::kIntraNode;
  int replicas = 1;  // ranks / shard
  LinkLevel replica_level = LinkLevel::kIntraNode;
};
struct WeightGroups {
  WeightGroup dense, experts;
  double params() const { return dense.params + experts.params; }
};

WeightGroup weight_group(const Machines& machines, double params, int ranks, int stride,
                         int shard) {
  WeightGroup g;
  g.params = params;
  g.ranks = ranks;
  g.level = machines.level_of_group(ranks, stride);
  g.shard = shard;
  g.shard_level = machines.level_of_group(shard, stride);
  g.replicas = ranks / shard;
  g.replica_level = machines.level_of_group(g.replicas, stride * shard);
  return g;
}

WeightGroups weight_groups(const CostModel& cm, const memory::TrainingLayout& l,
                           const memory::StageMemory& stage) {
  const Machines& machines = cm.comm.machines();
  return {weight_group(machines, stage.params_count - stage.expert_params_count, l.dp * l.cp,
                       mesh_stride(MeshAxis::kCp, l), memory::zero_shard_ranks(l)),
          weight_group(machines, stage.expert_params_count, memory::expert_data_ranks(l),
                       memory::expert_data_stride(l), memory::expert_shard_ranks(l))};
}

// One collective over a group's weights, `bytes` of them: an all-reduce over all its ranks,
// ZeRO's gathers over its shard group, a reduce-scatter over its shard group followed, in a
// hybrid, by the all-reduce of the shard over its replicas (PyTorch's HSDP, Megatron-LM's
// distributed optimizer instances).
double weight_collective_seconds(const CostModel& cm, const WeightGroup& g, CostedOp op,
                                 double bytes) {
  if (op != CostedOp::kReduceScatter && op != CostedOp::kAllGather) {
    return cm.comm.seconds(op, bytes, g.ranks, g.level);
  }
  double seconds = cm.comm.seconds(op, bytes, g.shard, g.shard_level);
  if (op == CostedOp::kReduceScatter && g.replicas > 1) {
    seconds += cm.comm.seconds(CostedOp::kAllReduce, bytes / g.shard, g.replicas, g.replica_level);
  }
  return seconds;
}

// One collective moving `bytes_per_param` of each group's weights.
double group_seconds(const CostModel& cm, const WeightGroup& g, CostedOp op,
                     double bytes_per_param) {
  return g.params > 0 ? weight_collective_seconds(cm, g, op, g.params * bytes_per_param) : 0;
}

// Gradient reduction (and ZeRO's parameter gathers) over the ranks that hold the same weights,
// less what hides behind the backward (or forward, for gathers). The experts' collectives run
// after the dense ones on the same stream; the last bucket, the first blocks' and embedding's,
// is dense.
double dp_exposed_seconds(const CostModel& cm, const memory::ResolvedLayout& r,
                          const WeightGroups& groups, Paces pace) {
  const memory::TrainingLayout& l = r.layout;
  const int ranks = l.dp * l.cp;
  if (ranks <= 1) return 0;
  const double params = groups.params();
  const double grads = params * cm.recipe.grad_bytes;
  const double weights = params * cm.recipe.param_bytes;
  const double m = static_cast<double>(r.micro_batches);
  const WeightGroup& dense = groups.dense;
  // Each group's weights, `per_param` bytes of each, over its own ranks.
  auto time = [&](CostedOp op, double per_param) {
    return group_seconds(cm, dense, op, per_param) +
           group_seconds(cm, groups.experts, op, per_param);
  };
  // The last bucket's collective.
  auto tail_time = [&](CostedOp op, double per_param) {
    return weight_collective_seconds(cm, dense, op,
                                     std::min(cm.bucket_bytes, dense.params * per_param));
  };
  const bool overlap_reduce = cm.overlaps_communication && cm.overlap_grad_reduce;
  const bool overlap_gather = cm.overlaps_communication && cm.overlap_param_gather;
  auto reduce = [&](CostedOp op) {
    const double comm = time(op, cm.recipe.grad_bytes);
    const double tail = tail_time(op, cm.recipe.grad_bytes);
    return overlap_reduce ? bucketed_exposed(comm, tail, pace.alone.backward_s,
                                             pace.contended.backward_s, grads, cm.bucket_bytes)
                          : comm;
  };
  auto behind_forward = [&](double comm) {
    const double tail = tail_time(CostedOp::kAllGather, cm.recipe.param_bytes);
    return overlap_gather ? bucketed_exposed(comm, tail, pace.alone.forward_s,
                                             pace.contended.forward_s, weights, cm.bucket_bytes)
                          : comm;
  };
  const double reduce_scatter = time(CostedOp::kReduceScatter, cm.recipe.grad_bytes);
  const double gather = time(CostedOp::kAllGather, cm.recipe.param_bytes);
  switch (l.zero) {
    case 0:  // DDP: all-reduce with the last micro-batch's backward
      return reduce(CostedOp::kAllReduce);
    case 1:  // reduce-scatter likewise, then all-gather the updated weights
      return reduce(cm.zero1_all_reduce ? CostedOp::kAllReduce : CostedOp::kReduceScatter) +
             behind_forward(gather);
    case 2:  // gradients are reduce-scattered after every micro-batch's backward
      return m * reduce(CostedOp::kReduceScatter) + behind_forward(gather);
    default:
      return m * zero3_exposed(cm, pace, gather, reduce_scatter,
                               l.recompute == memory::Recompute::kFull);
  }
}

// The optimizer step's passes over each parameter's bytes, as Megatron-LM's mixed-precision
// optimizer makes them (megatron/core/optimizer: copy the gradients to fp32 main gradients when
// they are 16-bit, the gradient norm for clipping, the fused Adam, the updated main weights copied
// to the 16-bit model weights) and the gradient buffer zeroed for the next step.
double optimizer_bytes_per_param(const memory::PrecisionRecipe& recipe) {
  const bool master = recipe.param_bytes < 4;  // fp32 main weights beside 16-bit model weights
  const double fp32_grad = 4;
  const double main_grads = master && recipe.grad_bytes < 4 ? recipe.grad_bytes + fp32_grad : 0;
  const double norm = fp32_grad;
  // Adam reads and writes its fp32 states (the main weights among them when kept), reads the
  // gradient, and without main weights reads and writes the weights themselves.
  const double adam =
      2 * recipe.optimizer_bytes + fp32_grad + (master ? 0 : 2 * recipe.param_bytes);
  const double copy_back = master ? 4 + recipe.param_bytes : 0;
  const double zero_grads = recipe.grad_bytes;
  return main_grads + norm + adam + copy_back + zero_grads;
}

// The step over this rank's parameters (with ZeRO each group's share of them).
double optimizer_seconds(const CostModel& cm, const WeightGroups& groups, int zero) {
  const double local = zero >= 1 ? groups.dense.params / groups.dense.shard +
                                       groups.experts.params / groups.experts.shard
                                 : groups.params();
  return local * optimizer_bytes_per_param(cm.recipe) / cm.optimizer_bandwidth;
}

// A pipeline's p2p (PipelineP2p): with scatter/gather each of the t ranks of a stage sends its 1/t
// of the b s h activation over its own link, and without SP the receiving stage all-gathers the t
// pieces over the tensor-parallel link. On the critical path every micro-batch crosses the p v - 1
// chunk boundaries forward and back: m v + p - 1 each way.
double pipeline_p2p_seconds(const CostModel& cm, const memory::ResolvedLayout& r) {
  const memory::TrainingLayout& l = r.layout;
  const double elem = cm.recipe.activation_bytes;
  const double activation = static_cast<double>(l.micro_batch) * static_cast<double>(r.seq) / l.cp *
                            static_cast<double>(cm.model.hidden) * elem;
  const Machines& machines = cm.comm.machines();
  const LinkLevel pp_level = machines.level_of_group(l.pp, mesh_stride(MeshAxis::kPp, l));
  // With SP the activation is already split over the tensor-parallel ranks.
  const bool split = cm.pipeline_p2p != PipelineP2p::kFull || l.sp;
  double one =
      cm.comm.seconds(CostedOp::kSendRecv, split ? activation / l.tp : activation, 2, pp_level);
  if (split && !l.sp && l.tp > 1) {
    const LinkLevel tp_level = machines.level_of_group(l.tp, mesh_stride(MeshAxis::kTp, l));
    one += cm.comm.seconds(CostedOp::kAllGather, activation, l.tp, tp_level);
  }
  const double fill_and_drain = static_cast<double>(l.pp - 1);
  if (cm.pipeline_p2p != PipelineP2p::kScatterGather) {
    // DeepSpeed's engine sends and receives one at a time, each blocking its stage's compute:
    // every micro-batch's activation received and sent, its gradient received and sent.
    return (4 * static_cast<double>(r.micro_batches * l.vpp) + 2 * fill_and_drain) * one;
  }
  // Megatron pairs each send with the receive that follows it (send_forward_recv_backward).
  return 2 * (static_cast<double>(r.micro_batches * l.vpp) + fill_and_drain) * one;
}

std::string_view largest_term(const StepCost& c) {
  const CostTerms terms = cost_terms(c);
  return std::max_element(terms.begin(), terms.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

ComputeParts scaled(const ComputeParts& p, double m) {
  return {m * p.gemm_s,           m * p.memory_bound_s,     m * p.attention_core_s,
          m * p.head_s,           m * p.router_s,           m * p.routed_experts_s,
          m * p.shared_experts_s, m * p.grad_accumulation_s};
}

// What --explain and --json say of a mixture of experts' terms.
ExpertStep expert_step(const CostModel& cm, const memory::TrainingLayout& l, const Blocks& blocks,
                       const StageMicroBatch& slowest, const WeightGroups& groups) {
  ExpertStep e;
  e.moe = cm.model.is_moe();
  if (!e.moe) return e;
  e.moe_blocks = slowest.moe_blocks;
  e.forward = blocks.experts;
  e.all_to_all = blocks.all_to_all;
  e.all_to_alls = slowest.moe_blocks * all_to_alls_per_block(l.recompute);
  e.tp_exchange_s = blocks.tp_exchange_s;
  e.tp_exchanges = e.tp_exchange_s != 0 ? slowest.moe_blocks * mlp_tp_pairs(l.recompute) : 0;
  const CostedOp reduction = l.zero == 0 || (l.zero == 1 && cm.zero1_all_reduce)
                                 ? CostedOp::kAllReduce
                                 : CostedOp::kReduceScatter;
  e.dense_grad_s = group_seconds(cm, groups.dense, reduction, cm.recipe.grad_bytes);
  e.expert_grad_s = group_seconds(cm, groups.experts, reduction, cm.recipe.grad_bytes);
  e.data_ranks = groups.dense.ranks;
  e.expert_data_ranks = groups.experts.ranks;
  e.dense_grad_level = groups.dense.level;
  e.expert_grad_level = groups.experts.level;
  return e;
}

}  // namespace

CostTerms cost_terms(const StepCost& c) {
  return {{{"compute", c.compute_s},
           {"tp_comm", c.tp_comm_s},
           {"cp_comm", c.cp_comm_s},
           {"ep_comm", c.ep_comm_s},
           {"bubble", c.bubble_s},
           {"pp_comm", c.pp_comm_s},
           {"dp_comm", c.dp_comm_s},
           {"optimizer", c.optimizer_s},
           {"shared_device", c.shared_device_s},
           {"overhead", c.overhead_s}}};
}

CostModel cost_model_for(const memory::ModelConfig& model, const memory::PrecisionRecipe& recipe,
                         const memory::GpuSpec& gpu, Machines machines) {
  CostModel cm{model, recipe, CollectiveCost(std::move(machines)),
               {},    0,      gpu.overlaps_communication};
  cm.speed = compute_speed(gpu, recipe.activation_bytes >= 4);
  cm.optimizer_bandwidth = gpu.hbm_bandwidth * gpu.memory_efficiency;
  return cm;
}

StepCost step_cost(const CostModel& cm, const memory::MemoryEstimate& estimate) {
  const memory::ResolvedLayout& r = estimate.layout;
  const memory::TrainingLayout& l = r.layout;
  const memory::ActivationSetup shape = memory::activation_setup(r, cm.recipe.activation_bytes);
  const ComputeSpeed speed = cm.speed;
  const Blocks blocks = blocks_for(cm, r, shape, speed);
  const ComputeSpeed beside_comm = contended(speed);
  const Blocks contended_blocks = blocks_for(cm, r, shape, beside_comm);
  // The LM head runs over Megatron's padded vocabulary.
  memory::ModelConfig padded = cm.model;
  padded.vocab = memory::megatron_padded_vocab(cm.model.vocab, l.tp);
  const double head_s = head_seconds(padded, shape, speed);
  const double contended_head_s = head_seconds(padded, shape, beside_comm);
  const TpBlockComm tp = tp_block_comm(cm, r, blocks.dense.parts, contended_blocks.dense.parts);

  // The heaviest stage sets the pipeline's pace; its weights set the gradient traffic.
  StageMicroBatch slowest, slowest_contended;
  size_t heaviest_weights = 0;
  for (size_t stage = 0; stage < r.stage_layers.size(); ++stage) {
    const double accumulation_s = grad_accumulation_seconds(cm, l, estimate.stages[stage], speed);
    StageMicroBatch mb = stage_micro_batch(cm, r, stage, blocks, tp, head_s, accumulation_s);
    if (mb.total() > slowest.total()) {
      slowest = mb;
      slowest_contended =
          stage_micro_batch(cm, r, stage, contended_blocks, tp, contended_head_s, accumulation_s);
    }
    if (estimate.stages[stage].params_count > estimate.stages[heaviest_weights].params_count) {
      heaviest_weights = stage;
    }
  }
  const WeightGroups groups = weight_groups(cm, l, estimate.stages[heaviest_weights]);
  const double m = static_cast<double>(r.micro_batches);
  // Passes of the heaviest rank's blocks per step: m over the copies of a stage it holds (under
  // DualPipe a stage of each direction, its blocks both, each direction carrying half of m).
  const double passes = m / memory::parameter_copies(l.schedule);
  StepCost c;
  c.compute_s = passes * (slowest.forward_s + slowest.backward_s);
  c.compute_parts = scaled(slowest.parts, passes);
  c.recompute_s = passes * slowest.recompute_s;
  c.tp_comm_s = passes * slowest.tp_comm_s;
  c.cp_comm_s = passes * slowest.cp_comm_s;
  c.ep_comm_s = passes * slowest.ep_comm_s;
  // DualPipe(V) pairs one micro-batch's forward with another's backward and runs each one's
  // all_to_all under the other's compute (DeepSeek-V3 report sec. 3.2.1): what compute cannot
  // cover stays exposed.
  const bool all_to_all_overlapped =
      l.pp > 1 && (l.schedule == memory::PipelineSchedule::kDualPipe ||
                   l.schedule == memory::PipelineSchedule::kDualPipeV);
  if (all_to_all_overlapped) c.ep_comm_s = std::max(0.0, c.ep_comm_s - c.compute_s);
  if (l.pp > 1) {
    // The schedule's bubble over the ideal time, the fraction `partrain memory` reports:
    // Narayanan 2021 sec. 2.2 for GPipe, 1F1B and interleaved, (p - 1)/(3m) for ZB-H1 and
    // DualPipeV with the backward split evenly in B and W, (p - 2)/(3m) for DualPipe.
    c.bubble_fraction = memory::bubble_fraction(l.schedule, l.pp, r.micro_batches, l.vpp);
    c.bubble_s = c.bubble_fraction * passes * slowest.total();
    c.pp_comm_s = pipeline_p2p_seconds(cm, r);
  }
  c.dp_comm_s = dp_exposed_seconds(cm, r, groups, {slowest, slowest_contended});
  if (const int replicas = l.dp * l.cp; replicas > 1) {
    // The gradient reduction waits for the last replica, which drifted over the step's work
    // since they last synchronised (ZeRO-2 and 3 synchronise every micro-batch).
    const double syncs = l.zero >= 2 ? passes : 1;
    c.dp_comm_s +=
        syncs * arrival_wait_s(cm.arrival_drift, replicas, passes * slowest.total() / syncs);
  }
  c.optimizer_s = optimizer_seconds(cm, groups, l.zero);
  c.experts = expert_step(cm, l, blocks, slowest, groups);
  c.experts.all_to_all_overlapped = all_to_all_overlapped;
  const BlockTimes& dense = blocks.dense;
  c.block = {!cm.model.is_moe() || cm.model.moe.dense_layers > 0, dense.forward_s + tp.forward_s,
             dense.backward_s + dense.recompute_s(l.recompute) + tp.backward_s + tp.recompute_s};
  const double path = c.compute_s + c.tp_comm_s + c.cp_comm_s + c.bubble_s + c.pp_comm_s +
                      c.dp_comm_s + c.optimizer_s + c.ep_comm_s;
  // Ranks sharing a compute device (CPU cores, Gloo ranks on one GPU) cannot all compute at full
  // speed: the step lasts at least the node's compute work spread over its devices. Idle time
  // in the pipeline's bubble is then not lost, other ranks use the device.
  const double gpus = static_cast<double>(l.dp) * l.tp * l.pp * l.cp;
  const double sharing = cm.comm.machines().device_sharing(static_cast<int>(gpus));
  const double shared = sharing * (c.compute_s + c.optimizer_s) + c.exposed_comm_s();
  // One device per rank: the path is the step (the two sums differ only by their rounding).
  c.shared_device_s = sharing > 1 ? std::max(0.0, shared - path) : 0;
  const double modelled = path + c.shared_device_s;
  c.overhead_s = (cm.step_scale - 1) * modelled;
  c.step_s = modelled + c.overhead_s;
  const double batch = static_cast<double>(r.global_batch);
  const double seq = static_cast<double>(r.seq);
  c.model_flops = memory::training_flops(cm.model, batch, seq, memory::Recompute::kNone);
  // No step does the model's FLOPs faster than every GPU at its peak (MFU 100%): a calibration
  // that asks for less (a trace too short or damaged to time) is held there, and says so.
  const double peak_bound_s = c.model_flops / (gpus * cm.speed.peak_flops);
  if (c.step_s < peak_bound_s) {
    c.overhead_s += peak_bound_s - c.step_s;
    c.step_s = peak_bound_s;
    c.held_at_peak = true;
  }
  c.tokens_per_s = batch * seq / c.step_s;
  c.mfu = memory::mfu(c.model_flops, c.step_s, gpus, cm.speed.peak_flops);
  c.bottleneck = largest_term(c);
  return c;
}

}  // namespace partrain::analyzers
