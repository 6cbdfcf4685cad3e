// Kills the workers' process groups when the launcher dies without ending the run (SIGKILL, the
// OOM killer). Each worker dies with the launcher (PR_SET_PDEATHSIG), but its own children (a
// DataLoader's workers, a background job) would run on under init. A helper process forked at
// the start holds the read end of a pipe to which the launcher writes each worker's group, and
// each rank process the trace's collector heard from (torchrun starts its workers in sessions of
// their own, out of the command's group); end of file without the launcher's "done" sends them
// SIGTERM, then SIGKILL.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "core/status.h"
#include "core/subprocess.h"

namespace partrain::launch {

class OrphanGuard {
 public:
  // Forks the helper. Its only descriptor is the pipe's read end; SIGINT, SIGTERM and SIGHUP do
  // not stop it (the terminal's ^C reaches the launcher's group), end of file does.
  static StatusOr<OrphanGuard> start();

  OrphanGuard(OrphanGuard&& other) noexcept;
  OrphanGuard& operator=(OrphanGuard&&) = delete;
  OrphanGuard(const OrphanGuard&) = delete;
  OrphanGuard& operator=(const OrphanGuard&) = delete;
  ~OrphanGuard() { dismiss(); }

  // A worker's process group (its pid), to kill should the launcher die.
  void watch(pid_t group);
  // A process of the run that may have left the launcher's groups (a rank that said hello to the
  // collector, wherever it was started): it, and the group it leads if it leads one, are killed
  // should the launcher die, unless its pid has gone to another process by then (the process's
  // start time is kept with it). Thread-safe, as watch() and dismiss() are.
  void watch_process(pid_t pid);
  // The run ended and the launcher killed the groups itself: the helper exits, killing nothing,
  // and is reaped. Idempotent.
  void dismiss();
  pid_t pid() const { return pid_; }

  // How long the groups have between SIGTERM and SIGKILL.
  static constexpr int kGraceMs = 2000;

 private:
  OrphanGuard(pid_t pid, UniqueFd write_end) : pid_(pid), write_end_(std::move(write_end)) {}
  void send(int32_t kind, pid_t pid, uint64_t start_ticks);
  pid_t pid_ = -1;
  std::unique_ptr<std::mutex> write_mutex_ = std::make_unique<std::mutex>();  // guards write_end_
  UniqueFd write_end_;
};

// Where the trace's collector, on its own thread, tells the launcher's guard of each rank process
// that said hello: the collector starts before the guard and may outlive it, so the launcher
// attaches the guard while it runs and detaches it before it goes.
class OrphanGuardLink {
 public:
  void attach(OrphanGuard* guard) {
    std::lock_guard lock(mutex_);
    guard_ = guard;
  }
  void watch_process(pid_t pid) {
    std::lock_guard lock(mutex_);
    if (guard_ != nullptr) guard_->watch_process(pid);
  }

 private:
  std::mutex mutex_;
  OrphanGuard* guard_ = nullptr;
};

// When the process started, in clock ticks since boot (/proc/<pid>/stat's starttime): a pid and
// its start time name one process, where a pid alone may be reused. nullopt when it is gone.
// Async-signal-safe (no allocation): the guard calls it after fork.
std::optional<uint64_t> process_start_ticks(pid_t pid);

}  // namespace partrain::launch
