// Kills the workers' process groups when the launcher dies without ending the run (SIGKILL, the
// OOM killer). Each worker dies with the launcher (PR_SET_PDEATHSIG), but its own children (a
// DataLoader's workers, a background job) would run on under init. A helper process forked at
// the start holds the read end of a pipe to which the launcher writes each worker's group; end of
// file without the launcher's "done" sends those groups SIGTERM, then SIGKILL.
#pragma once

#include <sys/types.h>

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
  // The run ended and the launcher killed the groups itself: the helper exits, killing nothing,
  // and is reaped. Idempotent.
  void dismiss();
  pid_t pid() const { return pid_; }

  // How long the groups have between SIGTERM and SIGKILL.
  static constexpr int kGraceMs = 2000;

 private:
  OrphanGuard(pid_t pid, UniqueFd write_end) : pid_(pid), write_end_(std::move(write_end)) {}
  pid_t pid_ = -1;
  UniqueFd write_end_;
};

}  // namespace partrain::launch
