#include "memory/training_layout.h"

#include <numeric>

namespace partrain::memory {
namespace {

Status check_degrees(const TrainingLayout& l) {
  const std::pair<const char*, int> degrees[] = {
      {"--dp", l.dp}, {"--tp", l.tp}, {"--pp", l.pp}, {"--vpp", l.vpp}, {"--cp", l.cp}};
  for (const auto& [flag, value] : degrees) {
    if (value < 1) return invalid_argument("{} must be at least 1 (got {})", flag, value);
  }
  if (l.zero < 0 || l.zero > 3) return invalid_argument("--zero must be 0, 1, 2 or 3 (got {})", l.zero);
  if (l.micro_batch < 1) return invalid_argument("--micro-batch must be at least 1 (got {})", l.micro_batch);
  if (l.dropout < 0 || l.dropout >= 1) {
    return invalid_argument("--dropout must be in [0, 1) (got {})", l.dropout);
  }
  if (l.sp && l.tp < 2) {
    return invalid_argument("--sp (sequence parallelism) needs --tp > 1: it splits the regions "
                            "tensor parallelism replicates");
  }
  if (l.vpp > 1 && l.schedule != PipelineSchedule::kInterleaved) {
    return invalid_argument("--vpp {} needs --pp-schedule interleaved", l.vpp);
  }
  if (l.schedule == PipelineSchedule::kInterleaved && (l.vpp < 2 || l.pp < 2)) {
    return invalid_argument("--pp-schedule interleaved needs --pp > 1 and --vpp > 1 (got pp {}, vpp {})",
                            l.pp, l.vpp);
  }
  return Status::ok();
}

Status check_model_divides(const TrainingLayout& l, const ModelConfig& m, int64_t seq) {
  if (m.architecture == Architecture::kTransformer) {
    if (m.heads % l.tp != 0) {
      return invalid_argument("--tp {} must divide the attention heads ({}): try --tp {}", l.tp,
                              m.heads, std::gcd(static_cast<int64_t>(l.tp), m.heads));
    }
    if (m.kv_heads % l.tp != 0) {
      return invalid_argument("--tp {} must divide the KV heads ({}): Megatron shards whole KV "
                              "groups; use --tp <= {}", l.tp, m.kv_heads, m.kv_heads);
    }
    if (m.ffn % l.tp != 0) {
      return invalid_argument("--tp {} must divide the MLP size --ffn ({})", l.tp, m.ffn);
    }
    if (seq % l.cp != 0) return invalid_argument("--cp {} must divide the sequence ({})", l.cp, seq);
    if (l.sp && (seq / l.cp) % l.tp != 0) {
      return invalid_argument("--sp splits the sequence over --tp {}: it must divide {}", l.tp, seq / l.cp);
    }
  } else if (m.hidden % l.tp != 0) {
    return invalid_argument("--tp {} must divide --hidden ({})", l.tp, m.hidden);
  }
  return Status::ok();
}

StatusOr<std::vector<int64_t>> split_layers(const TrainingLayout& l, int64_t layers) {
  const int64_t chunks = static_cast<int64_t>(l.pp) * l.vpp;
  if (l.pp > layers) {
    return invalid_argument("--pp {} is more than the model's {} layers: every stage needs a layer",
                            l.pp, layers);
  }
  if (l.pp_split.empty()) {
    if (layers % chunks != 0) {
      return invalid_argument("--pp {} x --vpp {} = {} chunks must divide the {} layers, or give "
                              "--pp-split", l.pp, l.vpp, chunks, layers);
    }
    return std::vector<int64_t>(static_cast<size_t>(chunks), layers / chunks);
  }
  if (static_cast<int64_t>(l.pp_split.size()) != chunks) {
    return invalid_argument("--pp-split has {} entries; it needs one per stage ({} = pp x vpp)",
                            l.pp_split.size(), chunks);
  }
  int64_t sum = 0;
  for (int64_t n : l.pp_split) {
    if (n < 1) return invalid_argument("--pp-split: every stage needs at least one layer (got {})", n);
    sum += n;
  }
  if (sum != layers) {
    return invalid_argument("--pp-split adds up to {} layers; the model has {}", sum, layers);
  }
  return l.pp_split;
}

}  // namespace

StatusOr<ResolvedLayout> resolve_layout(const TrainingLayout& layout, const ModelConfig& model) {
  RETURN_IF_ERROR(check_degrees(layout));
  ResolvedLayout r;
  r.layout = layout;
  r.seq = layout.seq.value_or(model.sample_seq());
  if (r.seq < 1) return invalid_argument("--seq must be at least 1 (got {})", r.seq);
  r.global_batch = layout.global_batch.value_or(layout.dp * layout.micro_batch);
  const int64_t per_step = layout.dp * layout.micro_batch;
  if (r.global_batch < per_step || r.global_batch % per_step != 0) {
    return invalid_argument("--global-batch {} must be a multiple of --dp x --micro-batch = {}",
                            r.global_batch, per_step);
  }
  r.micro_batches = r.global_batch / per_step;
  if (model.is_bare()) {
    r.chunk_layers.assign(static_cast<size_t>(layout.pp) * layout.vpp, 0);
    r.stage_layers.assign(static_cast<size_t>(layout.pp), 0);
    return r;
  }
  RETURN_IF_ERROR(check_model_divides(layout, model, r.seq));
  if (layout.schedule == PipelineSchedule::kInterleaved && r.micro_batches % layout.pp != 0) {
    return invalid_argument("interleaved 1F1B needs the micro-batches per step ({}) to be a "
                            "multiple of --pp {} (as Megatron-LM requires)", r.micro_batches, layout.pp);
  }
  ASSIGN_OR_RETURN(r.chunk_layers, split_layers(layout, model.layers));
  r.stage_layers.assign(static_cast<size_t>(layout.pp), 0);
  // Chunk c runs on pipeline rank c mod pp (Narayanan 2021 sec. 2.2.1, interleaved schedule).
  for (size_t c = 0; c < r.chunk_layers.size(); ++c) {
    r.stage_layers[c % static_cast<size_t>(layout.pp)] += r.chunk_layers[c];
  }
  return r;
}

std::string_view schedule_name(PipelineSchedule value) {
  switch (value) {
    case PipelineSchedule::kGpipe: return "gpipe";
    case PipelineSchedule::kOneFOneB: return "1f1b";
    case PipelineSchedule::kInterleaved: return "interleaved";
  }
  return "1f1b";
}

std::string_view recompute_name(Recompute value) {
  switch (value) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "none";
}

std::optional<PipelineSchedule> parse_schedule(std::string_view text) {
  if (text == "gpipe") return PipelineSchedule::kGpipe;
  if (text == "1f1b") return PipelineSchedule::kOneFOneB;
  if (text == "interleaved") return PipelineSchedule::kInterleaved;
  return std::nullopt;
}

std::optional<Recompute> parse_recompute(std::string_view text) {
  if (text == "none") return Recompute::kNone;
  if (text == "selective") return Recompute::kSelective;
  if (text == "full") return Recompute::kFull;
  return std::nullopt;
}

}  // namespace partrain::memory
