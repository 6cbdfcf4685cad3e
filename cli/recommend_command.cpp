// `partrain recommend`: searches dp x tp x pp x cp (and ep for a mixture of experts),
// micro-batch, virtual stages, ZeRO, recompute and SP for a model on N GPUs, predicts step time,
// throughput, MFU and memory per layout, and ranks them (Calculon-like); --check costs one given
// layout, --calibrate replaces the presets' speeds with those measured in the user's own traces.
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <optional>
#include <string>

#include "analyzers/calibration.h"
#include "analyzers/layout_search.h"
#include "analyzers/recommend_report.h"
#include "cli/command.h"
#include "cli/model_flags.h"
#include "core/byte_size.h"
#include "memory/layout_spec.h"
#include "memory/machine_bounds.h"
#include "memory/model_states.h"
#include "profiler/trace_open.h"

namespace partrain::cli {
namespace {

using analyzers::Candidate;
using analyzers::CostModel;
using analyzers::PipelineP2p;

struct RecommendFlags {
  ModelFlags model;
  GpuFlags gpu;
  int gpus = 0;
  int gpus_per_node = 0;
  int devices_per_node = 0;
  std::string cluster;
  int64_t global_batch = 0;
  // The software defaults are Megatron-LM's (megatron/training/arguments.py), the framework of
  // the published runs recommend is checked against: bf16 gradients accumulated and reduced in
  // fp32, reduction after the backward, gathers after the optimizer step, accumulation fused.
  std::string precision = "bf16-fp32grad";
  std::string optimizer = "adamw";
  std::string reserve = "auto";
  bool flash_attn = false;
  std::optional<double> dropout;  // unset: the preset's published dropout, else Megatron-LM's
  size_t top = 10;
  bool json = false;
  bool explain = false;
  bool include_discouraged = false;
  int max_micro_batch = 16;
  int max_vpp = 8;
  int max_cp = 8;
  std::vector<std::string> calibrate;
  int skip_steps = 1;
  std::optional<std::string> check;
  // Search restrictions.
  std::string sp = "any";
  std::string zero;       // "0,1"
  std::string recompute;  // "none,selective"
  std::string schedule;   // "1f1b,interleaved"
  std::string ep;         // "8,16"
  int max_tp = 0;
  std::string fix;    // "tp=8,pp=2"
  double tokens = 0;  // training tokens: print the chosen layout's training time
  std::string overlap_grad_reduce = "off";
  std::string overlap_param_gather = "off";
  std::string tp_backward_overlap;  // on, off; unset: on, off when calibrating (built-in runs')
  std::string pipeline_p2p = "scatter-gather";
  std::string grad_accumulation = "fused";
  std::string zero3_recompute;  // regather, reuse; unset: regather, reuse when calibrating
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::string item = text.substr(start, comma - start);
    if (!item.empty()) out.push_back(item);
    start = comma + 1;
  }
  return out;
}

// --zero 0,1 / --recompute none,full / --schedule 1f1b,interleaved into the search space.
Status restrict_search(const RecommendFlags& f, analyzers::SearchSpace& space) {
  // memory's --sp is a switch, so PARTRAIN_SP=1 (or true) may be set for both commands: on.
  if (f.sp == "on" || f.sp == "1" || f.sp == "true") {
    space.sp = true;
  } else if (f.sp == "off" || f.sp == "0" || f.sp == "false") {
    space.sp = false;
  } else if (f.sp != "any") {
    return invalid_argument(
        "--sp {}: give on (every layout with tp > 1 uses sequence parallelism), off (none does) "
        "or any (both are searched)",
        f.sp);
  }
  for (const std::string& item : split_list(f.zero)) {
    if (item.size() != 1 || item[0] < '0' || item[0] > '3') {
      return invalid_argument("--zero takes stages 0-3 separated by commas (--zero 0,1), not '{}'",
                              item);
    }
    space.zero_stages.push_back(item[0] - '0');
  }
  for (const std::string& item : split_list(f.recompute)) {
    const std::optional<memory::Recompute> mode = memory::parse_recompute(item);
    if (!mode)
      return invalid_argument("--recompute takes none, selective, full (comma list), not '{}'",
                              item);
    space.recompute_modes.push_back(*mode);
  }
  for (const std::string& item : split_list(f.schedule)) {
    const std::optional<memory::PipelineSchedule> schedule = memory::parse_schedule(item);
    if (!schedule) {
      return invalid_argument("--schedule takes {} (comma list), not '{}'",
                              fmt::join(memory::schedule_names(), ", "), item);
    }
    space.schedules.push_back(*schedule);
  }
  if (!f.ep.empty()) {
    ASSIGN_OR_RETURN(const std::vector<int64_t> degrees, parse_positive_list(f.ep, "--ep"));
    for (int64_t ep : degrees)
      space.ep_degrees.push_back(static_cast<int>(std::min<int64_t>(ep, 1 << 30)));
  }
  space.max_tp = f.max_tp;
  if (!f.fix.empty()) {
    // memory's layout-spec parser, over a base no spec can produce: what changed was given.
    memory::TrainingLayout unset;
    unset.tp = unset.pp = unset.cp = unset.vpp = unset.zero = unset.ep = unset.shard = -1;
    unset.micro_batch = -1;
    ASSIGN_OR_RETURN(memory::LayoutSpec spec, memory::parse_layout_spec(f.fix, unset, "--fix"));
    const memory::TrainingLayout& l = spec.layout;
    auto given = [](int value) { return value >= 0 ? std::optional<int>(value) : std::nullopt; };
    space.fixed.tp = given(l.tp);
    space.fixed.pp = given(l.pp);
    space.fixed.cp = given(l.cp);
    space.fixed_vpp = given(l.vpp);
    space.fixed.zero = given(l.zero);
    space.fixed.ep = given(l.ep);
    space.fixed_shard = given(l.shard);
    if (space.fixed_shard && space.fixed.zero == 0) {
      return invalid_argument(
          "--fix shard={} sets the ranks ZeRO shards over, and zero=0 shards "
          "nothing: fix zero=1, 2 or 3 with it",
          *space.fixed_shard);
    }
    if (spec.dp_given) space.fixed_dp = l.dp;
    if (l.micro_batch >= 0) space.fixed_micro_batch = l.micro_batch;
    // The keys the search restricts by a list: --fix recompute=full is --recompute full (they
    // had been accepted and ignored).
    if (spec.recompute_given) space.recompute_modes = {l.recompute};
    if (spec.sp_given) space.sp = l.sp;
    if (spec.schedule_given) space.schedules = {l.schedule};
    if (spec.pp_split_given) {
      return invalid_argument(
          "--fix pp_split: the search splits the layers evenly; cost an uneven split with "
          "--check (pp=2,pp_split=15/17)");
    }
  }
  return {};
}

struct Setup {
  CostModel cost;
  memory::EstimateInput base;
  analyzers::RecommendContext context;
};

// --ep and --fix ep against the model: a dense model has no experts to shard, and every rank
// holds whole experts (memory's rule for a layout, said before the search refuses every layout).
Status check_expert_degrees(const memory::ModelConfig& model, const analyzers::SearchSpace& space) {
  std::vector<std::string> asked;
  for (int ep : space.ep_degrees) asked.push_back(fmt::format("--ep {}", ep));
  if (space.fixed.ep) asked.push_back(fmt::format("--fix ep={}", *space.fixed.ep));
  std::vector<int> degrees = space.ep_degrees;
  if (space.fixed.ep) degrees.push_back(*space.fixed.ep);
  for (size_t i = 0; i < degrees.size(); ++i) {
    const int ep = degrees[i];
    if (!model.is_moe() && ep != 1) {
      return invalid_argument(
          "{} shards a mixture of experts' experts: model '{}' has none (leave it out)", asked[i],
          model.name);
    }
    if (ep < 1 || (model.is_moe() && model.moe.experts % ep != 0)) {
      return invalid_argument(
          "{} must divide the {} routed experts of '{}': every rank holds whole experts (try {})",
          asked[i], model.moe.experts, model.name,
          fmt::join(analyzers::divisors(model.moe.experts, model.moe.experts), ", "));
    }
  }
  return {};
}

// --fix's degrees against the GPUs and the model, said before a search that would find nothing
// to count: a degree that does not divide --gpus, a tp that does not divide the heads, a pp that
// does not divide the layers.
Status check_fixed_degrees(const memory::ModelConfig& model, const analyzers::SearchSpace& space) {
  const std::pair<const char*, std::optional<int>> fixed[] = {{"dp", space.fixed_dp},
                                                              {"tp", space.fixed.tp},
                                                              {"pp", space.fixed.pp},
                                                              {"cp", space.fixed.cp}};
  int64_t product = 1;
  for (const auto& [name, degree] : fixed) {
    if (!degree) continue;
    product *= *degree;
    if (*degree < 1 || space.gpus % *degree != 0) {
      return invalid_argument("--fix {}={} does not divide --gpus {}: {} of {}", name, *degree,
                              space.gpus, name,
                              fmt::join(analyzers::divisors(space.gpus, space.gpus), ", "));
    }
  }
  if (space.gpus % product != 0) {
    return invalid_argument(
        "--fix's degrees multiply to {}, which does not divide --gpus {} (dp x tp x pp x cp = "
        "--gpus)",
        product, space.gpus);
  }
  if (space.fixed.tp && model.heads > 0 &&
      (model.heads % *space.fixed.tp != 0 || model.kv_heads % *space.fixed.tp != 0)) {
    std::vector<int64_t> fits;
    for (const int d : analyzers::divisors(std::gcd(model.heads, model.kv_heads), model.heads)) {
      if (space.gpus % d == 0) fits.push_back(d);
    }
    return invalid_argument(
        "--fix tp={} does not divide the {} attention heads and {} KV heads of '{}': each "
        "tensor-parallel rank holds whole heads (tp of {})",
        *space.fixed.tp, model.heads, model.kv_heads, model.name, fmt::join(fits, ", "));
  }
  if (space.fixed_shard && *space.fixed_shard > 0 && space.gpus % *space.fixed_shard != 0) {
    return invalid_argument(
        "--fix shard={} does not divide --gpus {}: ZeRO's shard groups tile "
        "the data ranks (shard of {})",
        *space.fixed_shard, space.gpus,
        fmt::join(analyzers::divisors(space.gpus, space.gpus), ", "));
  }
  if (space.fixed.pp && model.layers % *space.fixed.pp != 0) {
    return invalid_argument(
        "--fix pp={} does not divide the {} layers of '{}': each stage holds as many (pp of {})",
        *space.fixed.pp, model.layers, model.name,
        fmt::join(analyzers::divisors(model.layers, model.layers), ", "));
  }
  return {};
}

StatusOr<Setup> make_setup(const RecommendFlags& f) {
  ASSIGN_OR_RETURN(memory::ModelConfig model, resolve_model(f.model));
  if (model.is_bare()) {
    return invalid_argument(
        "recommend needs the model's dimensions (a --model preset, "
        "--model-file or --layers --hidden --heads --vocab --seq), not --params");
  }
  ASSIGN_OR_RETURN(memory::GpuSpec gpu, resolve_gpu(f.gpu));
  std::optional<memory::ClusterSpec> cluster;
  if (!f.cluster.empty()) {
    ASSIGN_OR_RETURN(cluster, memory::load_cluster_file(f.cluster));
  }
  const memory::Optimizer optimizer = *memory::parse_optimizer(f.optimizer);
  ASSIGN_OR_RETURN(memory::PrecisionRecipe recipe,
                   memory::precision_recipe(f.precision, optimizer));
  analyzers::Machines machines =
      analyzers::machines_from(gpu, f.gpus, f.gpus_per_node, cluster ? &*cluster : nullptr);
  machines.devices_per_node = f.devices_per_node;
  Setup s{analyzers::cost_model_for(model, recipe, gpu, machines), {}, {}};
  if (f.overlap_param_gather == "on" && f.overlap_grad_reduce == "off") {
    // Megatron-LM refuses it too: the gathers ride on the overlapped reduction's buckets.
    return invalid_argument(
        "--overlap-param-gather on needs --overlap-grad-reduce on (as in Megatron-LM, whose "
        "parameter gathers are issued by the overlapped gradient buckets)");
  }
  s.cost.overlap_grad_reduce = f.overlap_grad_reduce == "on";
  s.cost.overlap_param_gather = f.overlap_param_gather == "on";
  s.cost.pipeline_p2p = f.pipeline_p2p == "deepspeed" ? PipelineP2p::kDeepSpeed
                        : f.pipeline_p2p == "full"    ? PipelineP2p::kFull
                                                      : PipelineP2p::kScatterGather;
  // The built-in workloads recompute a block inside its backward, under the backward's gather.
  const std::string zero3_recompute = !f.zero3_recompute.empty() ? f.zero3_recompute
                                      : f.calibrate.empty()      ? "regather"
                                                                 : "reuse";
  s.cost.zero3_regathers_for_recompute = zero3_recompute == "regather";
  // The built-in workloads that calibration runs keep their tensor-parallel collectives in line.
  s.cost.tp_backward_overlap =
      f.tp_backward_overlap.empty() ? f.calibrate.empty() : f.tp_backward_overlap == "on";
  s.cost.grad_accumulation_bytes = f.grad_accumulation == "autograd" ? CostModel::kAutogradAdd16
                                   : f.grad_accumulation == "fp32"   ? CostModel::kMainGradAdd32
                                   : f.grad_accumulation == "deepspeed-bf16"
                                       ? CostModel::kDeepSpeedBf16
                                       : 0;
  s.base.model = model;
  s.base.recipe = recipe;
  s.base.optimizer = optimizer;
  s.base.capacity_bytes = gpu.memory_bytes;
  if (!gpu.cuda_runtime && !s.base.reserve_bytes) s.base.reserve_bytes = 0;  // host memory
  s.base.layout.global_batch = f.global_batch;
  s.base.layout.seq = model.sample_seq();
  s.base.layout.flash_attention = f.flash_attn;
  // Dropout (hidden and attention): the flag, the preset's published recipe, the calibration
  // runs' (the built-in workloads have none), or Megatron-LM's default.
  const DropoutChoice dropout = choose_dropout(
      f.dropout, model,
      f.calibrate.empty()
          ? DropoutChoice{analyzers::kMegatronDropout, "Megatron-LM's default"}
          : DropoutChoice{0, "the calibration runs': the built-in workloads have none"});
  s.base.layout.dropout = dropout.probability;
  if (f.reserve != "auto") {
    StatusOr<uint64_t> reserve = parse_byte_size(f.reserve);
    if (!reserve.is_ok()) return reserve.status().with_context("--reserve");
    s.base.reserve_bytes = static_cast<double>(*reserve);
  }
  s.context = {f.model.model.empty() ? model.name : f.model.model,
               gpu.name,
               f.gpus,
               machines.gpus_per_node,
               f.global_batch,
               model.sample_seq(),
               {},
               0};
  s.context.speeds =
      analyzers::fitted_speeds(gpu, machines, recipe.activation_bytes >= 4, f.flash_attn);
  s.context.software = {recipe.name,
                        recipe.grad_bytes,
                        s.cost.overlap_grad_reduce,
                        s.cost.overlap_param_gather,
                        s.cost.tp_backward_overlap,
                        f.grad_accumulation,
                        f.pipeline_p2p,
                        zero3_recompute,
                        dropout.probability,
                        dropout.source};
  s.context.tokens = f.tokens;
  s.context.moe = model.is_moe();
  s.context.model_notes = model.notes;
  for (const std::string& path : f.calibrate) {
    ASSIGN_OR_RETURN(profiler::TraceFile trace,
                     profiler::open_trace(path, profiler::TraceOpenMode::kReadStrict));
    StatusOr<analyzers::Calibration> calibration =
        analyzers::measure_calibration(trace.db, path, s.cost, f.skip_steps);
    if (!calibration.is_ok()) {
      if (calibration.status().code() != StatusCode::kFailed) return calibration.status();
      return profiler::trace_read_error(trace.db, fmt::format("calibrating from {}", path));
    }
    s.context.calibrations.push_back(std::move(*calibration));
  }
  analyzers::apply_calibrations(s.context.calibrations, s.cost);
  return s;
}

// The --check layout on the job's GPUs, each broken rule said in --check's keys ("pp=3 x vpp=1 =
// 3 chunks must divide the 32 layers, or give pp_split"); dp defaults to what the GPUs leave.
StatusOr<memory::TrainingLayout> check_layout(const RecommendFlags& f, const Setup& s) {
  if (f.check->empty()) {
    return invalid_argument(
        "--check needs a layout, e.g. --check \"tp=2,zero=1,mb=2\" (leave "
        "--check out to search)");
  }
  ASSIGN_OR_RETURN(memory::LayoutSpec spec,
                   memory::parse_layout_spec(*f.check, s.base.layout, "--check"));
  const memory::LayoutNames keys{
      .naming = memory::LayoutNaming::kSpecKeys, .world = "--gpus", .world_unit = "GPUs"};
  StatusOr<memory::ResolvedLayout> resolved = memory::resolve_layout(
      spec.layout, s.base.model, keys, memory::LayoutWorld{f.gpus, spec.dp_given});
  if (!resolved.is_ok()) {
    return resolved.status().with_context(fmt::format("--check '{}'", *f.check));
  }
  return resolved->layout;
}

StatusOr<std::string> run_check(const RecommendFlags& f, Setup& s) {
  ASSIGN_OR_RETURN(s.base.layout, check_layout(f, s));
  StatusOr<Candidate> evaluated = analyzers::evaluate_layout(s.cost, s.base);
  if (!evaluated.is_ok()) {
    if (evaluated.status().code() != StatusCode::kInvalidArgument) return evaluated.status();
    return evaluated.status().with_context(fmt::format("--check '{}'", *f.check));
  }
  const Candidate& candidate = *evaluated;
  return f.json ? analyzers::format_check_json(s.context, candidate)
                : analyzers::format_check_text(s.context, candidate);
}

std::vector<analyzers::Alternative> common_alternatives(const RecommendFlags& f, const Setup& s,
                                                        const analyzers::SearchSpace& space) {
  const int node_tp = std::min(f.gpus, s.context.gpus_per_node);
  const std::pair<const char*, analyzers::LayoutFilter> families[] = {
      {"data parallel only (DDP, ZeRO-0)", {1, 1, 1, 0}},
      {"data parallel with ZeRO-1", {1, 1, 1, 1}},
      {"FSDP (ZeRO-3 over every GPU, no TP/PP)", {1, 1, 1, 3, std::nullopt, 0}},
      {"no pipeline (PP 1)", {std::nullopt, 1, std::nullopt, std::nullopt}},
      {"no tensor parallelism (TP 1)", {1, std::nullopt, std::nullopt, std::nullopt}},
  };
  std::vector<analyzers::Alternative> alternatives;
  for (const auto& [name, filter] : families) {
    alternatives.push_back({name, analyzers::search_layouts(s.cost, s.base, space, filter)});
  }
  if (f.gpus > s.context.gpus_per_node && f.gpus % s.context.gpus_per_node == 0) {
    alternatives.push_back(
        {fmt::format("HSDP (ZeRO-3 sharded inside each node of {}, replicated across, no TP/PP)",
                     s.context.gpus_per_node),
         analyzers::search_layouts(s.cost, s.base, space,
                                   {1, 1, 1, 3, std::nullopt, s.context.gpus_per_node})});
  }
  if (s.base.model.is_moe()) {
    analyzers::LayoutFilter no_ep;
    no_ep.ep = 1;
    alternatives.push_back({"no expert parallelism (EP 1: every GPU holds every expert)",
                            analyzers::search_layouts(s.cost, s.base, space, no_ep)});
  }
  if (node_tp > 1) {
    alternatives.push_back(
        {fmt::format("TP {} inside each node", node_tp),
         analyzers::search_layouts(s.cost, s.base, space,
                                   {node_tp, std::nullopt, std::nullopt, std::nullopt})});
  }
  return alternatives;
}

// When no layout divides the model over --gpus (63 GPUs: no tp divides the heads with a pp that
// divides the layers), the GPU counts nearest below and above that do, with the same
// restrictions: a usage error naming what to pass, not an empty ranking and exit 0.
Status no_layout_divides(const Setup& s, analyzers::SearchSpace space,
                         const analyzers::SearchResult& result) {
  std::string reasons;
  for (const auto& [reason, count] : result.rejected) {
    reasons += fmt::format(
        "{}{}: {} {}", reasons.empty() ? "" : "; ", analyzers::rejection_words(reason), count,
        analyzers::is_split_reason(reason) ? (count == 1 ? "split" : "splits")
                                           : (count == 1 ? "layout" : "layouts"));
  }
  const int asked = space.gpus;
  auto works = [&](int gpus) {
    space.gpus = gpus;
    return analyzers::search_layouts(s.cost, s.base, space).costed > 0;
  };
  std::vector<int> nearest;
  for (int below = asked - 1; below >= std::max(1, asked / 2); --below) {
    if (works(below)) {
      nearest.push_back(below);
      break;
    }
  }
  for (int above = asked + 1; above <= asked * 2; ++above) {
    if (works(above)) {
      nearest.push_back(above);
      break;
    }
  }
  std::string fix =
      "no GPU count from half to twice it does either: check the model's "
      "dimensions and the restricting flags";
  if (nearest.size() == 1) fix = fmt::format("the nearest GPU count that works is {}", nearest[0]);
  if (nearest.size() == 2) {
    fix = fmt::format("the nearest GPU counts that work are {} and {} (--gpus {} or --gpus {})",
                      nearest[0], nearest[1], nearest[0], nearest[1]);
  }
  return invalid_argument("no parallel layout divides {} over {} GPUs (rejected: {}): {}",
                          s.context.model, asked, reasons, fix);
}

StatusOr<std::string> render(const RecommendFlags& f) {
  RETURN_IF_ERROR(check_json_or_explain(f.json, f.explain, "why the winner wins"));
  if (f.gpus <= 0) return invalid_argument("give --gpus N, the GPUs to spread the job over");
  if (f.global_batch <= 0) return invalid_argument("give --global-batch B (sequences per step)");
  ASSIGN_OR_RETURN(Setup s, make_setup(f));
  if (f.check) return run_check(f, s);
  analyzers::SearchSpace space{.gpus = f.gpus,
                               .max_micro_batch = f.max_micro_batch,
                               .max_vpp = f.max_vpp,
                               .max_cp = f.max_cp,
                               .include_discouraged = f.include_discouraged};
  RETURN_IF_ERROR(restrict_search(f, space));
  RETURN_IF_ERROR(check_expert_degrees(s.base.model, space));
  RETURN_IF_ERROR(check_fixed_degrees(s.base.model, space));
  const auto start = std::chrono::steady_clock::now();
  analyzers::SearchResult result = analyzers::search_layouts(s.cost, s.base, space);
  s.context.search_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (result.costed == 0 && result.first_invalid.empty()) {
    return no_layout_divides(s, space, result);
  }
  if (f.json) return analyzers::format_recommend_json(s.context, result, f.top);
  std::string text = analyzers::format_recommend_text(s.context, result, f.top);
  if (f.explain) {
    text += analyzers::format_explain_text(s.context, result, common_alternatives(f, s, space), 3);
  }
  return text;
}

}  // namespace

