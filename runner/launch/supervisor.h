// Runs one node's workers to the end: relays their output, reaps them, and applies the failure
// semantics: the first failing rank (here or on another node) stops every other worker (SIGTERM,
// SIGKILL after the grace); SIGINT/SIGTERM to the launcher are forwarded. Every child is reaped.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/duration.h"
#include "core/status.h"
#include "core/subprocess.h"
#include "runner/launch/failure_summary.h"
#include "runner/launch/orphan_guard.h"
#include "runner/launch/output_relay.h"
#include "runner/launch/rank_process.h"
#include "runner/launch/signal_channel.h"

namespace partrain::launch {

struct WorkerSpec {
  int rank = 0;  // global
  std::vector<std::string> argv;
  std::vector<std::string> env;
  // Its TORCHELASTIC_ERROR_FILE, read back when it fails (empty: none).
  std::string error_file;
};

struct SupervisorOptions {
  Nanoseconds grace = std::chrono::seconds(10);
  Nanoseconds remote_poll_interval = std::chrono::milliseconds(200);
  std::string host;
  int node_rank = 0;
  // Optional: where the node's trace tells the orphan guard of its rank processes (a nested
  // launcher's workers, in sessions of their own, are outside the workers' groups).
  std::shared_ptr<OrphanGuardLink> guard_link;
};

// How the supervisor talks to the other nodes (through the rendezvous store); empty on one node.
struct SupervisorHooks {
  // A local rank failed first here: publish it and return the run's root cause (another node's
  // failure when that one was published earlier).
  std::function<RankFailure(const RankFailure& local)> publish_failure;
  // Polled every remote_poll_interval while the run is healthy: another node's failure, if any.
  std::function<std::optional<RankFailure>()> poll_remote_failure;
};

struct SupervisorResult {
  std::optional<RankFailure> root_cause;
  bool root_cause_remote = false;
  std::optional<int> stop_signal;  // the signal that stopped the launcher, when that came first
  int stdout_error = 0;            // errno of the failed write to stdout that stopped the run
  std::vector<ExitStatus> exits;   // per worker, in spec order
  std::vector<int64_t> pids;
  // Per worker, in spec order: how its process stood when the run's first failure was seen
  // (before any worker was stopped), how it ended, and whether it was resumed to take its stop
  // signal. For the diagnosis: a rank stopped or stuck in the kernel is named as such.
  std::vector<RankProcess> processes;
};

class Supervisor {
 public:
  Supervisor(SupervisorOptions options, SignalChannel& signals, OutputRelay& relay)
      : options_(std::move(options)), signals_(signals), relay_(relay) {}

  // Spawns the workers (relay slot i = workers[i]) and supervises them until all are reaped. A
  // worker that cannot be spawned (command not found) stops those already started, returns the
  // error.
  StatusOr<SupervisorResult> run(const std::vector<WorkerSpec>& workers,
                                 const SupervisorHooks& hooks);

 private:
  struct Worker {
    int rank = 0;
    Subprocess process;
    std::string error_file;
    RankProcess seen;  // filled by observe_workers() and as it ends
  };
  using Clock = std::chrono::steady_clock;

  Status spawn_all(const std::vector<WorkerSpec>& specs);
  void poll_once(Clock::time_point wake_at);
  void handle_signals();
  // stdout's reader went away (`| head`, a pager quit): the run stops as a pipeline's writer does
  // on SIGPIPE, the workers through SIGTERM and the grace period.
  void stop_if_terminal_broken();
  void reap_exited(const SupervisorHooks& hooks);
  void poll_remote(const SupervisorHooks& hooks);
  void begin_stop(int signal);
  // Looks at every live worker's process (/proc) once, when the run's first failure is seen.
  void observe_workers();
  void enforce_grace();
  void drain_output(size_t slot, int max_reads);
  void reap_orphans();
  bool has_children() const;
  bool all_reaped() const;
  bool any_output_open() const;
  Clock::time_point next_wake() const;
  RankFailure failure_of(size_t slot, const ExitStatus& status);

  SupervisorOptions options_;
  SignalChannel& signals_;
  OutputRelay& relay_;
  std::vector<Worker> workers_;
  SupervisorResult result_;
  Clock::time_point started_;
  std::optional<Clock::time_point> kill_deadline_;  // set once stopping
  bool killed_ = false;
  Clock::time_point next_remote_poll_;
  std::optional<OrphanGuard> orphan_guard_;  // the workers' children, should the launcher die
};

}  // namespace partrain::launch
