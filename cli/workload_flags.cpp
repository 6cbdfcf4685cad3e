#include "cli/workload_flags.h"

#include "cli/command.h"

namespace partrain::cli {

namespace {
constexpr const char* kGroupPrefix = "Workload ";
}  // namespace

std::vector<std::string> workload_flags_given(const CLI::App& command) {
  std::vector<std::string> given;
  for (const CLI::Option* option : command.get_options()) {
    if (option->get_group().rfind(kGroupPrefix, 0) != 0 || option->count() == 0) continue;
    if (option->get_name() == "--workload") continue;
    given.push_back(option->get_name());
  }
  return given;
}

void add_workload_flags(CLI::App& command, WorkloadFlags& f) {
  const std::string model = std::string(kGroupPrefix) + "model";
  const std::string layout = std::string(kGroupPrefix) + "layout";
  const std::string training = std::string(kGroupPrefix) + "training";
  command.add_option("--workload", f.workload,
                     "Run a built-in workload instead of a command: gpt or mlp")
      ->check(CLI::IsMember({"gpt", "mlp"}))->group(model);
  command.add_option("--layers", f.layers, "Transformer blocks / MLP layers (default 4)")
      ->group(model);
  command.add_option("--hidden", f.hidden, "Hidden size (default 256)")->group(model);
  command.add_option("--heads", f.heads, "Attention heads (default 8)")->group(model);
  command.add_option("--seq", f.seq, "Sequence length in tokens (default 128)")->group(model);
  command.add_option("--vocab", f.vocab, "Vocabulary size (default 512)")->group(model);
  command.add_option("--ffn", f.ffn, "MLP width (default 4 x hidden)")->group(model);
  add_expert_flags(command, f.moe, model);
  command.add_option("--moe-aux-loss-coeff", f.moe_aux_loss_coeff,
                     "Mixture of experts: the load-balancing loss's weight (Switch's E x sum_i "
                     "f_i P_i over each micro-batch of all data-parallel ranks; 0: none)")
      ->capture_default_str()->check(non_negative_number())->group(model);
  command.add_option("--micro-batch", f.micro_batch, "Samples per micro-batch")
      ->capture_default_str()->group(training);
  command.add_option("--global-batch", f.global_batch,
                     "Samples per step over all ranks (default dp x micro-batch)")
      ->group(training);
  command.add_option("--steps", f.steps, "Optimizer steps")->capture_default_str()
      ->group(training);
  command.add_option("--lr", f.lr, "AdamW learning rate")->capture_default_str()->group(training);
  command.add_option("--seed", f.seed, "Seed of the initial weights and the synthetic data")
      ->capture_default_str()->group(training);
  command.add_option("--device", f.device,
                     "cpu, cuda (one GPU per rank: LOCAL_RANK, or shared under --comm gloo), "
                     "auto (cuda when a GPU is visible, else cpu with a notice) or "
                     "cpu-isolated (the CPU with its memory out of the host's reach, as a GPU's: "
                     "checks that the workload reaches its tensors only through device calls)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda", "auto", "cpu-isolated"}))
      ->group(training);
  command.add_option("--comm", f.comm,
                     "Communicator backend: gloo (host memory; with --device cuda it stages "
                     "through the host, so ranks can share a GPU), nccl (GPU memory, one rank "
                     "per GPU) or auto (nccl on cuda, gloo on cpu)")
      ->capture_default_str()->check(CLI::IsMember({"gloo", "nccl", "auto"}))->group(training);
  command.add_option("--precision", f.precision,
                     "fp32 (fp32-adam), bf16 (bf16-mixed) or bf16-fp32grad, as `partrain "
                     "memory` names the recipes. Both bf16: every matmul multiplies bf16-rounded "
                     "operands with fp32 accumulation (the CPU as the GPU), parameters are stored "
                     "in bf16 beside an fp32 master; bf16-mixed stores gradients in bf16, "
                     "bf16-fp32grad in fp32; activations are kept in bf16 (layernorm statistics "
                     "and logits in fp32)")
      ->capture_default_str()->group(training);
  command.add_option("--recompute", f.recompute,
                     "Activation recomputation: none, selective (attention core) or full "
                     "(each layer's forward from its input)")
      ->capture_default_str()->check(CLI::IsMember({"none", "selective", "full"}))
      ->group(training);
  command.add_option("--data", f.data,
                     "uint16 token file (llm.c .bin or nanoGPT layout); default: a synthetic "
                     "learnable stream")
      ->group(training);
  command.add_option("--peak-flops", f.peak_flops,
                     "Peak FLOP/s per rank for MFU (default on CPU: a measured sgemm peak)")
      ->group(training);
  command.add_option("--blas-threads", f.blas_threads, "OpenBLAS threads per rank")
      ->capture_default_str()->group(training);
  command
      .add_option("--cpu-bind", f.cpu_bind,
                  "core: bind each rank of a CPU workload to --blas-threads cores of its own, "
                  "in order of local rank (Open MPI's --bind-to core); none: leave placement "
                  "to the scheduler")
      ->check(CLI::IsMember({"none", "core"}))
      ->capture_default_str()
      ->group(training);
  command.add_option("--inject", f.inject,
                     "Inject a fault (repeatable), KIND:rank=R[,step=S][,ms=M][,code=C], in step "
                     "S (every step, or the first, without step=): slow (ms=M: sleep before the "
                     "compute), crash (abort: 134), exit (code C, default 1), hang (the others' "
                     "watchdog fires: 124), stop (SIGSTOP: the others' watchdog fires: 124), "
                     "desync (a different collective: 124 or the failing rank's code), oom (a "
                     "tracked allocation fails: 1)")
      ->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)->group(training);
  command.add_option("--dp", f.dp, "Data-parallel degree (default world / (tp x pp))")
      ->group(layout);
  command.add_option("--tp", f.tp, "Tensor-parallel degree (Megatron)")
      ->default_str("1")
      ->group(layout);
  command.add_option("--pp", f.pp, "Pipeline-parallel degree")->default_str("1")->group(layout);
  command.add_option("--ep", f.ep,
                     "Expert-parallel degree: routed experts sharded over ep of the dp ranks "
                     "(tokens exchanged by all_to_all; dense weights stay data-parallel)")
      ->default_str("1")->group(layout);
  command.add_flag("--sp", f.sp, "Megatron sequence parallelism (needs --tp > 1)")->group(layout);
  command
      .add_option("--zero", f.zero, "ZeRO stage: 0 DDP, 1 optimizer states, 2 + gradients, 3 FSDP")
      ->default_str("0")
      ->group(layout);
  command
      .add_option("--shard", f.shard,
                  "Data-parallel ranks ZeRO shards over (0: all); fewer is a hybrid whose "
                  "replicas all-reduce each shard, e.g. --zero 3 --shard 2: PyTorch's HSDP")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20))
      ->group(layout);
  command
      .add_option("--pp-schedule", f.pp_schedule,
                  memory::schedule_choices() +
                      " (zb-h1 and dualpipev split the backward "
                      "in B and W; dualpipe: memory only)")
      ->capture_default_str()
      ->check(CLI::IsMember(memory::schedule_names()))
      ->group(layout);
  command.add_option("--vpp", f.vpp, "Virtual pipeline stages per rank (interleaved)")
      ->capture_default_str()->group(layout);
  command.add_option("--bucket-mb", f.bucket_mb, "DDP gradient bucket size in MB")
      ->capture_default_str()->group(layout);
  command.add_option("--pp-split", f.pp_split,
                     "Layers per pipeline stage, e.g. 3,1 (uneven stages)")
      ->delimiter(',')->group(layout);
  command.add_option("--strategy", f.strategy, "Shorthand: ddp, zero1, zero2, fsdp, tp, sp, pp")
      ->check(CLI::IsMember({"ddp", "zero1", "zero2", "fsdp", "tp", "sp", "pp"}))
      ->group(layout);
}

