// The environment each worker starts with: torchrun's whole contract (RANK, LOCAL_RANK,
// WORLD_SIZE, ..., TORCHELASTIC_*, TORCH_NCCL_ASYNC_ERROR_HANDLING, OMP_NUM_THREADS) plus
// partrain's own PARTRAIN_* run variables, on top of the launcher's environment minus the
// launcher's own PARTRAIN_<FLAG> settings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/duration.h"

namespace partrain::launch {

// What every worker of a run shares.
struct RunContext {
  std::string run_id;
  std::string rdzv_id;  // TORCHELASTIC_RUN_ID, as torchrun sets it
  std::string token;
  std::string master_addr;
  uint16_t master_port = 0;
  int nnodes = 1;
  int node_rank = 0;
  int nproc_per_node = 1;
  // --rdzv-timeout: how long workers wait for the store and their peers (PARTRAIN_STORE_TIMEOUT).
  Nanoseconds rdzv_timeout = std::chrono::seconds(300);
  // The store on MASTER_PORT also speaks TCPStore: torch's ranks are all its clients
  // (TORCHELASTIC_USE_AGENT_STORE=True), as under torchrun's agent store.
  bool agent_store = false;
  // Where rank R's TORCHELASTIC_ERROR_FILE goes (error_file_path()); empty: none.
  std::string error_file_dir;

  int world_size() const { return nnodes * nproc_per_node; }
  int global_rank(int local_rank) const { return node_rank * nproc_per_node + local_rank; }
};

// Rank R's TORCHELASTIC_ERROR_FILE in `dir`, where a script decorated with torch's @record
// leaves its exception for the launcher to read back.
std::string error_file_path(const std::string& dir, int rank);

// The launcher's own environment as "NAME=value" strings.
std::vector<std::string> current_environment();

// `base` minus the names in `strip`, then the run's variables for this local rank (replacing any
// inherited ones, so a nested launch never leaks its parent's RANK).
std::vector<std::string> worker_environment(const std::vector<std::string>& base,
                                            const std::vector<std::string>& strip,
                                            const RunContext& run, int local_rank);

}  // namespace partrain::launch
