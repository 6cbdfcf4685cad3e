#include "analyzers/step_cost.h"

#include <algorithm>
#include <utility>

#include "memory/flops.h"
#include "memory/mesh_order.h"

namespace partrain::analyzers {
namespace {

using memory::MeshAxis;
using memory::mesh_stride;

// One micro-batch on one pipeline stage.
struct StageMicroBatch {
  double forward_s = 0;
  double backward_s = 0;  // recomputation included
  double recompute_s = 0;
  double tp_comm_s = 0;
  double cp_comm_s = 0;
  double total() const { return forward_s + backward_s + tp_comm_s + cp_comm_s; }
};

StageMicroBatch stage_micro_batch(const CostModel& cm, const memory::ResolvedLayout& r,
                                  size_t stage, const BlockTimes& block, double head_s) {
  const memory::TrainingLayout& l = r.layout;
  const auto& m = cm.model;
  const double layers = static_cast<double>(r.stage_layers[stage]);
  StageMicroBatch mb;
  mb.recompute_s = layers * block.recompute_s(l.recompute);
  mb.forward_s = layers * block.forward_s;
  mb.backward_s = layers * block.backward_s + mb.recompute_s;
  if (stage + 1 == r.stage_layers.size()) {
    mb.forward_s += head_s / 3;
    mb.backward_s += head_s * 2 / 3;
  }
  const double elem = cm.recipe.activation_bytes;
  const double b = static_cast<double>(l.micro_batch);
  const double s = static_cast<double>(r.seq) / l.cp;
  const bool transformer = m.architecture == memory::Architecture::kTransformer;
  if (l.tp > 1) {
    // Megatron: 2 all-reduces of b s h forward and 2 backward per block (Narayanan 2021 sec.
    // 3.2; the MLP lecture model has one each way), 2 more when full recompute reruns the
    // forward; with SP each is an all-gather plus a reduce-scatter of the same bytes.
    const double bytes = b * s * static_cast<double>(m.hidden) * elem;
    double per_block = transformer ? 4 : 2;
    if (l.recompute == memory::Recompute::kFull) per_block += transformer ? 2 : 1;
    const LinkLevel level = cm.comm.machines().level_of_group(l.tp, mesh_stride(MeshAxis::kTp, l));
    const double one = l.sp ? cm.comm.seconds(CostedOp::kAllGather, bytes, l.tp, level) +
                                  cm.comm.seconds(CostedOp::kReduceScatter, bytes, l.tp, level)
                            : cm.comm.seconds(CostedOp::kAllReduce, bytes, l.tp, level);
    mb.tp_comm_s = layers * per_block * one;
    if (stage == 0 && transformer) mb.tp_comm_s += one;  // the vocab-parallel embedding's sum
  }
  if (l.cp > 1 && transformer) {
    // Context parallelism passes K and V around the cp ranks forward, and again with their
    // gradients backward (Megatron-Core's ring attention): 2 gathers + 1 scatter per block.
    const double kv_bytes = 2 * b * static_cast<double>(r.seq) *
                            static_cast<double>(m.kv_dim()) / l.tp * elem;
    const LinkLevel level = cm.comm.machines().level_of_group(l.cp, mesh_stride(MeshAxis::kCp, l));
    const double comm = 2 * cm.comm.seconds(CostedOp::kAllGather, kv_bytes, l.cp, level) +
                        cm.comm.seconds(CostedOp::kReduceScatter, kv_bytes, l.cp, level);
    const double hidden_behind = cm.overlaps_communication ? 3 * block.attention_core_s : 0;
    mb.cp_comm_s = layers * std::max(0.0, comm - hidden_behind);
  }
  return mb;
}

// Gradient reduction (and ZeRO's parameter gathers) over the dp x cp ranks that hold the same
// weights, less what hides behind one micro-batch's backward (or forward, for gathers).
double dp_exposed_seconds(const CostModel& cm, const memory::ResolvedLayout& r, double params,
                          const StageMicroBatch& mb) {
  const memory::TrainingLayout& l = r.layout;
  const int ranks = l.dp * l.cp;
  if (ranks <= 1) return 0;
  // cp and dp are neighbours in the rank order: together one group, as strided as cp.
  const LinkLevel level = cm.comm.machines().level_of_group(ranks, mesh_stride(MeshAxis::kCp, l));
  const double grads = params * cm.recipe.grad_bytes;
  const double weights = params * cm.recipe.param_bytes;
  const double m = static_cast<double>(r.micro_batches);
  auto time = [&](CostedOp op, double bytes) { return cm.comm.seconds(op, bytes, ranks, level); };
  auto hidden = [&](double comm, double compute) {
    return cm.overlaps_communication ? std::max(0.0, comm - compute) : comm;
  };
  const double reduce_scatter = time(CostedOp::kReduceScatter, grads);
  const double gather = time(CostedOp::kAllGather, weights);
  switch (l.zero) {
    case 0: {
      // DDP: buckets all-reduce during the last micro-batch's backward; the last one never hides.
      const double all_reduce = time(CostedOp::kAllReduce, grads);
      const double tail = time(CostedOp::kAllReduce, std::min(cm.bucket_bytes, grads));
      return std::max(hidden(all_reduce, mb.backward_s), tail);
    }
    case 1: {
      const double tail = time(CostedOp::kReduceScatter, std::min(cm.bucket_bytes, grads));
      return std::max(hidden(reduce_scatter, mb.backward_s), tail) + hidden(gather, mb.forward_s);
    }
    case 2:  // gradients are reduce-scattered after every micro-batch's backward
      return m * hidden(reduce_scatter, mb.backward_s) + hidden(gather, mb.forward_s);
    default:  // ZeRO-3/FSDP: gather for forward and backward, reduce-scatter, every micro-batch
      return m * (hidden(gather, mb.forward_s) + hidden(gather + reduce_scatter, mb.backward_s));
  }
}

// AdamW streams its fp32 states (read and written), the gradient and the weights.
double optimizer_seconds(const CostModel& cm, const memory::ResolvedLayout& r, double params) {
  const memory::TrainingLayout& l = r.layout;
  const double local = l.zero >= 1 ? params / (l.dp * l.cp) : params;
  const double bytes = 2 * cm.recipe.optimizer_bytes + cm.recipe.grad_bytes + 2 * cm.recipe.param_bytes;
  return local * bytes / cm.optimizer_bandwidth;
}

std::string_view largest_term(const StepCost& c) {
  const CostTerms terms = cost_terms(c);
  return std::max_element(terms.begin(), terms.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

}  // namespace

CostTerms cost_terms(const StepCost& c) {
  return {{{"compute", c.compute_s},
           {"tp_comm", c.tp_comm_s},
           {"cp_comm", c.cp_comm_s},
           {"bubble", c.bubble_s},
           {"pp_comm", c.pp_comm_s},
           {"dp_comm", c.dp_comm_s},
           {"optimizer", c.optimizer_s},
           {"shared_device", c.shared_device_s},
           {"overhead", c.overhead_s}}};
}

StepCost step_cost(const CostModel& cm, const memory::MemoryEstimate& estimate) {
  const memory::ResolvedLayout& r = estimate.layout;
  const memory::TrainingLayout& l = r.layout;
  const memory::ActivationSetup shape = memory::activation_setup(r, cm.recipe.activation_bytes);
  const BlockTimes block = block_times(cm.model, shape, cm.speed);
  const double head_s = head_seconds(cm.model, shape, cm.speed);

  // The heaviest stage sets the pipeline's pace; its weights set the gradient traffic.
  StageMicroBatch slowest;
  double params = 0;
  for (size_t stage = 0; stage < r.stage_layers.size(); ++stage) {
    StageMicroBatch mb = stage_micro_batch(cm, r, stage, block, head_s);
    if (mb.total() > slowest.total()) slowest = mb;
    params = std::max(params, estimate.stages[stage].params_count);
  }
  const double m = static_cast<double>(r.micro_batches);
  StepCost c;
  c.compute_s = m * (slowest.forward_s + slowest.backward_s);
  c.recompute_s = m * slowest.recompute_s;
  c.tp_comm_s = m * slowest.tp_comm_s;
  c.cp_comm_s = m * slowest.cp_comm_s;
  if (l.pp > 1) {
    // Narayanan 2021 sec. 2.2: (p - 1)/v micro-batch times of fill and drain; every micro-batch
    // crosses each of the p x v - 1 chunk boundaries forward and back, and the critical path
    // waits for m v + p - 1 of those transfers each way.
    c.bubble_s = static_cast<double>(l.pp - 1) / l.vpp * slowest.total();
    const double elem = cm.recipe.activation_bytes;
    double bytes = static_cast<double>(l.micro_batch) * static_cast<double>(r.seq) / l.cp *
                   static_cast<double>(cm.model.hidden) * elem;
    if (l.sp) bytes /= l.tp;  // Megatron sends the sequence-parallel shard
    const int stride = mesh_stride(MeshAxis::kPp, l);
    const double p2p = cm.comm.seconds(CostedOp::kSendRecv, bytes, 2,
                                       cm.comm.machines().level_of_group(2, stride));
    c.pp_comm_s = 2 * (m * l.vpp + l.pp - 1) * p2p;
  }
  c.dp_comm_s = dp_exposed_seconds(cm, r, params, slowest);
  c.optimizer_s = optimizer_seconds(cm, r, params);
  const double path = c.compute_s + c.tp_comm_s + c.cp_comm_s + c.bubble_s + c.pp_comm_s +
                      c.dp_comm_s + c.optimizer_s;
  // Ranks sharing a compute device (CPU cores, Gloo ranks on one GPU) cannot all compute at full
  // speed: the step lasts at least the node's compute work spread over its devices. Idle time
  // in the pipeline's bubble is then not lost, other ranks use the device.
  const double gpus = static_cast<double>(l.dp) * l.tp * l.pp * l.cp;
  const double sharing = cm.comm.machines().device_sharing(static_cast<int>(gpus));
  const double shared = sharing * (c.compute_s + c.optimizer_s) + c.exposed_comm_s();
  c.shared_device_s = std::max(0.0, shared - path);
  const double modelled = path + c.shared_device_s;
  c.overhead_s = (cm.step_scale - 1) * modelled;
  c.step_s = modelled + c.overhead_s;
  const double batch = static_cast<double>(r.global_batch);
  const double seq = static_cast<double>(r.seq);
  c.model_flops = memory::training_flops(cm.model, batch, seq, memory::Recompute::kNone);
  c.tokens_per_s = batch * seq / c.step_s;
  c.mfu = memory::mfu(c.model_flops, c.step_s, gpus, cm.speed.peak_flops);
  c.bottleneck = largest_term(c);
  return c;
}

}  // namespace partrain::analyzers
