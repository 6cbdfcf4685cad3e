#include "runner/workload/parallel_layout.h"

#include <numeric>

namespace partrain::runner {

std::optional<PipelineSchedule> parse_pipeline_schedule(std::string_view name) {
  if (name == "gpipe") return PipelineSchedule::kGpipe;
  if (name == "1f1b") return PipelineSchedule::kOneFOneB;
  if (name == "interleaved") return PipelineSchedule::kInterleaved;
  return std::nullopt;
}

std::string_view pipeline_schedule_name(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::kGpipe: return "gpipe";
    case PipelineSchedule::kOneFOneB: return "1f1b";
    case PipelineSchedule::kInterleaved: return "interleaved";
  }
  return "1f1b";
}

Status apply_strategy(std::string_view strategy, const GivenDegrees& given,
                      ParallelLayout& layout) {
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
  if (strategy == "ddp") {
    return set(layout.zero, 0, given.zero, "--zero");
  } else if (strategy == "zero1") {
    return set(layout.zero, 1, given.zero, "--zero");
  } else if (strategy == "zero2") {
    return set(layout.zero, 2, given.zero, "--zero");
  } else if (strategy == "fsdp") {
    return set(layout.zero, 3, given.zero, "--zero");
  } else if (strategy == "tp" || strategy == "sp") {
    layout.sp = strategy == "sp";
    return set(layout.tp, layout.world, given.tp, "--tp");
  } else if (strategy == "pp") {
    return set(layout.pp, layout.world, given.pp, "--pp");
  } else {
    return invalid_argument("--strategy '{}' is not one of ddp, zero1, zero2, fsdp, tp, sp, pp",
                            strategy);
  }
  return Status::ok();
}

