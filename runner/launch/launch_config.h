// What one `partrain launch` (one node's launcher) is asked to do: torchrun's flags as a struct, so
// other commands (`partrain bench collectives -n 4` re-executing itself) can launch without a CLI.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/duration.h"

namespace partrain::launch {

struct LaunchConfig {
  int nproc_per_node = 1;
  // Unset: detected from Slurm / Open MPI / PMI, else a single node.
  std::optional<int> nnodes;
  std::optional<int> node_rank;
  std::optional<std::string> master_addr;  // unset: Slurm's first host, $MASTER_ADDR, 127.0.0.1
  std::optional<uint16_t> master_port;     // unset: a free port (single node) or 29500
  std::string rdzv_id = "none";            // torchrun's job id (TORCHELASTIC_RUN_ID)
  // How long nodes wait for each other, and workers for the store and their peers.
  Nanoseconds rdzv_timeout = std::chrono::seconds(300);
  std::optional<std::string> token;        // multi-node shared secret; single node: random
  // Multi-node: a file every node reads the secret from; node 0 creates it when absent.
  std::optional<std::string> token_file;
  // Node 0's store listens on every interface, not only --master-addr's.
  bool rdzv_bind_all = false;
  std::optional<std::string> run_id;       // PARTRAIN_RUN_ID; unset: generated
  std::optional<std::string> log_dir;      // one file per rank: DIR/rank_N.log
  // log_dir is a root, as torchrun's --log-dir: each run writes DIR/<run id>/rank_N.log (then
  // DIR/<run id>.2/, ... when a --run-id is reused), so a run never overwrites another's logs.
  bool log_dir_per_run = false;
  bool tee = false;                        // with log_dir: also relay to the terminal
  bool prefix = true;                      // "[rank N] " before each relayed line
  Nanoseconds grace = std::chrono::seconds(10);  // SIGTERM -> SIGKILL
  std::vector<std::string> command;        // the worker command, argv style
  // Variables not passed on to workers: the launcher's own PARTRAIN_<FLAG> settings.
  std::vector<std::string> strip_env;
  // "NAME=value" variables added to every worker's environment (replacing inherited ones):
  // how `launch --workload` hands the resolved workload to its workers.
  std::vector<std::string> extra_env;
  // Relay the workers' stdout to the launcher's stderr, keeping stdout for one result document
  // (`launch --workload ... --json`).
  bool worker_stdout_to_stderr = false;
  // Tracing: a collector and trace file per node (`partrain launch` traces by default; commands
  // that launch for themselves, like `bench collectives`, do not). Under an outer `partrain
  // trace` (PARTRAIN_COLLECTOR set) the workers record into that one instead.
  bool trace = false;
  std::optional<std::string> trace_file;  // node 0's file; unset: ./partrain-runs/<run-id>.db
  uint64_t trace_max_bytes = 0;           // each node's file at most (0: no limit)
  std::string trace_command;              // the command line, for the trace's run row
  std::string trace_config_json = "{}";   // the run's configuration (JSON), for the run row
};

}  // namespace partrain::launch