namespace {

// The layout flags, typed once into the run's layout; resolve_workload checks them as given.
Status set_layout(const WorkloadFlags& f, int world, runner::WorkloadConfig& config) {
  memory::TrainingLayout& l = config.layout;
  config.world = {world, f.dp.has_value()};
  l.dp = f.dp.value_or(1);
  l.tp = f.tp.value_or(1);
  l.pp = f.pp.value_or(1);
  l.ep = f.ep.value_or(1);
  l.sp = f.sp;
  l.zero = f.zero.value_or(0);
  l.shard = f.shard;
  l.schedule = *memory::parse_schedule(f.pp_schedule);  // the flag only takes known names
  l.vpp = f.vpp;
  l.micro_batch = f.micro_batch;
  if (f.global_batch) l.global_batch = *f.global_batch;
  l.pp_split.assign(f.pp_split.begin(), f.pp_split.end());
  l.recompute = *memory::parse_recompute(f.recompute);
  config.bucket_bytes = static_cast<int64_t>(f.bucket_mb * 1e6);
  if (!f.strategy) return Status::ok();
  return runner::apply_strategy(*f.strategy, {f.tp, f.pp, f.zero}, world, l);
}

}  // namespace

StatusOr<runner::WorkloadConfig> to_workload_config(const WorkloadFlags& f, int world,
                                                    bool json) {
  runner::WorkloadConfig config;
  config.kind = *memory::parse_workload_kind(f.workload.value_or("gpt"));  // gpt or mlp only
  memory::WorkloadModel& m = config.model;
  m.layers = f.layers.value_or(4);
  m.hidden = f.hidden.value_or(256);
  m.heads = f.heads.value_or(8);
  m.seq = f.seq.value_or(128);
  m.vocab = f.vocab.value_or(512);
  m.ffn = f.ffn.value_or(4 * m.hidden);
  apply_expert_flags(f.moe, m.ffn, m.moe);
  config.moe_aux_loss_coeff = f.moe_aux_loss_coeff;
  if (config.kind == memory::WorkloadKind::kMlp) {
    for (const auto& [name, given] : {std::pair{"--heads", f.heads.has_value()},
                                      std::pair{"--vocab", f.vocab.has_value()},
                                      std::pair{"--ffn", f.ffn.has_value()}}) {
      if (given) return invalid_argument("{} does not apply to --workload mlp", name);
    }
  }
  RETURN_IF_ERROR(set_layout(f, world, config));
  config.steps = f.steps;
  config.lr = f.lr;
  config.seed = f.seed;
  config.device = f.device;
  config.comm = f.comm;
  auto precision = runner::parse_precision(f.precision);
  if (f.precision == "bf16-fp32grad-accum") {
    return invalid_argument("--precision bf16-fp32grad-accum (an fp32 accumulation buffer beside "
                            "bf16 gradients) is not implemented; pass --precision bf16 "
                            "(bf16-mixed) or bf16-fp32grad");
  }
  if (!precision) {
    return invalid_argument("--precision '{}' is not fp32, bf16, fp32-adam, bf16-mixed or "
                            "bf16-fp32grad",
                            f.precision);
  }
  config.precision = *precision;
  config.data_path = f.data;
  config.peak_flops = f.peak_flops;
  config.blas_threads = f.blas_threads;
  config.cpu_bind = f.cpu_bind;
  config.json = json;
  for (const std::string& text : f.inject) {
    auto spec = runner::fault::parse_fault_spec(text);
    if (!spec.is_ok()) return invalid_argument("--inject {}: {}", text, spec.status().message());
    config.faults.push_back(*spec);
  }
  RETURN_IF_ERROR(runner::resolve_workload(config));
  return config;
}

}  // namespace partrain::cli
