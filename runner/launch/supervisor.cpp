#include "runner/launch/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/clock.h"
#include "core/log.h"

namespace partrain::launch {
namespace {

constexpr auto kIdleWake = std::chrono::milliseconds(100);
// Once every worker is reaped, output still held open by an escaped grandchild is waited for
// this long, not forever.
constexpr auto kOutputDrain = std::chrono::seconds(1);

int poll_timeout_ms(std::chrono::steady_clock::time_point wake_at) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      wake_at - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, kIdleWake.count()));
}

}  // namespace

StatusOr<SupervisorResult> Supervisor::run(const std::vector<WorkerSpec>& workers,
                                           const SupervisorHooks& hooks) {
  started_ = Clock::now();
  // Orphaned grandchildren (a worker's background job) are re-parented to us instead of to PID 1,
  // which in a container may never reap them: the run leaves no zombie behind.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  next_remote_poll_ = started_ + options_.remote_poll_interval;
  if (auto guard = OrphanGuard::start(); guard.is_ok()) {
    orphan_guard_.emplace(std::move(guard).value());
    if (options_.guard_link) options_.guard_link->attach(&*orphan_guard_);
  } else {
    log::warn("{}: a worker's own children would outlive a launcher killed by SIGKILL",
              guard.status().message());
  }
  if (Status spawned = spawn_all(workers); !spawned.is_ok()) {
    for (Worker& worker : workers_) (void)worker.process.signal_group(SIGKILL);
    workers_.clear();  // ~Subprocess reaps
    if (options_.guard_link) options_.guard_link->attach(nullptr);
    return spawned;
  }
  while (!all_reaped()) {
    poll_once(next_wake());
    handle_signals();
    stop_if_terminal_broken();
    reap_exited(hooks);
    reap_orphans();
    if (!kill_deadline_) poll_remote(hooks);
    enforce_grace();
  }
  // Grandchildren left in a worker's group would outlive the run, and hold its output open.
  for (Worker& worker : workers_) (void)worker.process.signal_group(SIGKILL);
  if (options_.guard_link) options_.guard_link->attach(nullptr);
  if (orphan_guard_) orphan_guard_->dismiss();
  const Clock::time_point drain_until = Clock::now() + kOutputDrain;
  while ((any_output_open() || has_children()) && Clock::now() < drain_until) {
    poll_once(std::min(drain_until, Clock::now() + std::chrono::milliseconds(10)));
    (void)signals_.drain();  // the run is over; a late signal only needs to stop waking the poll
    reap_orphans();
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  for (size_t slot = 0; slot < workers_.size(); ++slot) {
    relay_.finish(slot, Stream::kStdout);
    relay_.finish(slot, Stream::kStderr);
    result_.exits.push_back(*workers_[slot].process.exit_status());
    result_.pids.push_back(workers_[slot].process.pid());
    workers_[slot].seen.rank = workers_[slot].rank;
    workers_[slot].seen.exit = workers_[slot].process.exit_status();
    result_.processes.push_back(workers_[slot].seen);
  }
  for (const std::string& loss : relay_.log_losses()) log::warn("{}", loss);
  return std::move(result_);
}

Status Supervisor::spawn_all(const std::vector<WorkerSpec>& specs) {
  for (const WorkerSpec& spec : specs) {
    // Ctrl-C while many workers start (-n 100000 took minutes): start no more; those started are
    // stopped as in any stop.
    handle_signals();
    if (result_.stop_signal) break;
    ASSIGN_OR_RETURN(Subprocess process, Subprocess::spawn({spec.argv, spec.env, true}));
    log::debug("rank {}: pid {}", spec.rank, process.pid());
    if (orphan_guard_) orphan_guard_->watch(process.pid());
    workers_.push_back(Worker{spec.rank, std::move(process), spec.error_file, RankProcess{}});
  }
  return Status::ok();
}

// Sleeps until output, a signal (SIGCHLD included) or `wake_at`, and relays what output came.
void Supervisor::poll_once(Clock::time_point wake_at) {
  std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
  std::vector<std::pair<size_t, Stream>> owners{{0, Stream::kStdout}};
  for (size_t slot = 0; slot < workers_.size(); ++slot) {
    const Subprocess& p = workers_[slot].process;
    if (p.stdout_fd() >= 0) {
      fds.push_back({p.stdout_fd(), POLLIN, 0});
      owners.emplace_back(slot, Stream::kStdout);
    }
    if (p.stderr_fd() >= 0) {
      fds.push_back({p.stderr_fd(), POLLIN, 0});
      owners.emplace_back(slot, Stream::kStderr);
    }
  }
  const bool readable = ::poll(fds.data(), fds.size(), poll_timeout_ms(wake_at)) > 0;
  for (size_t i = 1; readable && i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    auto [slot, stream] = owners[i];
    Subprocess& p = workers_[slot].process;
    if (!relay_.pump(slot, stream, fds[i].fd)) {
      stream == Stream::kStdout ? p.close_stdout() : p.close_stderr();
    }
  }
  relay_.show_quiet_pieces(Clock::now());  // a prompt the worker now waits behind
}

void Supervisor::handle_signals() {
  for (int signal : signals_.drain()) {
    if (is_passed_on(signal)) {
      log::info("received {}: passing it to the workers", signal_name(signal));
      for (Worker& worker : workers_) {
        if (!worker.process.reaped()) (void)worker.process.signal_group(signal);
      }
      continue;
    }
    if (!is_stop_signal(signal)) continue;  // SIGCHLD: a wake-up
    if (!kill_deadline_) {
      log::warn("received {}: forwarding it to the workers (SIGKILL after {})",
                signal_name(signal), format_duration(options_.grace));
      result_.stop_signal = signal;
      begin_stop(signal);
    } else if (!killed_ && result_.stop_signal) {
      // A second Ctrl-C: the user does not want to wait for the grace period.
      log::warn("received {} again: killing the workers now", signal_name(signal));
      kill_deadline_ = Clock::now();
    }
  }
}

void Supervisor::stop_if_terminal_broken() {
  if (kill_deadline_ || !relay_.terminal_broken()) return;
  // SIGTERM, not SIGPIPE, goes to the workers: Python ignores SIGPIPE.
  if (relay_.terminal_error() == EPIPE) {
    log::warn(
        "stdout was closed (the reader of the pipe exited): stopping the workers as SIGPIPE "
        "would (SIGKILL after {})",
        format_duration(options_.grace));
    result_.stop_signal = SIGPIPE;
  } else {
    // The workers' results would be lost: a failure of the run, as a program that cannot
    // write its output fails.
    log::error("writing stdout failed: {}: stopping the workers (SIGKILL after {})",
               std::strerror(relay_.terminal_error()), format_duration(options_.grace));
    result_.stdout_error = relay_.terminal_error();
  }
  begin_stop(SIGTERM);
}

void Supervisor::reap_exited(const SupervisorHooks& hooks) {
  for (size_t slot = 0; slot < workers_.size(); ++slot) {
    Subprocess& p = workers_[slot].process;
    if (p.reaped()) continue;
    std::optional<ExitStatus> status = p.try_reap();
    if (!status) continue;
    // Its last writes are in the pipes: read them before judging, so the tail is complete.
    drain_output(slot, 1 << 20);
    log::debug("rank {} (pid {}) ended with {}", workers_[slot].rank, p.pid(),
               describe_exit(*status));
    if (!kill_deadline_) workers_[slot].seen.ended_before_stop = true;
    if (status->success() || kill_deadline_) continue;  // stopped by us: a consequence, not a cause
    observe_workers();
    RankFailure local = failure_of(slot, *status);
    result_.root_cause = hooks.publish_failure ? hooks.publish_failure(local) : local;
    result_.root_cause_remote = result_.root_cause->node_rank != options_.node_rank;
    begin_stop(SIGTERM);
  }
}

void Supervisor::poll_remote(const SupervisorHooks& hooks) {
  if (Clock::now() < next_remote_poll_) return;
  // Advanced even without a remote hook: next_wake() sleeps until it, and a deadline left in
  // the past would turn the supervisor's poll into a busy loop that starves the workers.
  next_remote_poll_ = Clock::now() + options_.remote_poll_interval;
  if (!hooks.poll_remote_failure) return;
  if (std::optional<RankFailure> remote = hooks.poll_remote_failure()) {
    observe_workers();
    result_.root_cause = std::move(remote);
    result_.root_cause_remote = true;
    begin_stop(SIGTERM);
  }
}

void Supervisor::begin_stop(int signal) {
  kill_deadline_ = Clock::now() + options_.grace;
  for (Worker& worker : workers_) {
    if (worker.process.reaped()) continue;
    if (Status sent = worker.process.signal_group(signal); !sent.is_ok()) log::warn("{}", sent.message());
    // A stopped worker would hold the signal pending until SIGKILL ends the grace; continued,
    // it takes it now, dumps what it holds and ships its trace (as a shell's `kill` does for a
    // stopped job). A tracer's stop ('t') is the tracer's to end.
    if (worker.seen.at_failure.state == 'T') {
      worker.seen.resumed_ns = monotonic_ns();
      (void)worker.process.signal_group(SIGCONT);
    }
  }
}

void Supervisor::observe_workers() {
  for (Worker& worker : workers_) {
    if (worker.process.reaped()) continue;
    worker.seen.at_failure = snapshot_process(worker.process.pid());
  }
}

void Supervisor::enforce_grace() {
  if (!kill_deadline_ || killed_ || Clock::now() < *kill_deadline_) return;
  killed_ = true;
  for (Worker& worker : workers_) {
    if (worker.process.reaped()) continue;
    log::warn("rank {} (pid {}) has not stopped: sending SIGKILL", worker.rank,
              worker.process.pid());
    (void)worker.process.signal_group(SIGKILL);
  }
}

void Supervisor::drain_output(size_t slot, int max_reads) {
  Subprocess& p = workers_[slot].process;
  if (p.stdout_fd() >= 0 && !relay_.pump(slot, Stream::kStdout, p.stdout_fd(), max_reads)) {
    p.close_stdout();
  }
  if (p.stderr_fd() >= 0 && !relay_.pump(slot, Stream::kStderr, p.stderr_fd(), max_reads)) {
    p.close_stderr();
  }
}

void Supervisor::reap_orphans() {
  while (true) {
    // Peek first: a worker's status belongs to its Subprocess, not to this loop.
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
    auto worker = std::find_if(workers_.begin(), workers_.end(), [&](const Worker& w) {
      return w.process.pid() == info.si_pid;
    });
    if (worker != workers_.end()) return;  // reap_exited takes it on the next round
    ::waitpid(info.si_pid, nullptr, WNOHANG);
  }
}

bool Supervisor::has_children() const {
  siginfo_t info{};
  // Any child at all, running or not (WNOWAIT leaves it be); ECHILD when none is left.
  return ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0;
}

bool Supervisor::all_reaped() const {
  return std::all_of(workers_.begin(), workers_.end(),
                     [](const Worker& w) { return w.process.reaped(); });
}

bool Supervisor::any_output_open() const {
  return std::any_of(workers_.begin(), workers_.end(), [](const Worker& w) {
    return w.process.stdout_fd() >= 0 || w.process.stderr_fd() >= 0;
  });
}

Supervisor::Clock::time_point Supervisor::next_wake() const {
  Clock::time_point wake = Clock::now() + kIdleWake;
  if (kill_deadline_ && !killed_) wake = std::min(wake, *kill_deadline_);
  return std::min(wake, next_remote_poll_);
}

RankFailure Supervisor::failure_of(size_t slot, const ExitStatus& status) {
  const std::deque<std::string>& tail = relay_.stderr_tail(slot);
  RankFailure failure;
  failure.rank = workers_[slot].rank;
  failure.node_rank = options_.node_rank;
  failure.host = options_.host;
  failure.pid = workers_[slot].process.pid();
  failure.status = status;
  failure.elapsed = std::chrono::duration_cast<Nanoseconds>(Clock::now() - started_);
  failure.stderr_tail.assign(tail.begin(), tail.end());
  if (!workers_[slot].error_file.empty()) {
    failure.error_report = read_error_file(workers_[slot].error_file);
  }
  return failure;
}

}  // namespace partrain::launch
