#include "memory/explain.h"

#include <fmt/format.h>

#include <algorithm>

#include "memory/activations.h"
#include "memory/flops.h"
#include "memory/kv_cache.h"
#include "memory/parameter_count.h"
#include "memory/pipeline.h"
#include "memory/pipeline_order.h"

namespace partrain::memory {
namespace {

std::string count(double value) { return fmt::format("{:.4g}", value); }

// A mixture of experts: its dense blocks, then its MoE blocks with every routed expert, and what
// a token computes with.
ExplainLine moe_parameters_line(const ModelConfig& m, double total) {
  const MixtureOfExperts& e = m.moe;
  const LayerParams dense = layer_params(m, 0), moe = layer_params(m, e.dense_layers);
  std::string formula;
  if (e.dense_layers > 0)
    formula = fmt::format("{} x {} (dense) + ", e.dense_layers, count(dense.total()));
  formula += fmt::format(
      "{} x ({} + {} experts x {}) + embeddings and norms {}; active per token {} (top {} of {}{})",
      m.layers - e.dense_layers, count(moe.split + moe.replicated), e.experts,
      count(moe.experts / static_cast<double>(e.experts)),
      count(total - (e.dense_layers * dense.total() +
                     static_cast<double>(m.layers - e.dense_layers) * moe.total())),
      count(active_params(m)), e.top_k, e.experts,
      e.shared_experts > 0 ? fmt::format(", {} shared", e.shared_experts) : "");
  return {"parameters", formula, count(total),
          "per block summed; routed experts held whole, active_params counts top_k of them"};
}

ExplainLine parameters_line(const ModelConfig& m, double total) {
  if (m.is_bare()) return {"parameters", "given (--params)", count(total), "user"};
  if (m.architecture == Architecture::kMlp) {
    return {"parameters", fmt::format("l h^2 = {} x {}^2", m.layers, m.hidden), count(total),
            "the lecture's deep MLP (x @ W per layer)"};
  }
  if (m.is_moe()) return moe_parameters_line(m, total);
  const LayerParams layer = layer_params(m);
  std::string formula = fmt::format(
      "l x layer + V h{}{} + norms = {} x {} + {} x {}{}{} + {}", m.tied_embeddings ? "" : " x 2",
      m.position == PositionKind::kLearned ? " + s h" : "", m.layers, count(layer.total()), m.vocab,
      m.hidden, m.tied_embeddings ? "" : " x 2",
      m.position == PositionKind::kLearned ? fmt::format(" + {} x {}", m.seq, m.hidden) : "",
      count(norm_params(m) * (m.embedding_norm ? 2 : 1)));
  return {
      "parameters", formula, count(total),
      "Narayanan 2021 sec. 5.1 (12lh^2(1 + 13/(12h) + (V+s)/(12lh)) for GPT), per layer summed"};
}

ExplainLine states_line(const EstimateInput& in, const StageMemory& s) {
  const auto& r = in.recipe;
  const int z = in.layout.zero;
  auto states = [&](double count_on_gpu, int n) {
    auto part = [&](double bytes, bool sharded) {
      return sharded && n > 1 ? fmt::format("{}/{}", bytes, n) : fmt::format("{}", bytes);
    };
    return fmt::format("{} x ({} + {} + {})", count(count_on_gpu), part(r.param_bytes, z >= 3),
                       part(r.grad_bytes, z >= 2), part(r.optimizer_bytes, z >= 1));
  };
  const int shard = zero_shard_ranks(in.layout);
  const int replicas = zero_replicas(in.layout);
  std::string formula =
      fmt::format("P_gpu x (param + grad + optimizer) B = {} [{}, ZeRO-{} over {} {}{}",
                  states(s.params_count - s.expert_params_count, shard), r.name, z,
                  replicas > 1 ? "shard" : "dp", shard,
                  replicas > 1 ? fmt::format(", {} replicas of it (hybrid)", replicas) : "");
  if (s.expert_params_count > 0) {
    // Expert weights are shared by the dp x cp / ep ranks that hold the same experts.
    formula += fmt::format("] + experts {} [over dp / ep {}",
                           states(s.expert_params_count, expert_shard_ranks(in.layout)),
                           expert_shard_ranks(in.layout));
  }
  return {"model states", formula + "]", format_gib_gb(s.params + s.grads + s.optimizer),
          "ZeRO (Rajbhandari 2019) sec. 5.1: (2 + 2 + K) Psi, divided by N_d per stage"};
}

// A transformer layer's activations as Korthikanti 2022 writes them: sbh x (the kept tensors) +
// as^2b x (the attention core's), with this layout's figures in.
ExplainLine transformer_layer_line(const EstimateInput& in, const ActivationSetup& a,
                                   const LayerActivations& act) {
  const auto& m = in.model;
  const auto& l = in.layout;
  const double sl = a.seq / l.cp, sbh = sl * a.micro_batch * static_cast<double>(m.hidden);
  const double as2b = static_cast<double>(m.heads) * sl * a.seq * a.micro_batch;
  // Under context parallelism a rank holds s/c of the sequence and its queries' scores against
  // all s keys: the symbols say so, rather than calling s/c s.
  const bool cp = l.cp > 1;
  return {
      "activations per layer",
      fmt::format("{0} b h x {2:.4g} + a {1} b x {3:.4g} ({4}, b {5}, h {6}, a {7}; t {8}{9}, "
                  "recompute {10}, {11} B/element{12})",
                  cp ? "(s/c)" : "s", cp ? "(s/c) s" : "s^2",
                  (act.sequence_region + act.tensor_region) / sbh, act.attention_core / as2b,
                  cp ? fmt::format("s {}, c {}: s/c {}", a.seq, l.cp, sl) : fmt::format("s {}", sl),
                  l.micro_batch, m.hidden, m.heads, l.tp, l.sp ? " with SP" : "",
                  recompute_name(l.recompute), a.element_bytes,
                  l.dropout > 0 ? ", 1-byte dropout masks" : ", no dropout"),
      format_gib_gb(act.total()),
      "Korthikanti 2022 Table 2: sbh(34 + 5as/h), TP sbh(10 + 24/t + 5as/(ht)), SP sbh(34/t + "
      "5as/(ht)); no dropout sbh(32 + 2as/h)"};
}

// What a mixture of experts' block keeps for its MLP, within the per-layer figure above.
ExplainLine moe_line(const EstimateInput& in, const ActivationSetup& a, int64_t layer) {
  const MixtureOfExperts& e = in.model.moe;
  const double factor = e.capacity_factor > 0 ? e.capacity_factor : 1;
  return {
      "of which the experts (MoE layer)",
      fmt::format("router 8 s b E + {} B x 2 x k c s b h{} + {} B x {} x (k c + {}) s b f_e / t "
                  "(E {}, k {}, c {}{}, f_e {})",
                  a.element_bytes, a.sp ? "/t" : "", a.element_bytes,
                  in.model.mlp == MlpKind::kSwiglu ? 3 : 2, e.shared_experts, e.experts, e.top_k,
                  factor, e.capacity_factor > 0 ? "" : " dropless", e.expert_ffn),
      format_gib_gb(mlp_activations(in.model, a, layer).total()),
      "fp32 router logits and probabilities, the k copies of each token dispatched to the "
      "experts and their outputs, the experts' (and shared experts') intermediates"};
}

std::vector<ExplainLine> activation_lines(const EstimateInput& in, const MemoryEstimate& e,
                                          const StageMemory& s) {
  const auto& m = in.model;
  const auto& l = in.layout;
  const ActivationSetup a = activation_setup(e.layout, in.recipe.activation_bytes);
  // A mixture of experts' MoE blocks keep more than its dense ones: shown for an MoE block.
  const int64_t shown_layer = m.is_moe() ? m.layers - 1 : 0;
  const LayerActivations act = layer_activations(m, a, shown_layer);
  std::vector<ExplainLine> lines;
  const bool mlp = m.architecture == Architecture::kMlp;
  if (mlp) {
    const bool full = l.recompute == Recompute::kFull;
    lines.push_back(
        {"activations per layer",
         fmt::format("{} B x b h{} (b {}, h {}; t {}, recompute {})", a.element_bytes,
                     full ? "" : " x (1 + 1/t)", l.micro_batch, m.hidden, l.tp,
                     recompute_name(l.recompute)),
         format_gib_gb(act.total()),
         full ? "the lecture's deep MLP: a recomputed layer keeps its input x"
              : "the lecture's deep MLP: each layer keeps its input x (for dW, whole under TP) "
                "and its GeLU input (split with W's columns)"});
  } else {
    lines.push_back(transformer_layer_line(in, a, act));
  }
  if (m.is_moe() && l.recompute != Recompute::kFull) lines.push_back(moe_line(in, a, shown_layer));
  lines.push_back(
      {"micro-batches in flight",
       fmt::format("{} on stage {} of stages 0-{} (m = {}, v = {})", schedule_name(l.schedule),
                   s.stage, l.pp - 1, e.layout.micro_batches, l.vpp),
       fmt::format("{:.4g}", s.in_flight),
       "Narayanan 2021 sec. 2.2 (1F1B holds min(p - stage, m)); Korthikanti 2022 "
       "sec. 4.2.3 (interleaved x (1 + (p-1)/(pv)), GPipe m); Qi 2023 (ZB-H1 p); DualPipe "
       "README (PP + 1)"});
  // The rank that holds the model's last chunk (DualPipeV's rank 0, DualPipe's 0 and p - 1).
  const std::vector<int> held = rank_chunks(l.schedule, l.pp, l.vpp, s.stage);
  const bool holds_head = std::find(held.begin(), held.end(),
                                    pipeline_chunks(l.schedule, l.pp, l.vpp) - 1) != held.end();
  if (holds_head && mlp) {
    lines.push_back({"loss input (last stage)",
                     fmt::format("{} B x b h{}", a.element_bytes,
                                 l.schedule == PipelineSchedule::kGpipe ? " x m" : ""),
                     format_gib_gb(output_activation_bytes(m, a)),
                     "the last layer's GeLU result, which the loss keeps for its backward"});
  } else if (holds_head) {
    lines.push_back({"output layer (last stage)",
                     fmt::format("2 x {} B x s b h{} + 4 s b V/t = fp32 logits with V = {}",
                                 a.element_bytes, l.sp ? "/t" : "", m.vocab),
                     format_gib_gb(output_activation_bytes(m, a)),
                     "Korthikanti 2022 sec. 4.3: 4sbh/t (1 + V/h)"});
  }
  std::string beside;  // what the layers' activations are not all of
  beside = mlp ? (holds_head ? "the loss input" : "") : "input/output layers";
  if (l.recompute == Recompute::kFull) {
    beside += beside.empty() ? "" : ", + ";
    beside += mlp ? "one layer recomputed" : "one layer recomputed, beside one micro-batch's head";
  }
  lines.push_back({"activations on this GPU",
                   fmt::format("{} layers x per layer x {:.4g} in flight{}", s.layers, s.in_flight,
                               beside.empty() ? "" : " (+ " + beside + ")"),
                   format_gib_gb(s.activations), "Korthikanti 2022 sec. 4.2.3"});
  return lines;
}

}  // namespace

std::string format_gib_gb(double bytes) {
  if (bytes >= 1073741824.0 || bytes == 0) {
    return fmt::format("{:.2f} GiB ({:.2f} GB)", bytes / 1073741824.0, bytes / 1e9);
  }
  if (bytes >= 1048576.0)
    return fmt::format("{:.2f} MiB ({:.2f} MB)", bytes / 1048576.0, bytes / 1e6);
  return fmt::format("{:.2f} KiB ({:.2f} kB)", bytes / 1024.0, bytes / 1e3);
}

std::vector<ExplainLine> explain_estimate(const EstimateInput& in, const MemoryEstimate& e) {
  const StageMemory& s = e.heaviest_stage();
  const auto& l = in.layout;
  std::vector<ExplainLine> lines;
  lines.push_back(parameters_line(in.model, e.total_params));
  lines.push_back(
      {"parameters on this GPU",
       in.model.is_bare() ? fmt::format("P / (t x p) = P / ({} x {})", l.tp, l.pp)
                          : fmt::format("stage {}: {} layers / t {}{}", s.stage, s.layers, l.tp,
                                        in.model.architecture == Architecture::kMlp
                                            ? ""
                                            : " (+ embeddings / head of the end stages)"),
       count(s.params_count), "Shoeybi 2019 (Megatron-LM) sec. 3: column/row-parallel split"});
  if (in.inference) {
    lines.push_back({"weights", fmt::format("P_gpu x {} B", in.recipe.param_bytes),
                     format_gib_gb(s.params), "inference: no grads or optimizer"});
    lines.push_back(
        {"KV cache",
         fmt::format("2 x {} B x b {} x tokens {} x layers {} x n_kv {} x d_head {} / t {}",
                     in.recipe.activation_bytes, l.micro_batch, in.kv_len + in.gen_len, s.layers,
                     in.model.kv_heads, in.model.head_dim(), l.tp),
         format_gib_gb(s.kv_cache), "Kwon 2023 (PagedAttention) sec. 3; GQA: Ainslie 2023"});
  } else {
    lines.push_back(states_line(in, s));
    if (!in.model.is_bare()) {
      for (auto& line : activation_lines(in, e, s)) lines.push_back(std::move(line));
    }
    lines.push_back(
        {"comm buffers",
         l.zero >= 3
             ? (in.zero3_reduce_bucket
                    ? "unit gathered + its grads, previous unit's grads, next unit prefetched, "
                      "+ DeepSpeed's reduce bucket (--bucket-size, whole), + p2p"
                    : "unit gathered + its grads, previous unit's grads, next unit prefetched, + "
                      "p2p")
             : "one gradient bucket (dp > 1) + 2 p2p boundary buffers (pp > 1)",
         format_gib_gb(s.comm), "Li 2020 (PyTorch DDP) sec. 3.2.3; Zhao 2023 (FSDP) sec. 3"});
    if (l.pp > 1) {
      const bool zero_bubble = splits_backward(l.schedule);
      const std::string formula = !zero_bubble ? fmt::format("(p - 1)/(v m) = ({} - 1)/({} x {})",
                                                             l.pp, l.vpp, e.layout.micro_batches)
                                  : l.schedule == PipelineSchedule::kDualPipe
                                      ? fmt::format("(p - 2)/(3 m) = ({} - 2)/(3 x {}), F = B = W",
                                                    l.pp, e.layout.micro_batches)
                                      : fmt::format("(p - 1)/(3 m) = ({} - 1)/(3 x {}), F = B = W",
                                                    l.pp, e.layout.micro_batches);
      lines.push_back(
          {"pipeline bubble", formula,
           fmt::format(
               "{:.1f}% of the ideal time{}",
               100 * bubble_fraction(l.schedule, l.pp, e.layout.micro_batches, l.vpp),
               e.layout.micro_batches < l.pp ? " (more micro-batches: see the warning)" : ""),
           zero_bubble ? "Qi 2023 sec. 3.1; DeepSeek DualPipe README (F&B = F + B)"
                       : "Narayanan 2021 sec. 2.2"});
    }
    const double tokens = static_cast<double>(e.layout.global_batch * e.layout.seq);
    if (!in.model.is_bare())
      lines.push_back(
          {"FLOPs per iteration",
           fmt::format("72 B s l h^2 (1 + s/(6h) + V/(12lh)) generalised, B {} s {}, recompute {}",
                       e.layout.global_batch, e.layout.seq, recompute_name(l.recompute)),
           fmt::format("{:.4g} FLOPs ({:.4g} per token)",
                       training_flops(in.model, static_cast<double>(e.layout.global_batch),
                                      static_cast<double>(e.layout.seq), l.recompute),
                       training_flops(in.model, static_cast<double>(e.layout.global_batch),
                                      static_cast<double>(e.layout.seq), l.recompute) /
                           tokens),
           "Narayanan 2021 eq. 3 (96 and V/(16lh) with full recompute)"});
  }
  lines.push_back({"reserve",
                   in.reserve_bytes ? "given (--reserve)"
                                    : "CUDA context 512 MiB + NCCL 512 MiB + 5% fragmentation",
                   format_gib_gb(s.reserve),
                   "partrain default; measure yours with `partrain trace`"});
  return lines;
}

}  // namespace partrain::memory