namespace {

Status check_degrees(const ParallelLayout& in, ResolvedLayout& out) {
  if (in.tp < 1 || in.pp < 1 || (in.dp && *in.dp < 1)) {
    return invalid_argument("--dp, --tp and --pp must be at least 1");
  }
  if (in.world % (in.tp * in.pp) != 0) {
    return invalid_argument("tp x pp = {} x {} = {} does not divide the world size {}: choose "
                            "degrees whose product is the number of ranks",
                            in.tp, in.pp, in.tp * in.pp, in.world);
  }
  out.tp = in.tp;
  out.pp = in.pp;
  out.dp = in.dp.value_or(in.world / (in.tp * in.pp));
  if (out.dp * out.tp * out.pp != in.world) {
    return invalid_argument("dp x tp x pp = {} x {} x {} = {} but the world has {} ranks: the "
                            "product of the degrees must equal the world size",
                            out.dp, out.tp, out.pp, out.dp * out.tp * out.pp, in.world);
  }
  if (in.zero < 0 || in.zero > 3) return invalid_argument("--zero {} is not 0, 1, 2 or 3", in.zero);
  out.zero = in.zero;
  return Status::ok();
}

Status check_tensor_parallel(const ParallelLayout& in, const LayoutModel& model,
                             ResolvedLayout& out) {
  if (in.sp && in.tp < 2) {
    return invalid_argument("--sp (sequence parallelism) needs tensor parallelism: pass --tp 2 "
                            "or more");
  }
  out.sp = in.sp;
  if (in.tp == 1) return Status::ok();
  // A dimension of 0 does not exist in the model (the MLP workload has no heads or vocabulary).
  if (model.heads > 0 && model.heads % in.tp != 0) {
    return invalid_argument("--heads {} is not divisible by --tp {}: tensor parallelism splits "
                            "attention heads evenly",
                            model.heads, in.tp);
  }
  if (model.ffn % in.tp != 0) {
    return invalid_argument("the MLP width {} is not divisible by --tp {}", model.ffn, in.tp);
  }
  if (model.vocab > 0 && model.vocab % in.tp != 0) {
    return invalid_argument("--vocab {} is not divisible by --tp {}: the embedding and the "
                            "cross-entropy are split over the vocabulary",
                            model.vocab, in.tp);
  }
  if (in.sp && model.seq % in.tp != 0) {
    return invalid_argument("--seq {} is not divisible by --tp {}: sequence parallelism splits "
                            "the sequence",
                            model.seq, in.tp);
  }
  return Status::ok();
}

Status check_batches(const ParallelLayout& in, ResolvedLayout& out) {
  if (in.micro_batch < 1) return invalid_argument("--micro-batch must be at least 1");
  out.micro_batch = in.micro_batch;
  out.global_batch = in.global_batch.value_or(out.dp * in.micro_batch);
  if (out.global_batch < 1) {
    return invalid_argument(
        "--global-batch must be at least 1, got {} (samples per step over all "
        "ranks: a multiple of dp x micro-batch = {} x {})",
        out.global_batch, out.dp, in.micro_batch);
  }
  if (out.global_batch % (out.dp * in.micro_batch) != 0) {
    return invalid_argument("--global-batch {} is not a multiple of dp x micro-batch = {} x {}: "
                            "every data-parallel rank runs whole micro-batches",
                            out.global_batch, out.dp, in.micro_batch);
  }
  out.micro_batches = out.global_batch / (out.dp * in.micro_batch);
  return Status::ok();
}

Status check_pipeline(const ParallelLayout& in, const LayoutModel& model, ResolvedLayout& out) {
  out.schedule = in.schedule;
  out.vpp = in.vpp;
  if (in.vpp < 1) return invalid_argument("--vpp must be at least 1");
  if (in.vpp > 1 && in.schedule != PipelineSchedule::kInterleaved) {
    return invalid_argument("--vpp {} needs --pp-schedule interleaved", in.vpp);
  }
  if (in.schedule == PipelineSchedule::kInterleaved) {
    if (in.pp < 2) return invalid_argument("--pp-schedule interleaved needs --pp 2 or more");
    if (in.vpp < 2) {
      return invalid_argument("--pp-schedule interleaved needs --vpp 2 or more virtual stages");
    }
    if (out.micro_batches % in.pp != 0) {
      return invalid_argument("interleaved 1F1B needs the number of micro-batches ({}) to be a "
                              "multiple of --pp {} (Megatron's constraint): adjust "
                              "--global-batch or --micro-batch",
                              out.micro_batches, in.pp);
    }
  }
  const int chunks = in.pp * in.vpp;
  if (!in.pp_split.empty()) {
    if (static_cast<int>(in.pp_split.size()) != chunks) {
      return invalid_argument("--pp-split has {} entries but pp x vpp = {} stages need one each",
                              in.pp_split.size(), chunks);
    }
    for (int layers : in.pp_split) {
      if (layers < 1) return invalid_argument("--pp-split: every stage needs at least one layer");
    }
    int total = std::accumulate(in.pp_split.begin(), in.pp_split.end(), 0);
    if (total != model.layers) {
      return invalid_argument("--pp-split sums to {} layers but the model has --layers {}", total,
                              model.layers);
    }
    out.stage_layers = in.pp_split;
    return Status::ok();
  }
  if (model.layers < chunks) {
    return invalid_argument("--layers {} is fewer than pp x vpp = {} pipeline stages: every stage "
                            "needs a layer",
                            model.layers, chunks);
  }
  if (model.layers % chunks != 0) {
    return invalid_argument("--layers {} is not divisible by pp x vpp = {}: pass --pp-split to "
                            "split the layers unevenly",
                            model.layers, chunks);
  }
  out.stage_layers.assign(static_cast<size_t>(chunks), model.layers / chunks);
  return Status::ok();
}

}  // namespace

StatusOr<ResolvedLayout> resolve_layout(const ParallelLayout& layout, const LayoutModel& model) {
  ResolvedLayout out;
  out.world = layout.world;
  out.bucket_bytes = layout.bucket_bytes;
  if (layout.bucket_bytes < 1) return invalid_argument("--bucket-mb must be positive");
  RETURN_IF_ERROR(check_degrees(layout, out));
  RETURN_IF_ERROR(check_tensor_parallel(layout, model, out));
  RETURN_IF_ERROR(check_batches(layout, out));
  RETURN_IF_ERROR(check_pipeline(layout, model, out));
  return out;
}

std::string describe_layout(const ResolvedLayout& layout) {
  std::string text = fmt::format("dp={} tp={} pp={}", layout.dp, layout.tp, layout.pp);
  if (layout.sp) text += " sp";
  text += fmt::format(" zero={} micro-batch={} global-batch={} ({} micro-batches)", layout.zero,
                      layout.micro_batch, layout.global_batch, layout.micro_batches);
  if (layout.pp > 1) {
    text += fmt::format(" {}", pipeline_schedule_name(layout.schedule));
    if (layout.vpp > 1) text += fmt::format(" vpp={}", layout.vpp);
  }
  return text;
}

}  // namespace partrain::runner
