// `partrain worker` (hidden): one rank of a built-in workload, started by `partrain launch
// --workload`, which hands it the checked workload as PARTRAIN_WORKLOAD_CONFIG. Rank 0 prints the
// run's summary: text on stdout, or JSON into PARTRAIN_SUMMARY_FILE for `launch --json`.
#include <cstdio>
#include <fstream>

#include "cli/command.h"
#include "core/env.h"
#include "core/log.h"
#include "runner/worker/rank_tracing.h"
#include "runner/worker/world.h"
#include "runner/workload/trainer.h"

namespace partrain::cli {
namespace {

int fail(const Status& status, int rank) {
  log::error("rank {}: {}", rank, status.message());
  return status.exit_code();
}

int run_worker() {
  auto text = env::get("PARTRAIN_WORKLOAD_CONFIG");
  if (!text) {
    log::error("`partrain worker` runs one rank of `partrain launch --workload ...`; start it "
               "through the launcher");
    return 2;
  }
  StatusOr<runner::WorkloadConfig> config = runner::workload_from_json(*text);
  if (!config.is_ok()) return fail(config.status(), -1);
  // Traced runs record from before the join, so the world's own collectives are in the trace.
  std::unique_ptr<runner::RankTracing> tracing = runner::RankTracing::from_env();
  runner::WorldOptions options;
  if (tracing) tracing->attach(options);
  StatusOr<runner::World> world = runner::join_world(options);
  if (!world.is_ok()) return fail(world.status(), -1);
  const int rank = world->comm->rank();
  if (tracing) tracing->joined(*world, "cpu");
  StatusOr<runner::RunSummary> summary =
      runner::run_workload(*config, *world->comm, world->recorder.get());
  if (tracing) tracing->finish();
  if (!summary.is_ok()) return fail(summary.status(), rank);
  if (rank != 0) return 0;
  if (config->json) {
    std::string json = runner::format_summary_json(*summary);
    if (auto path = env::get("PARTRAIN_SUMMARY_FILE")) {
      std::ofstream(*path) << json;
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
