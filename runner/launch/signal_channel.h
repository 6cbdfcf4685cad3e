// The launcher's signals as readable events: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2,
// SIGCHLD (and SIGPIPE, so a closed terminal pipe is an error code, not death) are blocked and read
// from a signalfd in the supervisor's poll loop. Threads a library started before the channel
// opened (OpenBLAS's pool did, when it was linked) do not block them, and the kernel hands a
// process's signal to any thread that does not: a handler there passes it on to the main thread, so
// SIGTERM can no longer kill the launcher outright, leaving no summary. Signals the launcher was
// started with ignored (nohup, a background job's SIGINT) stay ignored. No global: the channel is
// owned by one launch.
#pragma once

#include <signal.h>

#include <array>
#include <iterator>
#include <optional>
#include <vector>

#include "core/status.h"
#include "core/subprocess.h"

namespace partrain::launch {

class SignalChannel {
 public:
  // Blocks the signals in the calling thread, which must be the main thread; threads started
  // afterwards (the rendezvous store's) inherit the mask, so create this before any of them.
  // Children get the defaults back.
  static StatusOr<SignalChannel> open();

  SignalChannel(SignalChannel&&) noexcept = default;
  SignalChannel& operator=(SignalChannel&&) noexcept = delete;
  // Restores the previous mask and handlers after discarding what is pending.
  ~SignalChannel();

  int fd() const { return fd_.get(); }
  // The signals that arrived since the last call, without blocking.
  std::vector<int> drain();

 private:
  static constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD};
  SignalChannel(UniqueFd fd, sigset_t previous) : fd_(std::move(fd)), previous_(previous) {}
  UniqueFd fd_;
  sigset_t previous_;
  // The actions kForwarded had before, for those the channel replaced.
  std::array<std::optional<struct sigaction>, std::size(kForwarded)> previous_actions_;
};

// Every signal the launcher reads from its signalfd, blocked in each of its threads (SIGPIPE too,
// so a closed terminal pipe is an error code, not death).
inline constexpr int kLauncherSignals[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT,
                                           SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE};

// Signals that stop the run: forwarded to the workers, which get SIGKILL after the grace period,
// and the launcher exits 128 + the signal (torchrun's SIGINT, SIGTERM, SIGHUP and SIGQUIT).
inline bool is_stop_signal(int signal) {
  return signal == SIGINT || signal == SIGTERM || signal == SIGHUP || signal == SIGQUIT;
}

// Signals passed on to the workers, the run going on: a job's own, such as Slurm's `--signal
// USR1@120` asking the program to checkpoint before its time limit (whatever the workers make of
// it; their default is to end, as it would be with srun starting them).
inline bool is_passed_on(int signal) { return signal == SIGUSR1 || signal == SIGUSR2; }

// 130 for SIGINT, 143 for SIGTERM: what a launcher stopped by `signal` exits with.
inline int exit_code_for_signal(int signal) { return 128 + signal; }

}  // namespace partrain::launch
