// The launcher's signals as readable events: SIGINT, SIGTERM, SIGHUP, SIGCHLD (and SIGPIPE, so a
// closed terminal pipe is an error code, not death) are blocked and read from a signalfd in the
// supervisor's poll loop. Threads a library started before the channel opened (OpenBLAS starts
// its pool when it loads) do not block them, and the kernel hands a process's signal to any
// thread that does not: a handler there passes it on to the main thread, so SIGTERM can no longer
// kill the launcher outright, leaving no summary. Signals the launcher was started with ignored
// (nohup, a background job's SIGINT) stay ignored. No global: the channel is owned by one launch.
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
  static constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
  SignalChannel(UniqueFd fd, sigset_t previous) : fd_(std::move(fd)), previous_(previous) {}
  UniqueFd fd_;
  sigset_t previous_;
  // The actions kForwarded had before, for those the channel replaced.
  std::array<std::optional<struct sigaction>, std::size(kForwarded)> previous_actions_;
};

// 130 for SIGINT, 143 for SIGTERM: what a launcher stopped by `signal` exits with.
inline int exit_code_for_signal(int signal) { return 128 + signal; }

}  // namespace partrain::launch
