// The flags of a built-in workload (`partrain launch --workload gpt|mlp ...`): model, batch,
// layout, training and data, turned into a checked runner::WorkloadConfig.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "cli/expert_flags.h"
#include "core/status.h"
#include "runner/workload/workload_config.h"

namespace partrain::cli {

struct WorkloadFlags {
  std::optional<std::string> workload;  // gpt | mlp; unset: run the command after `--`
  std::optional<int> layers, hidden, heads, seq, vocab, ffn;
  ExpertFlags moe;  // gpt: a mixture of experts (memory::MixtureOfExperts)
  double moe_aux_loss_coeff = 0.01;
  std::optional<int> ep;  // unset: 1
  int micro_batch = 1;
  std::optional<int> global_batch;
  int steps = 10;
  double lr = 1e-3;
  uint64_t seed = 1234;
  std::string device = "cpu";
  std::string comm = "auto";
  std::string precision = "fp32";
  std::string recompute = "none";
  std::string data;
  std::optional<int> dp;
  std::optional<int> tp;  // unset: 1
  std::optional<int> pp;  // unset: 1
  bool sp = false;
  std::optional<int> zero;  // unset: 0 (given or not matters beside --strategy)
  int shard = 0;            // ZeRO's shard group; 0: every dp rank
  std::string pp_schedule = "1f1b";
  int vpp = 1;
  double bucket_mb = 25;
  std::vector<int> pp_split;
  std::optional<std::string> strategy;
  std::optional<double> peak_flops;
  int blas_threads = 1;
  std::string cpu_bind = "none";
  std::vector<std::string> inject;  // --inject KIND:key=value[,...], repeatable
};

void add_workload_flags(CLI::App& command, WorkloadFlags& flags);
// The workload flags given (on the command line, through PARTRAIN_<FLAG> or --config) other than
// --workload itself: a run of a command takes none of them.
std::vector<std::string> workload_flags_given(const CLI::App& command);

// Builds and checks the workload for `world` ranks: exit 2 naming the constraint otherwise.
StatusOr<runner::WorkloadConfig> to_workload_config(const WorkloadFlags& flags, int world,
                                                    bool json);

}  // namespace partrain::cli
