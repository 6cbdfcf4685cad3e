#include "runner/workload/workload_layout.h"

namespace partrain::runner {

using memory::LayoutField;

memory::LayoutNames launch_flag_names() {
  return {.naming = memory::LayoutNaming::kFlags,
          .world = "the world size",
          .world_unit = "ranks",
          .not_offered = {LayoutField::kCp}};
}

memory::LayoutNames worker_config_names() {
  return {.naming = memory::LayoutNaming::kConfigFields,
          .world = "layout.world",
          .world_unit = "ranks",
          .not_offered = {}};
}

Status apply_strategy(std::string_view strategy, const GivenDegrees& given, int world,
                      TrainingLayout& layout) {
  // A degree given beside the shorthand that the shorthand would change is a contradiction, not
  // something to override silently.
  auto set = [&](int& degree, int value, const std::optional<int>& given_degree,
                 const char* flag) -> Status {
    if (given_degree && *given_degree != value) {
      return invalid_argument("--strategy {} means {} {}, but {} {} was given: pass one of them",
                              strategy, flag, value, flag, *given_degree);
    }
    degree = value;
    return Status::ok();
  };
  if (strategy == "ddp") return set(layout.zero, 0, given.zero, "--zero");
  if (strategy == "zero1") return set(layout.zero, 1, given.zero, "--zero");
  if (strategy == "zero2") return set(layout.zero, 2, given.zero, "--zero");
  if (strategy == "fsdp") return set(layout.zero, 3, given.zero, "--zero");
  if (strategy == "tp" || strategy == "sp") {
    layout.sp = strategy == "sp";
    return set(layout.tp, world, given.tp, "--tp");
  }
  if (strategy == "pp") return set(layout.pp, world, given.pp, "--pp");
  return invalid_argument("--strategy '{}' is not one of ddp, zero1, zero2, fsdp, tp, sp, pp",
                          strategy);
}

Status check_runnable(const ResolvedLayout& r, WorkloadKind kind, const WorkloadModel& model,
                      const memory::LayoutNames& n) {
  const TrainingLayout& l = r.layout;
  if (l.cp > 1) {
    return invalid_argument("{}: the built-in workloads run no context parallelism (partrain "
                            "memory and recommend model it)",
                            n.named(LayoutField::kCp, l.cp));
  }
  if (memory::splits_backward(l.schedule) && l.zero >= 2) {
    // A deferred weight gradient is added after its unit's release, when ZeRO-2 and FSDP have
    // already reduce-scattered and freed the unit's gradient staging.
    return invalid_argument(
        "{} defers weight gradients past the backward; {} reduce-scatters a "
        "unit's gradients when the backward releases it: use {} or {}",
        n.named(LayoutField::kSchedule, memory::schedule_name(l.schedule)),
        n.named(LayoutField::kZero, l.zero), n.named(LayoutField::kZero, 1),
        n.named(LayoutField::kSchedule, "1f1b"));
  }
  if (l.schedule == PipelineSchedule::kDualPipe) {
    return invalid_argument(
        "{}: the built-in workloads run DualPipe's V-shaped half (one copy of "
        "the parameters), not the bidirectional schedule that partrain memory "
        "models: use {}",
        n.named(LayoutField::kSchedule, "dualpipe"), n.named(LayoutField::kSchedule, "dualpipev"));
  }
  if (kind == WorkloadKind::kGpt) {
    if (model.vocab % l.tp != 0) {
      return invalid_argument("--vocab {} is not divisible by {}: the embedding and the "
                              "cross-entropy are split over the vocabulary",
                              model.vocab, n.named(LayoutField::kTp, l.tp));
    }
    if (model.moe.enabled() && model.moe.expert_ffn % l.tp != 0) {
      return invalid_argument("--moe-ffn {} is not divisible by {}: every expert's MLP is split "
                              "over tp as the dense one is; pass a --moe-ffn that {} divides",
                              model.moe.expert_ffn, n.named(LayoutField::kTp, l.tp),
                              n.name(LayoutField::kTp));
    }
    return Status::ok();
  }
  if (l.sp) return invalid_argument("{} applies to --workload gpt only", n.name(LayoutField::kSp));
  if (l.tp > 1) {
    // Megatron's MLP pairs a column-parallel layer with a row-parallel one: chunks hold pairs.
    for (int64_t layers : r.chunk_layers) {
      if (layers % 2 != 0) {
        return invalid_argument("--workload mlp with {} > 1 pairs layers (column- then "
                                "row-parallel): every pipeline stage needs an even number of "
                                "layers, not {}",
                                n.name(LayoutField::kTp), layers);
      }
    }
  }
  return Status::ok();
}

std::string describe_layout(const ResolvedLayout& r) {
  const TrainingLayout& l = r.layout;
  std::string text = fmt::format("dp={} tp={} pp={}", l.dp, l.tp, l.pp);
  if (l.ep > 1) text += fmt::format(" ep={}", l.ep);
  if (l.sp) text += " sp";
  text += fmt::format(" zero={}", l.zero);
  if (memory::zero_replicas(l) > 1) text += fmt::format(" shard={}", memory::zero_shard_ranks(l));
  text += fmt::format(" micro-batch={} global-batch={} ({} micro-batches)", l.micro_batch,
                      r.global_batch, r.micro_batches);
  if (l.pp > 1) {
    text += fmt::format(" {}", memory::schedule_name(l.schedule));
    if (l.vpp > 1) text += fmt::format(" vpp={}", l.vpp);
  }
  return text;
}

}  // namespace partrain::runner
