#include "runner/worker/cpu_binding.h"

#include <sched.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace partrain::runner {

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

StatusOr<std::vector<int>> rank_cpus(const std::vector<int>& allowed, int local_rank,
                                     int local_ranks, int per_rank) {
  const int64_t needed = int64_t{local_ranks} * per_rank;
  if (per_rank < 1 || local_rank < 0 || local_rank >= local_ranks ||
      needed > static_cast<int64_t>(allowed.size())) {
    return invalid_argument(
        "--cpu-bind core: {} rank{} on this node x {} BLAS thread{} need {} CPUs, and {} {} "
        "allowed here (sched_getaffinity); launch fewer ranks, fewer --blas-threads, or "
        "--cpu-bind none",
        local_ranks, local_ranks == 1 ? "" : "s", per_rank, per_rank == 1 ? "" : "s", needed,
        allowed.size(), allowed.size() == 1 ? "is" : "are");
  }
  const auto first = allowed.begin() + int64_t{local_rank} * per_rank;
  return std::vector<int>(first, first + per_rank);
}

Status bind_process(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  // Every thread already running (OpenBLAS's pool, the tracer's, the stop-signal watch), by id.
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", error)) {
    const pid_t tid = static_cast<pid_t>(std::stol(task.path().filename().string()));
    if (sched_setaffinity(tid, sizeof(set), &set) != 0 && errno != ESRCH) {
      return failed("cannot bind thread {} to its CPUs: {}", tid, std::strerror(errno));
    }
  }
  if (error) return failed("cannot list this process's threads: {}", error.message());
  return Status::ok();
}

}  // namespace partrain::runner
