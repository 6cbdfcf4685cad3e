// `partrain memory`: per-GPU memory by category (params, grads, optimizer, activations, comm,
// KV cache, reserve) for a model and a parallel layout, as the DeepSpeed and Megatron
// estimators compute it; --explain shows the formulas, --sweep a table over dp x ZeRO x recompute.
#include <charconv>
#include <utility>

#include "cli/command.h"
#include "cli/model_flags.h"
#include "core/byte_size.h"
#include "memory/explain.h"
#include "memory/memory_report.h"
#include "memory/model_states.h"
#include "memory/sweep.h"

namespace partrain::cli {
namespace {

struct MemoryFlags {
  ModelFlags model;
  GpuFlags gpu;
  int64_t micro_batch = 1;
  int64_t global_batch = 0;
  int dp = 1, tp = 1, pp = 1, vpp = 1, cp = 1, ep = 1, zero = 0;
  int shard = 0;  // 0: ZeRO shards over every data-parallel rank
  bool sp = false;
  std::string pp_schedule = "1f1b";
  std::string pp_split;
  std::string recompute = "none";
  bool flash_attn = false;
  std::string precision = "bf16-mixed";
  double bytes_per_param = 0;
  std::optional<double> dropout;  // unset: the model's published dropout, else none
  std::string optimizer = "adamw";
  std::string reserve = "auto";
  std::optional<std::string> bucket_size;  // unset: 25 MB (DDP's), and none under ZeRO-3
  bool inference = false;
  int64_t kv_len = 0, gen_len = 0;
  bool per_stage = false, explain = false, json = false, sweep = false;
  std::string sweep_dp;  // empty: 1..1024
};

// "1..1024": the powers of two from 1 to 1024; "1,8,64": those sizes.
StatusOr<std::vector<int>> parse_dp_sizes(const std::string& text) {
  std::vector<int> sizes;
  if (auto dots = text.find(".."); dots != std::string::npos) {
    ASSIGN_OR_RETURN(auto low, parse_positive_list(text.substr(0, dots), "--sweep-dp"));
    ASSIGN_OR_RETURN(auto high, parse_positive_list(text.substr(dots + 2), "--sweep-dp"));
    if (low.size() != 1 || high.size() != 1 || low[0] > high[0] || high[0] > (1 << 24)) {
      return invalid_argument("--sweep-dp '{}': write LOW..HIGH (powers of two) or a list", text);
    }
    for (int64_t dp = low[0]; dp <= high[0]; dp *= 2) sizes.push_back(static_cast<int>(dp));
    return sizes;
  }
  ASSIGN_OR_RETURN(auto list, parse_positive_list(text, "--sweep-dp"));
  for (int64_t dp : list) sizes.push_back(static_cast<int>(dp));
  return sizes;
}

StatusOr<memory::TrainingLayout> to_layout(const MemoryFlags& f) {
  memory::TrainingLayout l;
  l.dp = f.dp;
  l.tp = f.tp;
  l.pp = f.pp;
  l.vpp = f.vpp;
  l.cp = f.cp;
  l.ep = f.ep;
  l.sp = f.sp;
  l.zero = f.zero;
  l.shard = f.shard;
  l.micro_batch = f.micro_batch;
  if (f.global_batch > 0) l.global_batch = f.global_batch;
  if (f.model.seq > 0) l.seq = f.model.seq;
  l.schedule = *memory::parse_schedule(f.pp_schedule);  // the flag only accepts known names
  l.recompute = *memory::parse_recompute(f.recompute);
  l.flash_attention = f.flash_attn;
  if (!f.pp_split.empty()) {
    ASSIGN_OR_RETURN(l.pp_split, parse_positive_list(f.pp_split, "--pp-split"));
  }
  return l;
}

StatusOr<memory::EstimateInput> to_input(const MemoryFlags& f) {
  memory::EstimateInput in;
  ASSIGN_OR_RETURN(in.model, resolve_model(f.model));
  ASSIGN_OR_RETURN(in.layout, to_layout(f));
  in.optimizer = *memory::parse_optimizer(f.optimizer);
  ASSIGN_OR_RETURN(in.recipe, memory::precision_recipe(f.precision, in.optimizer));
  if (f.bytes_per_param > 0) {
    ASSIGN_OR_RETURN(in.recipe, memory::with_bytes_per_param(in.recipe, f.bytes_per_param));
  }
  if (f.reserve != "auto") {
    StatusOr<uint64_t> reserve = parse_byte_size(f.reserve);
    if (!reserve.is_ok()) return reserve.status().with_context("--reserve");
    in.reserve_bytes = static_cast<double>(*reserve);
  }
  if (f.bucket_size) {
    StatusOr<uint64_t> bucket = parse_byte_size(*f.bucket_size);
    if (!bucket.is_ok()) return bucket.status().with_context("--bucket-size");
    in.bucket_bytes = static_cast<double>(*bucket);
    in.zero3_reduce_bucket = true;  // counted where ZeRO-3 is (--zero 3, a --sweep row)
  }
  in.inference = f.inference;
  in.kv_len = f.kv_len;
  in.gen_len = f.gen_len;
  return in;
}

// Flags that would change nothing where they are given: refused rather than ignored.
Status check_flags_apply(const MemoryFlags& f) {
  if (!f.inference && (f.kv_len > 0 || f.gen_len > 0)) {
    return invalid_argument(
        "--kv-len and --gen-len size the KV cache of an --inference estimate: "
        "add --inference, or drop them");
  }
  RETURN_IF_ERROR(check_json_or_explain(f.json, f.explain, "one estimate's formulas"));
  if (f.explain && f.sweep) {
    return invalid_argument(
        "--explain shows one estimate's formulas as text: drop --sweep or --explain");
  }
  // Training-only flags on an inference estimate (weights and KV cache, no backward).
  if (f.inference && f.model.seq > 0) {
    return invalid_argument(
        "--seq {} is a training sample's length; an --inference estimate's tokens are --kv-len "
        "(the prompt) + --gen-len (generated): drop --seq",
        f.model.seq);
  }
  if (f.inference && f.recompute != "none") {
    return invalid_argument(
        "--recompute {} saves activations for the backward pass, which "
        "--inference has none of: drop --recompute",
        f.recompute);
  }
  if (f.inference && f.bucket_size) {
    return invalid_argument(
        "--bucket-size sizes a training rank's gradient bucket; an --inference estimate has no "
        "gradients: drop --bucket-size");
  }
  if (f.inference && f.zero > 0) {
    return invalid_argument(
        "--zero {} shards gradients and optimizer states over dp; an "
        "--inference estimate keeps whole weights on every GPU: drop --zero",
        f.zero);
  }
  // A bare parameter count has model states only: flags about activations or the KV cache.
  if (f.model.params > 0) {
    if (const char* flag = first_given({{"--inference", f.inference},
                                        {"--cp", f.cp > 1},
                                        {"--ep", f.ep > 1},
                                        {"--sp", f.sp},
                                        {"--flash-attn", f.flash_attn},
                                        {"--pp-split", !f.pp_split.empty()}})) {
      return invalid_argument(
          "{} needs the model's layers and dimensions, which --params does "
          "not give: use --model, --model-file or the dimension flags",
          flag);
    }
  }
  // --sweep varies dp, ZeRO and recompute itself.
  if (f.sweep) {
    if (const char* flag = first_given({{"--dp", f.dp != 1},
                                        {"--zero", f.zero != 0},
                                        {"--shard", f.shard != 0},
                                        {"--recompute", f.recompute != "none"},
                                        {"--per-stage", f.per_stage}})) {
      return invalid_argument(
          "--sweep tabulates every dp size (--sweep-dp), ZeRO stage and "
          "recompute mode, on the heaviest stage: drop {} or --sweep",
          flag);
    }
  } else if (!f.sweep_dp.empty()) {
    return invalid_argument("--sweep-dp sets the dp sizes of --sweep: add --sweep, or drop it");
  }
  return Status::ok();
}

// Without --dropout or a published recipe: none, as the built-in workloads train.
const DropoutChoice kNoDropout{0, "none: the model states no dropout"};

StatusOr<std::string> render(const MemoryFlags& f) {
  RETURN_IF_ERROR(check_flags_apply(f));
  ASSIGN_OR_RETURN(memory::EstimateInput input, to_input(f));
  const DropoutChoice dropout = choose_dropout(f.dropout, input.model, kNoDropout);
  input.layout.dropout = dropout.probability;
  ASSIGN_OR_RETURN(memory::GpuSpec gpu, resolve_gpu(f.gpu));
  input.capacity_bytes = gpu.memory_bytes;
  if (!gpu.cuda_runtime && !input.reserve_bytes) input.reserve_bytes = 0;  // host memory
  memory::ReportContext context{.model_name = f.model.params > 0
                                                  ? fmt::format("{:.4g} parameters", f.model.params)
                                                  : input.model.name,
                                .gpu_name = gpu.name,
                                .capacity_caveat = {}};
  if (!gpu.cuda_runtime && f.gpu.gpu_file.empty()) {  // the cpu preset, not the user's file
    context.capacity_caveat = fmt::format(
        "the {} preset's {:.0f} GiB is a placeholder, not this host's memory, and the ranks on a "
        "host share its memory: the fit is per rank against it; give your host's memory per "
        "rank with --gpu-file",
        gpu.name, gpu.memory_bytes / 1073741824.0);
  }
  if (f.sweep) {
    ASSIGN_OR_RETURN(std::vector<int> dp_sizes,
                     parse_dp_sizes(f.sweep_dp.empty() ? "1..1024" : f.sweep_dp));
    ASSIGN_OR_RETURN(memory::SweepReport report, memory::sweep_memory(input, dp_sizes));
    return f.json ? memory::format_sweep_json(report, context)
                  : memory::format_sweep_text(report, context);
  }
  ASSIGN_OR_RETURN(memory::MemoryEstimate estimate, memory::estimate_memory(input));
  if (f.json) return memory::format_estimate_json(input, estimate, context);
  std::string text = memory::format_estimate_text(input, estimate, context, f.per_stage);
  if (f.explain) {
    std::vector<memory::ExplainLine> lines = memory::explain_estimate(input, estimate);
    lines.push_back({"dropout", "hidden and attention, 1-byte masks when > 0 (--dropout P sets it)",
                     fmt::format("{:g}", dropout.probability), dropout.source});
    text += memory::format_explain_text(lines);
  }
  return text;
}

void add_layout_flags(CLI::App& cmd, MemoryFlags& f) {
  cmd.add_option("--micro-batch", f.micro_batch, "Sequences per micro-batch b")
      ->capture_default_str()
      ->check(positive_number());
  cmd.add_option("--global-batch", f.global_batch, "Sequences per step (default dp x micro-batch)")
      ->check(positive_number());
  for (auto [name, value, help] :
       {std::tuple{"--dp", &f.dp, "Data-parallel degree"},
        std::tuple{"--tp", &f.tp, "Tensor-parallel degree t"},
        std::tuple{"--pp", &f.pp, "Pipeline-parallel degree p"},
        std::tuple{"--vpp", &f.vpp, "Virtual stages per pipeline rank v (interleaved)"},
        std::tuple{"--cp", &f.cp, "Context-parallel degree (splits the sequence)"},
        std::tuple{"--ep", &f.ep,
                   "Expert-parallel degree (experts sharded over ep of the dp x cp ranks)"}}) {
    cmd.add_option(name, *value, help)->capture_default_str()->check(CLI::Range(1, 1 << 20));
  }
  cmd.add_flag("--sp", f.sp, "Megatron sequence parallelism (needs --tp > 1)");
  cmd.add_option("--zero", f.zero, "ZeRO stage: 0 DDP, 1 optimizer, 2 + grads, 3 (FSDP) + params")
      ->capture_default_str();
  cmd.add_option("--shard", f.shard,
                 "Data-parallel ranks ZeRO shards over (0: all dp x cp); fewer is a hybrid, e.g. "
                 "--zero 3 --shard 8: PyTorch's HSDP, sharded within 8 GPUs, replicated across")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--pp-schedule", f.pp_schedule,
                 memory::schedule_choices() +
                     " (zero-bubble: zb-h1, dualpipev; dualpipe holds "
                     "two copies of the parameters)")
      ->capture_default_str()
      ->check(CLI::IsMember(memory::schedule_names()));
  cmd.add_option("--pp-split", f.pp_split, "Layers per stage, e.g. 9,8,8,7 (uneven stages)");
  cmd.add_option("--recompute", f.recompute, "Activation recomputation: none, selective or full")
      ->capture_default_str()->check(CLI::IsMember({"none", "selective", "full"}));
  cmd.add_flag("--flash-attn", f.flash_attn, "FlashAttention: the a s^2 b attention scores are never stored");
}

void add_recipe_flags(CLI::App& cmd, MemoryFlags& f) {
  cmd.add_option("--precision", f.precision,
                 "fp32-adam (16 B/param), bf16-mixed (16), fp16-mixed (16, loss-scaled fp16), "
                 "bf16-fp32grad (18), bf16-fp32grad-accum (20); fp32, bf16 and fp16 are aliases")
      ->capture_default_str()
      ->check(CLI::IsMember(memory::precision_choices()));
  cmd.add_option("--bytes-per-param", f.bytes_per_param,
                 "Model-state bytes per parameter (custom recipe: the rest after params and grads "
                 "is optimizer state)")
      ->check(positive_number());
  cmd.add_option("--dropout", f.dropout,
                 "Dropout probability; > 0 counts the 1-byte masks (default: the model's "
                 "published recipe, a preset's or a config.json's, else 0)")
      ->check(probability());
  cmd.add_option("--optimizer", f.optimizer,
                 "adamw (adam: the same states, two fp32 moments) or sgd (plain, no momentum "
                 "buffer)")
      ->capture_default_str()
      ->check(CLI::IsMember({"adamw", "adam", "sgd"}));
  add_gpu_flags(cmd, f.gpu, "capacity");
  cmd.add_option("--reserve", f.reserve,
                 "Memory kept aside (CUDA context, NCCL buffers, fragmentation): auto or a size "
                 "(4G)")->capture_default_str();
  cmd.add_option("--bucket-size", f.bucket_size,
                 "Gradient bucket: bytes, 25MB (decimal) or 25MiB. DDP and ZeRO-1/2: one in "
                 "flight, capped at the gradients (default 25MB, PyTorch's bucket_cap_mb=25); "
                 "--zero 3: DeepSpeed's reduce bucket, held whole (reduce_bucket_size x gradient "
                 "bytes: 1GB for its default 5e8 in bf16), none unless given (FSDP)");
  cmd.add_flag("--inference", f.inference, "Weights and KV cache only (no grads or optimizer)");
  cmd.add_option("--kv-len", f.kv_len, "Prompt tokens in the KV cache (--inference)")
      ->check(non_negative_number());
  cmd.add_option("--gen-len", f.gen_len, "Generated tokens in the KV cache (--inference)")
      ->check(non_negative_number());
}

}  // namespace

