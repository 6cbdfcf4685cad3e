// `partrain worker` (hidden): one rank of a built-in workload, started by `partrain launch
// --workload`, which hands it the checked workload as PARTRAIN_WORKLOAD_CONFIG. Rank 0 prints the
// run's summary: text on stdout, or JSON into PARTRAIN_SUMMARY_FILE for `launch --json`. Its
// RankGuard watches the collectives (PARTRAIN_COLLECTIVE_TIMEOUT) and dumps the flight recorder
// into PARTRAIN_FLIGHT_DIR when something goes wrong (docs/reliability.md).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "cli/command.h"
#include "core/env.h"
#include "core/log.h"
#include "runner/worker/cpu_binding.h"
#include "runner/worker/rank_guard.h"
#include "runner/worker/rank_tracing.h"
#include "runner/worker/world.h"
#include "runner/workload/trainer.h"
#include "runner/workload/workload_device.h"

namespace partrain::cli {
namespace {

// Before the world is joined this rank's number is not known ("rank -1" said nothing).
int fail(const Status& status) {
  log::error("{}", status.message());
  return status.exit_code();
}

int run_worker() {
  // First, before any thread starts: the launcher's stop signal must find the guard's thread.
  std::unique_ptr<runner::RankGuard> guard = runner::RankGuard::install();
  auto text = env::get("PARTRAIN_WORKLOAD_CONFIG");
  if (!text) {
    log::error("`partrain worker` runs one rank of `partrain launch --workload ...`; start it "
               "through the launcher");
    return 2;
  }
  StatusOr<runner::WorkloadConfig> config = runner::workload_from_json(*text);
  if (!config.is_ok()) return fail(config.status());
  StatusOr<Nanoseconds> collective_timeout = runner::collective_timeout_from_env();
  if (!collective_timeout.is_ok()) return fail(collective_timeout.status());
  // Traced runs record from before the join, so the world's own collectives are in the trace.
  std::unique_ptr<runner::RankTracing> tracing = runner::RankTracing::from_env();
  // The device before the world: the communicator works on its buffers.
  int local_rank = 0;
  int local_ranks = 1;
  if (runner::launched_as_worker()) {
    StatusOr<runner::WorkerEnv> env = runner::read_worker_env();
    if (!env.is_ok()) return fail(env.status());
    local_rank = env->local_rank;
    local_ranks = env->local_world_size;
  }
  StatusOr<std::unique_ptr<runner::Device>> device =
      runner::create_workload_device(*config, local_rank);
  if (!device.is_ok()) return fail(device.status());
  // Before the world's threads start (they inherit it); a GPU workload (--device auto) is left.
  if (config->cpu_bind == "core" && (*device)->host_addressable()) {
    StatusOr<std::vector<int>> cpus =
        runner::rank_cpus(runner::allowed_cpus(), local_rank, local_ranks, config->blas_threads);
    if (!cpus.is_ok()) return fail(cpus.status());
    if (Status bound = runner::bind_process(*cpus); !bound.is_ok()) return fail(bound);
    log::info("local rank {} bound to CPU {}", local_rank, fmt::join(*cpus, ","));
  }
  runner::WorldOptions options;
  options.collective_timeout = *collective_timeout;
  options.backend = config->comm == "nccl" ? runner::CommBackend::kNccl : runner::CommBackend::kGloo;
  options.device = device->get();
  if (tracing) tracing->attach(options);
  StatusOr<runner::World> world = runner::join_world(options);
  if (!world.is_ok()) return fail(world.status());
  const int rank = world->comm->rank();
  // The trace's short device id ("cpu", "cuda:0"): the name up to its description.
  if (tracing) {
    const std::string name = (*device)->name();
    tracing->joined(*world, name.substr(0, name.find(' ')));
  }
  // Declared after the world, so it stops watching before the world's recorder goes away.
  std::unique_ptr<runner::RankGuard::Watch> watch =
      guard->watch(*world, tracing ? &tracing->tracer() : nullptr, *collective_timeout);
  StatusOr<runner::RunSummary> summary =
      runner::run_workload(*config, **device, *world->comm, world->recorder.get(),
                           tracing ? &tracing->tracer() : nullptr);
  const bool collective_failed = !summary.is_ok() && watch->dump_after_failure(summary.status());
  if (tracing) tracing->finish();
  if (!summary.is_ok()) {
    log::error("rank {}: {}", rank, summary.status().message());
    if (collective_failed) runner::RankGuard::linger_for_launcher();
    return summary.status().exit_code();
  }
  if (rank != 0) return 0;
  if (config->json) {
    std::string json = runner::format_summary_json(*summary);
    if (auto path = env::get("PARTRAIN_SUMMARY_FILE")) {
      // The launcher's private directory (cli/launch_command.cpp); a failed write is the run's.
      std::ofstream file(*path);
      file << json;
      file.close();
      if (!file) {
        log::error("rank 0: cannot write the run's summary {}: {}", *path, std::strerror(errno));
        return 1;
      }
    } else {
      std::fwrite(json.data(), 1, json.size(), stdout);
    }
  } else {
    std::string report = runner::format_summary_text(*summary);
    std::fwrite(report.data(), 1, report.size(), stdout);
  }
  return 0;
}

}  // namespace

Subcommand add_worker_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand(
      "worker", "One rank of a built-in workload (started by `partrain launch --workload`)");
  cmd->group("");  // hidden from `partrain --help`: users run `launch --workload`
  return {cmd, [] { return run_worker(); }};
}

}  // namespace partrain::cli
