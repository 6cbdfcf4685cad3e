#include "memory/training_layout.h"

#include <algorithm>
#include <numeric>

#include "memory/pipeline_order.h"

namespace partrain::memory {
namespace {

// Each field's name on a command line, in a layout spec (empty: the spec has no key for it, a
// command gives it as a flag) and in a workload config.
struct FieldNames {
  LayoutField field;
  std::string_view flag, spec_key, config_field;
};
constexpr FieldNames kFieldNames[] = {
    {LayoutField::kDp, "--dp", "dp", "layout.dp"},
    {LayoutField::kTp, "--tp", "tp", "layout.tp"},
    {LayoutField::kPp, "--pp", "pp", "layout.pp"},
    {LayoutField::kCp, "--cp", "cp", "layout.cp"},
    {LayoutField::kVpp, "--vpp", "vpp", "layout.vpp"},
    {LayoutField::kEp, "--ep", "ep", "layout.ep"},
    {LayoutField::kSp, "--sp", "sp", "layout.sp"},
    {LayoutField::kZero, "--zero", "zero", "layout.zero"},
    {LayoutField::kShard, "--shard", "shard", "layout.shard"},
    {LayoutField::kSchedule, "--pp-schedule", "schedule", "layout.schedule"},
    {LayoutField::kPpSplit, "--pp-split", "pp_split", "layout.pp_split"},
    {LayoutField::kMicroBatch, "--micro-batch", "mb", "layout.micro_batch"},
    {LayoutField::kGlobalBatch, "--global-batch", "", "layout.global_batch"},
    {LayoutField::kSeq, "--seq", "", "model.seq"},
    {LayoutField::kRecompute, "--recompute", "recompute", "recompute"},
    {LayoutField::kDropout, "--dropout", "", "dropout"},
};

const FieldNames& names_of(LayoutField field) {
  return *std::find_if(std::begin(kFieldNames), std::end(kFieldNames),
                       [field](const FieldNames& n) { return n.field == field; });
}

// "tp x pp x cp = 3 x 1 x 1 = 3": the degrees that fill the world, but `left_out`.
std::string degree_product(const TrainingLayout& l, const LayoutNames& names, LayoutField left_out) {
  std::string factors, values;
  int64_t product = 1;
  for (const LayoutDegree& d : kLayoutDegrees) {
    if (!d.fills_world || d.field == left_out || !names.offers(d.field)) continue;
    const std::string_view sep = factors.empty() ? "" : " x ";
    factors += fmt::format("{}{}", sep, names.name(d.field));
    values += fmt::format("{}{}", sep, l.*d.member);
    product *= l.*d.member;
  }
  return fmt::format("{} = {} = {}", factors, values, product);
}

Status check_degrees(const TrainingLayout& l, const LayoutNames& n) {
  for (const LayoutDegree& d : kLayoutDegrees) {
    if (l.*d.member < 1) {
      return invalid_argument("{} must be at least 1 (got {})", n.name(d.field), l.*d.member);
    }
  }
  if (l.zero < 0 || l.zero > 3) {
    return invalid_argument("{} is not 0, 1, 2 or 3 (ZeRO stage: 0 DDP, 1 shards optimizer states, "
                            "2 also gradients, 3 (FSDP) also parameters)",
                            n.named(LayoutField::kZero, l.zero));
  }
  if (l.micro_batch < 1) {
    return invalid_argument("{} must be at least 1 (got {})", n.name(LayoutField::kMicroBatch),
                            l.micro_batch);
  }
  if (l.dropout < 0 || l.dropout >= 1) {
    return invalid_argument("{} must be in [0, 1) (got {})", n.name(LayoutField::kDropout), l.dropout);
  }
  if (l.sp && l.tp < 2) {
    return invalid_argument("{} (sequence parallelism) needs {} > 1: it splits the regions "
                            "tensor parallelism replicates",
                            n.name(LayoutField::kSp), n.name(LayoutField::kTp));
  }
  // Messages are put together only on failure: the recommender resolves thousands of layouts.
  if (l.vpp > 1 && l.schedule != PipelineSchedule::kInterleaved) {
    return invalid_argument("{} needs {}", n.named(LayoutField::kVpp, l.vpp),
                            n.named(LayoutField::kSchedule, "interleaved"));
  }
  if (splits_backward(l.schedule) && l.pp < 2) {
    return invalid_argument(
        "{} fills a pipeline's bubbles with weight-gradient passes: it needs "
        "{} > 1 (one stage has no bubble); use {}",
        n.named(LayoutField::kSchedule, schedule_name(l.schedule)), n.name(LayoutField::kPp),
        n.named(LayoutField::kSchedule, "1f1b"));
  }
  if (l.schedule == PipelineSchedule::kDualPipe && l.pp % 2 != 0) {
    return invalid_argument(
        "{} sends half the micro-batches each way through stage pairs: "
        "{} must be even, or use {}",
        n.named(LayoutField::kSchedule, "dualpipe"), n.named(LayoutField::kPp, l.pp),
        n.named(LayoutField::kSchedule, "dualpipev"));
  }
  if (l.schedule == PipelineSchedule::kInterleaved && (l.vpp < 2 || l.pp < 2)) {
    return invalid_argument("{} needs {} > 1 and {} > 1 (got {}, {})",
                            n.named(LayoutField::kSchedule, "interleaved"),
                            n.name(LayoutField::kPp), n.name(LayoutField::kVpp),
                            n.named(LayoutField::kPp, l.pp), n.named(LayoutField::kVpp, l.vpp));
  }
  return Status::ok();
}

// dp x tp x pp x cp must be the world's ranks; dp not given is what the others leave of them.
Status fill_world(TrainingLayout& l, const LayoutWorld& world, const LayoutNames& n) {
  const std::string ranks = fmt::format("{} {}", n.world, world.ranks);
  if (world.ranks < 1) return invalid_argument("{} must be at least 1", ranks);
  if (!world.dp_given) {
    const int others = layout_ranks(l) / l.dp;
    if (world.ranks % others != 0) {
      return invalid_argument("{} does not divide {}: every data-parallel replica needs the same "
                              "{} {}",
                              degree_product(l, n, LayoutField::kDp), ranks, others, n.world_unit);
    }
    l.dp = world.ranks / others;
  }
  if (layout_ranks(l) != world.ranks) {
    return invalid_argument("{} is not {}: the product of the degrees must be the number of {}",
                            degree_product(l, n, LayoutField::kVpp), ranks, n.world_unit);
  }
  return Status::ok();
}

Status check_model_divides(const TrainingLayout& l, const ModelConfig& m, int64_t seq,
                           const LayoutNames& n) {
  auto tp = [&] { return n.named(LayoutField::kTp, l.tp); };
  if (m.architecture == Architecture::kTransformer) {
    if (m.heads % l.tp != 0) {
      return invalid_argument("{} must divide the attention heads ({}): try {}", tp(), m.heads,
                              n.named(LayoutField::kTp, std::gcd(static_cast<int64_t>(l.tp), m.heads)));
    }
    if (m.kv_heads % l.tp != 0) {
      return invalid_argument("{} must divide the KV heads ({}): Megatron shards whole KV "
                              "groups; use {} <= {}", tp(), m.kv_heads, n.name(LayoutField::kTp),
                              m.kv_heads);
    }
    if (m.ffn % l.tp != 0) {
      return invalid_argument("{} must divide the MLP size --ffn ({})", tp(), m.ffn);
    }
    if (seq % l.cp != 0) {
      return invalid_argument("{} must divide the sequence ({})", n.named(LayoutField::kCp, l.cp), seq);
    }
    if (l.sp && (seq / l.cp) % l.tp != 0) {
      return invalid_argument("{} splits the sequence over {}: it must divide {}",
                              n.name(LayoutField::kSp), tp(), seq / l.cp);
    }
  } else if (m.hidden % l.tp != 0) {
    return invalid_argument("{} must divide --hidden ({})", tp(), m.hidden);
  }
  return Status::ok();
}

// Megatron-LM's expert parallelism: whole experts per rank, ep ranks out of the data-parallel ones.
Status check_experts(const TrainingLayout& l, const ModelConfig& m, const LayoutNames& n) {
  if (l.ep == 1) return Status::ok();
  const std::string ep = n.named(LayoutField::kEp, l.ep);
  if (!m.is_moe()) {
    return invalid_argument("{} shards a mixture of experts' experts: model '{}' has none; give "
                            "the model experts (--experts, --top-k) or leave {} at 1",
                            ep, m.name, n.name(LayoutField::kEp));
  }
  if (m.moe.experts % l.ep != 0) {
    return invalid_argument("{} must divide the {} routed experts: every rank holds whole experts; "
                            "try {}",
                            ep, m.moe.experts,
                            n.named(LayoutField::kEp, std::gcd(static_cast<int64_t>(l.ep),
                                                               m.moe.experts)));
  }
  const int data_ranks = l.dp * l.cp;
  if (data_ranks % l.ep != 0) {
    const std::string data =
        n.offers(LayoutField::kCp)
            ? fmt::format("{} x {} = {}", n.name(LayoutField::kDp), n.name(LayoutField::kCp),
                          data_ranks)
            : n.named(LayoutField::kDp, data_ranks);
    return invalid_argument(
        "{} must divide {}: expert-parallel ranks are drawn from the data-parallel ones (dense "
        "weights stay data-parallel); try {}",
        ep, data, n.named(LayoutField::kEp, std::gcd(l.ep, data_ranks)));
  }
  return Status::ok();
}

// A hybrid's shard groups: ZeRO must shard something, and the groups must tile the data ranks.
Status check_shard(const TrainingLayout& l, const LayoutNames& n) {
  if (l.shard == 0) return Status::ok();
  const std::string shard = n.named(LayoutField::kShard, l.shard);
  if (l.shard < 0) {
    return invalid_argument("{} must be at least 1 (or 0: every data-parallel rank)", shard);
  }
  if (l.zero == 0) {
    return invalid_argument(
        "{} sets the ranks ZeRO shards over, and {} shards nothing: give {} "
        "to 1, 2 or 3 (3 with {} is PyTorch's HSDP)",
        shard, n.named(LayoutField::kZero, 0), n.name(LayoutField::kZero),
        n.name(LayoutField::kShard));
  }
  const int data_ranks = l.dp * l.cp;
  const std::string data = n.offers(LayoutField::kCp) && l.cp > 1
                               ? fmt::format("{} x {} = {}", n.name(LayoutField::kDp),
                                             n.name(LayoutField::kCp), data_ranks)
                               : n.named(LayoutField::kDp, data_ranks);
  if (data_ranks % l.shard != 0) {
    return invalid_argument(
        "{} must divide {}: the shard groups tile the data-parallel ranks; "
        "try {}",
        shard, data, n.named(LayoutField::kShard, std::gcd(l.shard, data_ranks)));
  }
  if (l.ep > 1 && l.shard != data_ranks) {
    return invalid_argument(
        "{} with {} is not modelled: a hybrid's replicas and the "
        "expert-data groups would cut the data ranks two ways; leave out {}",
        shard, n.named(LayoutField::kEp, l.ep), n.name(LayoutField::kShard));
  }
  return Status::ok();
}

// DeepSeek's DualPipe(V) asserts num_chunks >= 2 num_ranks (DualPipe also an even count, half
// each way): fewer micro-batches never reach its steady phase.
Status check_dual_pipe_micro_batches(const TrainingLayout& l, int64_t micro_batches,
                                     const LayoutNames& n) {
  if (l.schedule != PipelineSchedule::kDualPipeV && l.schedule != PipelineSchedule::kDualPipe) {
    return Status::ok();
  }
  const std::string schedule = n.named(LayoutField::kSchedule, schedule_name(l.schedule));
  if (micro_batches < 2 * static_cast<int64_t>(l.pp)) {
    return invalid_argument(
        "{} needs at least 2 x {} = {} micro-batches per step (got {}): raise "
        "{} or lower {}",
        schedule, n.named(LayoutField::kPp, l.pp), 2 * l.pp, micro_batches,
        n.name(LayoutField::kGlobalBatch), n.name(LayoutField::kMicroBatch));
  }
  if (l.schedule == PipelineSchedule::kDualPipe && micro_batches % 2 != 0) {
    return invalid_argument(
        "{} runs half the micro-batches each way: the {} per step must be "
        "even; adjust {}",
        schedule, micro_batches, n.name(LayoutField::kGlobalBatch));
  }
  return Status::ok();
}

StatusOr<std::vector<int64_t>> split_layers(const TrainingLayout& l, int64_t layers,
                                            const LayoutNames& n) {
  const int64_t chunks = pipeline_chunks(l.schedule, l.pp, l.vpp);
  auto split = [&] { return n.name(LayoutField::kPpSplit); };
  if (l.pp > layers) {
    return invalid_argument("{} is more than the model's {} layers: every stage needs a layer",
                            n.named(LayoutField::kPp, l.pp), layers);
  }
  if (l.pp_split.empty() && l.schedule == PipelineSchedule::kDualPipeV && layers % chunks != 0) {
    return invalid_argument(
        "{} cuts the pipeline in half: 2 x {} = {} stages must divide the {} "
        "layers, or give {} with {} entries",
        n.named(LayoutField::kSchedule, "dualpipev"), n.named(LayoutField::kPp, l.pp), chunks,
        layers, split(), chunks);
  }
  if (l.pp_split.empty()) {
    if (layers % chunks != 0) {
      return invalid_argument("{} x {} = {} chunks must divide the {} layers, or give {}",
                              n.named(LayoutField::kPp, l.pp), n.named(LayoutField::kVpp, l.vpp),
                              chunks, layers, split());
    }
    return std::vector<int64_t>(static_cast<size_t>(chunks), layers / chunks);
  }
  if (static_cast<int64_t>(l.pp_split.size()) != chunks) {
    return invalid_argument(
        "{} has {} entries; it needs one per stage ({}: pp x vpp, 2 pp "
        "under dualpipev)",
        split(), l.pp_split.size(), chunks);
  }
  int64_t sum = 0;
  for (int64_t layers_of_stage : l.pp_split) {
    if (layers_of_stage < 1) {
      return invalid_argument("{}: every stage needs at least one layer (got {})", split(),
                              layers_of_stage);
    }
    sum += layers_of_stage;
  }
  if (sum != layers) {
    return invalid_argument("{} adds up to {} layers; the model has {}", split(), sum, layers);
  }
  return l.pp_split;
}

}  // namespace

int expert_data_ranks(const TrainingLayout& layout) { return layout.dp * layout.cp / layout.ep; }

int zero_shard_ranks(const TrainingLayout& layout) {
  return layout.shard > 0 ? layout.shard : layout.dp * layout.cp;
}

int zero_replicas(const TrainingLayout& layout) {
  return layout.dp * layout.cp / zero_shard_ranks(layout);
}

int expert_shard_ranks(const TrainingLayout& layout) {
  return layout.ep == 1 ? zero_shard_ranks(layout) : expert_data_ranks(layout);
}

int layout_ranks(const TrainingLayout& layout) {
  int ranks = 1;
  for (const LayoutDegree& d : kLayoutDegrees) {
    if (d.fills_world) ranks *= layout.*d.member;
  }
  return ranks;
}

std::string LayoutNames::name(LayoutField field) const {
  const FieldNames& f = names_of(field);
  switch (naming) {
    case LayoutNaming::kFlags: return std::string(f.flag);
    case LayoutNaming::kSpecKeys: return std::string(f.spec_key.empty() ? f.flag : f.spec_key);
    case LayoutNaming::kConfigFields: return std::string(f.config_field);
  }
  return std::string(f.flag);
}

std::string LayoutNames::named(LayoutField field, std::string_view value) const {
  // A flag takes its value after a space; a spec key or config field after '=' (a field a spec
  // has no key for is still a flag).
  const bool flag = naming == LayoutNaming::kFlags ||
                    (naming == LayoutNaming::kSpecKeys && names_of(field).spec_key.empty());
  return fmt::format("{}{}{}", name(field), flag ? " " : "=", value);
}

std::string LayoutNames::named(LayoutField field, int64_t value) const {
  return named(field, std::to_string(value));
}

bool LayoutNames::offers(LayoutField field) const {
  return std::find(not_offered.begin(), not_offered.end(), field) == not_offered.end();
}

StatusOr<ResolvedLayout> resolve_layout(const TrainingLayout& layout, const ModelConfig& model,
                                        const LayoutNames& n, std::optional<LayoutWorld> world) {
  ResolvedLayout r;
  r.layout = layout;
  TrainingLayout& l = r.layout;
  RETURN_IF_ERROR(check_degrees(l, n));
  if (world) RETURN_IF_ERROR(fill_world(l, *world, n));
  r.seq = l.seq.value_or(model.sample_seq());
  if (r.seq < 1) return invalid_argument("{} must be at least 1 (got {})", n.name(LayoutField::kSeq), r.seq);
  const int64_t per_step = l.dp * l.micro_batch;
  r.global_batch = l.global_batch.value_or(per_step);
  // 0 and negative counts are multiples of anything: refused before the divisibility.
  if (r.global_batch < 1) {
    return invalid_argument("{} must be at least 1 (got {}): sequences per step over all ranks",
                            n.name(LayoutField::kGlobalBatch), r.global_batch);
  }
  if (r.global_batch % per_step != 0) {
    return invalid_argument("{} is not a multiple of {} x {} = {} x {} = {}: every data-parallel "
                            "rank runs whole micro-batches",
                            n.named(LayoutField::kGlobalBatch, r.global_batch),
                            n.name(LayoutField::kDp), n.name(LayoutField::kMicroBatch), l.dp,
                            l.micro_batch, per_step);
  }
  r.micro_batches = r.global_batch / per_step;
  RETURN_IF_ERROR(check_experts(l, model, n));
  RETURN_IF_ERROR(check_shard(l, n));
  if (model.is_bare()) {
    r.chunk_layers.assign(static_cast<size_t>(l.pp) * l.vpp, 0);
    r.stage_layers.assign(static_cast<size_t>(l.pp), 0);
    return r;
  }
  RETURN_IF_ERROR(check_model_divides(l, model, r.seq, n));
  if (l.schedule == PipelineSchedule::kInterleaved && r.micro_batches % l.pp != 0) {
    return invalid_argument("interleaved 1F1B needs the micro-batches per step ({}) to be a "
                            "multiple of {} (as Megatron-LM requires): adjust {} or {}",
                            r.micro_batches, n.named(LayoutField::kPp, l.pp),
                            n.name(LayoutField::kGlobalBatch), n.name(LayoutField::kMicroBatch));
  }
  RETURN_IF_ERROR(check_dual_pipe_micro_batches(l, r.micro_batches, n));
  ASSIGN_OR_RETURN(r.chunk_layers, split_layers(l, model.layers, n));
  r.stage_layers.assign(static_cast<size_t>(l.pp), 0);
  // Chunk c runs on pipeline rank c mod pp (Narayanan 2021 sec. 2.2.1, interleaved schedule),
  // DualPipeV's V folds chunks pp..2pp-1 back, DualPipe holds stage c on c and pp - 1 - c.
  for (int rank = 0; rank < l.pp; ++rank) {
    for (int c : rank_chunks(l.schedule, l.pp, l.vpp, rank)) {
      r.stage_layers[static_cast<size_t>(rank)] += r.chunk_layers[static_cast<size_t>(c)];
    }
  }
  return r;
}

std::string_view schedule_name(PipelineSchedule value) {
  switch (value) {
    case PipelineSchedule::kGpipe: return "gpipe";
    case PipelineSchedule::kOneFOneB: return "1f1b";
    case PipelineSchedule::kInterleaved: return "interleaved";
    case PipelineSchedule::kZbH1:
      return "zb-h1";
    case PipelineSchedule::kDualPipeV:
      return "dualpipev";
    case PipelineSchedule::kDualPipe:
      return "dualpipe";
  }
  return "1f1b";
}

std::vector<std::string> schedule_names() {
  std::vector<std::string> names;
  for (PipelineSchedule s : kPipelineSchedules) names.emplace_back(schedule_name(s));
  return names;
}

std::string schedule_choices() {
  const std::vector<std::string> names = schedule_names();
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text += i + 1 == names.size() ? " or " : ", ";
    text += names[i];
  }
  return text;
}

bool splits_backward(PipelineSchedule value) {
  switch (value) {
    case PipelineSchedule::kGpipe:
    case PipelineSchedule::kOneFOneB:
    case PipelineSchedule::kInterleaved:
      return false;
    case PipelineSchedule::kZbH1:
    case PipelineSchedule::kDualPipeV:
    case PipelineSchedule::kDualPipe:
      return true;
  }
  return false;
}

int chunks_per_rank(PipelineSchedule value, int vpp) {
  switch (value) {
    case PipelineSchedule::kInterleaved:
      return vpp;
    case PipelineSchedule::kDualPipeV:
    case PipelineSchedule::kDualPipe:
      return 2;
    case PipelineSchedule::kGpipe:
    case PipelineSchedule::kOneFOneB:
    case PipelineSchedule::kZbH1:
      return 1;
  }
  return 1;
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
  for (PipelineSchedule s : kPipelineSchedules) {
    if (text == schedule_name(s)) return s;
  }
  return std::nullopt;
}

std::optional<Recompute> parse_recompute(std::string_view text) {
  if (text == "none") return Recompute::kNone;
  if (text == "selective") return Recompute::kSelective;
  if (text == "full") return Recompute::kFull;
  return std::nullopt;
}

}  // namespace partrain::memory