Subcommand add_recommend_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand(
      "recommend",
      "Search parallel layouts (dp x tp x pp x cp, ep for a mixture of experts, micro-batch, vpp, "
      "ZeRO, recompute, SP) for a model on N GPUs: predicted step time, tokens/s, MFU and memory, "
      "ranked");
  auto f = std::make_shared<RecommendFlags>();
  add_model_flags(*cmd, f->model);
  add_gpu_flags(*cmd, f->gpu, "memory, peak FLOP/s, HBM and link bandwidths");
  cmd->add_option("--gpus", f->gpus, "GPUs in the job (N = dp x tp x pp x cp)")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--gpus-per-node", f->gpus_per_node,
                  "GPUs per node (default: the cluster file's, or 8)")
      ->check(CLI::Range(int64_t{1}, memory::kMostGpusPerNode));
  cmd->add_option("--devices-per-node", f->devices_per_node,
                  "Compute devices the ranks of a node share, when fewer than the ranks (CPU cores "
                  "for --gpu cpu; one GPU shared by several Gloo ranks); default one per rank")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--cluster", f->cluster,
                  "Cluster JSON: gpus_per_node, intra/inter_node_bandwidth "
                  "(bytes/s) and _latency_us (see docs/recommend.md)");
  cmd->add_option("--global-batch", f->global_batch,
                  "Sequences per optimizer step (required: the search divides it over dp and "
                  "micro-batches)")
      ->check(positive_number());
  cmd->add_option("--precision", f->precision,
                  "fp32-adam (fp32), bf16-mixed (bf16: 16-bit gradients, reduced in 16 bits), "
                  "fp16-mixed (fp16: the same bytes, loss-scaled), bf16-fp32grad (Megatron-LM's "
                  "bf16: gradients accumulated and reduced in fp32), bf16-fp32grad-accum")
      ->capture_default_str()
      ->check(CLI::IsMember(memory::precision_choices()));
  cmd->add_option("--optimizer", f->optimizer,
                  "adamw (adam: the same states, two fp32 moments) or sgd (plain, no momentum "
                  "buffer)")
      ->capture_default_str()
      ->check(CLI::IsMember({"adamw", "adam", "sgd"}));
  cmd->add_option("--reserve", f->reserve, "Memory kept aside per GPU: auto or a size (4G)")
      ->capture_default_str();
  cmd->add_flag("--flash-attn", f->flash_attn, "FlashAttention (no stored attention scores)");
  cmd->add_option("--dropout", f->dropout,
                  "Dropout probability, hidden and attention (> 0: 1-byte masks stored and the "
                  "dropout kernels costed); default: a preset's published recipe, else 0 with "
                  "--calibrate (the built-in workloads have none), else 0.1, Megatron-LM's "
                  "--hidden-dropout and --attention-dropout")
      ->check(probability());
  cmd->add_option("--top", f->top, "Layouts to print")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_flag("--json", f->json, "Print JSON: {\"candidates\": [...], \"rejected\": {...}}");
  cmd->add_flag("--explain", f->explain,
                "Why the winner wins, why runners-up and common alternatives lose");
  cmd->add_flag("--include-discouraged", f->include_discouraged,
                "Rank ZeRO-2/3 with PP too (they reduce-scatter gradients every micro-batch)");
  cmd->add_option("--max-micro-batch", f->max_micro_batch, "Largest micro-batch tried")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--max-vpp", f->max_vpp, "Most virtual stages per pipeline rank tried")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--max-cp", f->max_cp, "Largest context-parallel degree tried")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--sp", f->sp, "Sequence parallelism in the search: on, off or any")
      ->capture_default_str();
  cmd->add_option("--zero", f->zero, "ZeRO stages tried, comma-separated (default 0,1,2,3)");
  cmd->add_option("--recompute", f->recompute,
                  "Recompute modes tried: none, selective, full, comma-separated (default all)");
  cmd->add_option("--schedule", f->schedule,
                  "Pipeline schedules tried, comma-separated: 1f1b, interleaved, gpipe, zb-h1, "
                  "dualpipev, dualpipe (default 1f1b,interleaved; the zero-bubble ones need a "
                  "framework that splits the backward)");
  cmd->add_option("--ep", f->ep,
                  "Expert-parallel degrees tried for a mixture-of-experts model, comma-separated "
                  "(default: every one dividing both dp x cp and the routed experts)");
  cmd->add_option("--max-tp", f->max_tp, "Largest tensor-parallel degree tried")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--fix", f->fix,
                  "Hold part of the layout fixed and search the rest: \"tp=8\", \"tp=8,pp=2\" "
                  "(keys tp, pp, cp, dp, ep, vpp, zero, mb, shard: ZeRO's shard group, fewer "
                  "ranks than dp x cp a hybrid such as HSDP; and recompute, sp, schedule, "
                  "pp_split as --check takes them)");
  cmd->add_option("--tokens", f->tokens,
                  "Training tokens: print the chosen layout's end-to-end training time (Narayanan "
                  "2021 eq. 4)")
      ->check(positive_number());
  cmd->add_option("--overlap-grad-reduce", f->overlap_grad_reduce,
                  "Gradient reduction overlapped with backward bucket by bucket (on: PyTorch DDP, "
                  "Megatron-LM --overlap-grad-reduce, DeepSpeed overlap_comm) or after it (off: "
                  "Megatron-LM's and DeepSpeed ZeRO-1/2's default)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--overlap-param-gather", f->overlap_param_gather,
                  "ZeRO-1/2's updated weights all-gathered behind the next forward bucket by "
                  "bucket (on: Megatron-LM --overlap-param-gather, needs --overlap-grad-reduce on) "
                  "or after the optimizer step (off: Megatron-LM's default); ZeRO-3 prefetches "
                  "either way")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--tp-backward-overlap", f->tp_backward_overlap,
                  "Tensor-parallel backward collectives behind the GEMMs: each column-parallel "
                  "layer's input-gradient all-reduce (reduce-scatter with SP) behind its weight "
                  "gradient, SP's input re-gather behind its input gradient (on: Megatron-LM since "
                  "2022; the default) or in line (off: Megatron-LM 2021, DeepSpeed's Megatron "
                  "forks, the built-in workloads: the default with --calibrate)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--pipeline-p2p", f->pipeline_p2p,
                  "Pipeline sends: scatter-gather (Megatron: 1/t per rank, all-gathered over TP, "
                  "each send paired with a receive), deepspeed (DeepSpeed's pipeline engine: the "
                  "same 1/t pieces, each send and receive blocking on its own) or full (unpaired, "
                  "every rank sending the whole activation: DeepSpeed with pipe_partitioned off)")
      ->capture_default_str()
      ->check(CLI::IsMember({"scatter-gather", "deepspeed", "full"}));
  cmd->add_option("--grad-accumulation", f->grad_accumulation,
                  "How each micro-batch's gradients are accumulated: fused (Megatron-Core: the "
                  "weight-gradient GEMM adds into them), autograd (a 16-bit add kernel, 6 B a "
                  "parameter: Megatron-LM 2021, DeepSpeed fp16), fp32 (Megatron's main_grad "
                  "hook, 10 B) or deepspeed-bf16 (DeepSpeed's BF16_Optimizer, 18 B)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fused", "autograd", "fp32", "deepspeed-bf16"}));
  cmd->add_option("--zero3-recompute", f->zero3_recompute,
                  "ZeRO-3 under full recompute: regather (DeepSpeed ZeRO-3: the recomputed "
                  "forward gathers a block's weights, releases them, and the backward gathers them "
                  "again; the default) or reuse (PyTorch FSDP and FSDP2 with the activation "
                  "checkpoint inside "
                  "each unit, as LLM Foundry and torchtitan wrap it, and the built-in workloads: "
                  "the backward's one gather serves the recomputed forward; the default with "
                  "--calibrate)")
      ->check(CLI::IsMember({"regather", "reuse"}));
  cmd->add_option("--calibrate", f->calibrate,
                  "Trace(s) of your own runs: measured compute speed and collective busbw replace "
                  "the presets', and a built-in run's measured step over its prediction scales "
                  "every step (the 'overhead' term) (repeatable)");
  cmd->add_option("--skip-steps", f->skip_steps, "Warm-up steps of a --calibrate trace left out")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  // Not from PARTRAIN_CHECK: `bench`'s -c/--check (0 or 1) reads it, and a layout to cost once
  // is this invocation's question, as analyze's --steps is.
  without_env_var(
      cmd->add_option("--check", f->check,
                      "Cost one layout instead of searching: \"dp=8,tp=4,pp=2,zero=1,mb=2,"
                      "recompute=selective,sp=1\"; also cp, ep, vpp, "
                      "schedule=1f1b|interleaved|gpipe|zb-h1|dualpipev|dualpipe and "
                      "pp_split=15/17 (layers per stage) (dp defaults to what the GPUs leave)"));
  cmd->footer(
      "Examples:\n"
      "  partrain recommend --model llama-3-70b --gpus 64 --gpu h100-80g --global-batch 512 "
      "--explain\n"
      "  partrain recommend --model llama-2-7b --gpus 8 --global-batch 64 --check "
      "\"tp=2,zero=1,mb=2\"\n"
      "  partrain recommend --model builtin-gpt --gpus 4 --gpus-per-node 4 --devices-per-node 2 "
      "\\\n"
      "      --gpu cpu --precision fp32 --global-batch 8 --calibrate partrain-runs/run.db\n"
      "Cost model (docs/recommend.md): compute on a roofline capped at the GPU's GEMM efficiency; "
      "TP/SP/CP, PP, DP and MoE all_to_all traffic alpha-beta per link level (nccl-tests busbw "
      "factors); pipeline "
      "bubble (p-1)/(v m); memory from `partrain memory`. Software as Megatron-LM runs it by "
      "default: bf16 gradients reduced in fp32 after the backward, ZeRO-1's gathers after the "
      "optimizer step, gradient accumulation fused (--precision, --overlap-grad-reduce, "
      "--overlap-param-gather, --grad-accumulation for others). "
      "Exit 2 for invalid flags or a --check layout that does not resolve (a layout that does not "
      "fit still exits 0 with fits false), 3 for an unreadable preset, cluster or trace file.");
  return {cmd, [f] { return print_report(render(*f)); }};
}

}  // namespace partrain::cli