Subcommand add_memory_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand(
      "memory", "Per-GPU memory by category (params, grads, optimizer, activations, comm, KV "
                "cache, reserve) for a model and a parallel layout, and whether it fits");
  auto flags = std::make_shared<MemoryFlags>();
  add_model_flags(*cmd, flags->model);
  add_layout_flags(*cmd, *flags);
  add_recipe_flags(*cmd, *flags);
  cmd->add_flag("--per-stage", flags->per_stage, "Every pipeline stage, not only the heaviest");
  cmd->add_flag("--explain", flags->explain, "Each formula with its numbers and its source");
  cmd->add_flag("--json", flags->json, "Print JSON: {\"per_gpu_bytes\": {...}, \"capacity_bytes\", ...}");
  cmd->add_flag("--sweep", flags->sweep,
                "Parameters, FLOPs, and a table over dp sizes x ZeRO stages x recompute modes");
  cmd->add_option("--sweep-dp", flags->sweep_dp,
                  "dp sizes of --sweep: LOW..HIGH (powers of two) or a list (default 1..1024)");
  cmd->footer(
      "Examples:\n"
      "  partrain memory --model llama-2-7b --dp 8 --zero 1 --micro-batch 1 --gpu a100-80g\n"
      "  partrain memory --model llama-3-70b --tp 8 --sp --pp 4 --recompute selective --per-stage\n"
      "  partrain memory --params 7.5e9 --dp 64 --zero 2 --explain\n"
      "  partrain memory --model llama-3-405b --tp 8 --pp 14 --sweep --sweep-dp 1..1024\n"
      "  partrain memory --model llama-3-8b --inference --kv-len 8192 --micro-batch 4\n"
      "Formulas: Narayanan 2021 (parameters, FLOPs, bubble), Korthikanti 2022 (activations), ZeRO "
      "2019 (sharding), Kwon 2023 (KV cache); see docs/memory.md. GiB = 2^30 bytes, GB = 10^9. "
      "Exit 2 for an invalid layout or unknown preset, 3 for a malformed --model-file/--gpu-file.");
  return {cmd, [flags] { return print_report(render(*flags)); }};
}

}  // namespace partrain::cli
