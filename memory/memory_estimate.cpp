#include "memory/memory_estimate.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

#include "memory/activations.h"
#include "memory/comm_buffers.h"
#include "memory/kv_cache.h"
#include "memory/parameter_count.h"
#include "memory/pipeline.h"
#include "memory/pipeline_order.h"

namespace partrain::memory {
namespace {

constexpr double kCudaContextBytes = 512.0 * 1024 * 1024;
constexpr double kNcclBytes = 512.0 * 1024 * 1024;
constexpr double kFragmentation = 0.05;
// Byte counts are printed and stored as int64: an estimate past 2^62 B (4 EiB, some 10^11 H100s)
// comes from inputs no job has, and would wrap into negative numbers on the way out.
constexpr double kMaxEstimateBytes = 4.611686018427387904e18;

// Whether pipeline rank `stage` holds model chunk `chunk`: the schedule's placement
// (memory/pipeline_order.h; DualPipeV's rank 0 holds both ends of its V, DualPipe's ranks 0 and
// pp - 1 both ends of the model, one per direction).
bool holds_chunk(const ResolvedLayout& r, int stage, size_t chunk) {
  const TrainingLayout& l = r.layout;
  const std::vector<int> held = rank_chunks(l.schedule, l.pp, l.vpp, stage);
  return std::find(held.begin(), held.end(), static_cast<int>(chunk)) != held.end();
}
bool holds_first(const ResolvedLayout& r, int stage) { return holds_chunk(r, stage, 0); }
bool holds_last(const ResolvedLayout& r, int stage) {
  return holds_chunk(r, stage, r.chunk_layers.size() - 1);
}

const char* largest_category(const StageMemory& s) {
  const std::pair<const char*, double> categories[] = {
      {"params", s.params},           {"grads", s.grads}, {"optimizer", s.optimizer},
      {"activations", s.activations}, {"comm", s.comm},   {"kv_cache", s.kv_cache}};
  return std::max_element(std::begin(categories), std::end(categories),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

double training_activations(const EstimateInput& in, const ResolvedLayout& r, int stage,
                            double in_flight) {
  if (in.model.is_bare()) return 0;
  const ActivationSetup a = activation_setup(r, in.recipe.activation_bytes);
  double bytes = 0;
  // Full recompute: while a block's backward runs, its recomputed activations are alive beside
  // the stored block inputs (its own input among them, so that is not counted twice).
  double recomputed = 0;
  ActivationSetup working = a;
  working.recompute = Recompute::kNone;
  for (int64_t layer : stage_blocks(r, stage)) {
    const double stored = layer_activation_bytes(in.model, a, layer);
    bytes += stored * in_flight;
    if (in.layout.recompute == Recompute::kFull) {
      recomputed = std::max(recomputed, layer_activation_bytes(in.model, working, layer) - stored);
    }
  }
  if (holds_first(r, stage)) bytes += embedding_activation_bytes(in.model, a) * in_flight;
  const bool mlp = in.model.architecture == Architecture::kMlp;
  // The MLP's stage output is its last layer's GeLU output, written while that layer's working
  // set is alive and kept until it is sent: one layer's width beside so few, it shows.
  if (!holds_last(r, stage)) {
    return bytes + recomputed + (mlp ? output_activation_bytes(in.model, a) : 0);
  }
  // The last stage holds the head's activations of one micro-batch (GPipe: of all). The head of
  // the micro-batch in backward is freed before its last block is recomputed (autograd releases
  // the loss's graph as it goes), so the two peaks do not add.
  // The MLP's head is the last layer's own output, written while that layer's working set is
  // alive (its GeLU reads the kept input): there the two add.
  const bool all_held = in.layout.schedule == PipelineSchedule::kGpipe;
  const double held = all_held ? static_cast<double>(r.micro_batches) : 1.0;
  const double output = output_activation_bytes(in.model, a);
  if (mlp) return bytes + held * output + recomputed;
  return bytes + (held - 1) * output + std::max(output, recomputed);
}

// A forward pass only: one block's working set and the last position's fp32 logits.
double inference_activations(const EstimateInput& in, const ResolvedLayout& r) {
  if (in.model.is_bare()) return 0;
  ActivationSetup a = activation_setup(r, in.recipe.activation_bytes);
  a.seq = static_cast<double>(std::max<int64_t>(in.kv_len, 1));
  a.dropout = 0;
  const double logits = 4 * a.micro_batch * static_cast<double>(in.model.vocab) / a.tp;
  return layer_activation_bytes(in.model, a) + logits;
}

StageMemory estimate_stage(const EstimateInput& in, const ResolvedLayout& r, int stage) {
  const auto& l = in.layout;
  StageMemory m;
  m.stage = stage;
  m.layers = r.stage_layers[static_cast<size_t>(stage)];
  const StageParams held = stage_param_split(in.model, r, stage);
  m.params_count = held.total();
  m.expert_params_count = held.experts;
  if (in.inference) {
    m.params = m.params_count * in.recipe.param_bytes;
    m.activations = inference_activations(in, r);
    m.kv_cache = kv_cache_bytes(in.model, static_cast<double>(l.micro_batch),
                                static_cast<double>(in.kv_len + in.gen_len),
                                static_cast<double>(m.layers), l.tp, in.recipe.activation_bytes);
  } else {
    // The ranks that hold the same weights: dp x cp (context-parallel ranks split the sequence,
    // not the model), over which gradients reduce and Megatron's distributed optimizer shards
    // (a hybrid over each shard group). Routed experts' weights are shared by the dp x cp / ep
    // ranks that hold the same experts.
    const int data_ranks = l.dp * l.cp;
    const ModelStateBytes dense =
        model_state_bytes(held.dense, in.recipe, l.zero, zero_shard_ranks(l));
    const ModelStateBytes experts =
        model_state_bytes(held.experts, in.recipe, l.zero, expert_shard_ranks(l));
    m.params = dense.params + experts.params;
    m.grads = dense.grads + experts.grads;
    m.optimizer = dense.optimizer + experts.optimizer;
    m.in_flight = in_flight_micro_batches(l.schedule, l.pp, l.vpp, r.micro_batches, stage);
    m.activations = training_activations(in, r, stage, m.in_flight);
    const double reduce_grad_bytes = in.reduce_grad_bytes.value_or(in.recipe.grad_bytes);
    CommBufferInput comm;
    comm.dp = data_ranks;
    comm.pp = l.pp;
    comm.zero = l.zero;
    comm.backward_units = backward_units(in.model, r, stage);
    comm.bucket_bytes = in.zero2_stages_units && l.zero == 2
                            ? largest_adjacent_pair(comm.backward_units) * reduce_grad_bytes
                            : in.bucket_bytes;
    if (in.zero3_reduce_bucket) comm.zero3_reduce_bucket_bytes = in.bucket_bytes;
    comm.grad_bytes_per_rank = m.params_count * reduce_grad_bytes;
    comm.param_bytes = in.recipe.param_bytes;
    comm.grad_bytes = reduce_grad_bytes;
    if (!in.model.is_bare() && in.model.architecture == Architecture::kTransformer) {
      comm.boundary_activation_bytes = in.recipe.activation_bytes *
                                       static_cast<double>(r.seq / l.cp * l.micro_batch * in.model.hidden) /
                                       (l.sp ? l.tp : 1);
    }
    m.comm = comm_buffer_bytes(comm);
  }
  const double other = m.total();
  m.reserve = in.reserve_bytes.value_or(default_reserve(other).total());
  return m;
}

}  // namespace

ActivationSetup activation_setup(const ResolvedLayout& r, double element_bytes) {
  const TrainingLayout& l = r.layout;
  ActivationSetup a;
  a.micro_batch = static_cast<double>(l.micro_batch);
  a.seq = static_cast<double>(r.seq);
  a.cp = l.cp;
  a.tp = l.tp;
  a.sp = l.sp;
  a.recompute = l.recompute;
  a.flash_attention = l.flash_attention;
  a.dropout = l.dropout;
  a.element_bytes = element_bytes;
  return a;
}

ReserveBreakdown default_reserve(double other_bytes) {
  return {kCudaContextBytes, kNcclBytes, kFragmentation * other_bytes};
}

std::vector<int64_t> stage_blocks(const ResolvedLayout& r, int stage) {
  std::vector<int64_t> blocks;
  int64_t first = 0;
  // Chunk c's layers follow chunk c-1's; the schedule places the chunks (pipeline_order.h).
  for (size_t c = 0; c < r.chunk_layers.size(); ++c) {
    if (holds_chunk(r, stage, c)) {
      for (int64_t layer = first; layer < first + r.chunk_layers[c]; ++layer) {
        blocks.push_back(layer);
      }
    }
    first += r.chunk_layers[c];
  }
  return blocks;
}

StageParams stage_param_split(const ModelConfig& model, const ResolvedLayout& r, int stage) {
  const int tp = r.layout.tp, pp = r.layout.pp, ep = r.layout.ep;
  if (model.is_bare()) {
    // DualPipe's ranks each hold two stages, one per direction: two copies of the model.
    const double copies = parameter_copies(r.layout.schedule);
    return {copies * model.bare_params / (static_cast<double>(tp) * pp), 0};
  }
  StageParams params;
  for (int64_t layer : stage_blocks(r, stage)) {
    const LayerParams block = layer_params(model, layer);
    params.dense += block.dense_per_rank(tp);
    params.experts += block.experts_per_rank(tp, ep);
  }
  if (model.architecture == Architecture::kMlp) return params;
  const bool first = holds_first(r, stage);
  if (first) {
    params.dense += word_embedding_params(model) / tp + position_params(model);
    if (model.embedding_norm) params.dense += norm_params(model);
  }
  if (holds_last(r, stage)) {
    params.dense += norm_params(model) + lm_head_params(model) / tp;
    if (model.tied_embeddings && !first) params.dense += word_embedding_params(model) / tp;
  }
  return params;
}

double stage_params(const ModelConfig& model, const ResolvedLayout& r, int stage) {
  return stage_param_split(model, r, stage).total();
}

std::vector<double> backward_units(const ModelConfig& model, const ResolvedLayout& r, int stage) {
  std::vector<double> units;
  if (model.is_bare()) return units;
  const int tp = r.layout.tp;
  const bool transformer = model.architecture != Architecture::kMlp;
  if (transformer && holds_last(r, stage)) {
    // The final norm's gradients are reduced before the head's: the head's meet the last block.
    const double head =
        model.tied_embeddings ? word_embedding_params(model) : lm_head_params(model);
    units.push_back(norm_params(model));
    units.push_back(head / tp);
  }
  // A block's neighbours in the order are blocks from the third on: three show every peak (the
  // last three, which backward reaches first; a mixture of experts' leading dense blocks are
  // only ever the first).
  const std::vector<int64_t> blocks = stage_blocks(r, stage);
  const size_t shown = std::min<size_t>(blocks.size(), 3);
  for (size_t i = blocks.size() - shown; i < blocks.size(); ++i) {
    units.push_back(layer_params(model, blocks[i]).per_rank(tp, r.layout.ep));
  }
  if (transformer && holds_first(r, stage)) {
    units.push_back(word_embedding_params(model) / tp);
    if (position_params(model) > 0) units.push_back(position_params(model));
    if (model.embedding_norm) units.push_back(norm_params(model));
  }
  return units;
}

StageBytes whole_bytes(const StageMemory& s) {
  auto round = [](double bytes) {
    return static_cast<int64_t>(std::llround(std::max(0.0, bytes)));
  };
  return {round(s.params), round(s.grads),    round(s.optimizer), round(s.activations),
          round(s.comm),   round(s.kv_cache), round(s.reserve)};
}

StatusOr<MemoryEstimate> estimate_memory(const EstimateInput& input) {
  RETURN_IF_ERROR(validate_model(input.model));
  MemoryEstimate estimate;
  ASSIGN_OR_RETURN(estimate.layout, resolve_layout(input.layout, input.model));
  if (input.inference && input.kv_len + input.gen_len < 1 && !input.model.is_bare()) {
    return invalid_argument("--inference needs --kv-len and/or --gen-len (tokens in the KV cache)");
  }
  estimate.capacity_bytes = input.capacity_bytes;
  estimate.total_params = total_params(input.model);
  estimate.active_params = active_params(input.model);
  for (int stage = 0; stage < input.layout.pp; ++stage) {
    estimate.stages.push_back(estimate_stage(input, estimate.layout, stage));
    const StageMemory& added = estimate.stages.back();
    if (!(added.total() <= kMaxEstimateBytes)) {  // also NaN
      return invalid_argument(
          "the estimate is {:.3g} B per GPU (pipeline stage {}, mostly {}), past the 4 EiB "
          "partrain counts: check --seq, --micro-batch, --layers, --hidden and --params",
          added.total(), stage, largest_category(added));
    }
    if (estimate.stages.back().total() > estimate.stages[estimate.heaviest].total()) {
      estimate.heaviest = static_cast<size_t>(stage);
    }
  }
  return estimate;
}

}  // namespace partrain::memory
