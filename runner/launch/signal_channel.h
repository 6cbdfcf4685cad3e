// The launcher's signals as readable events: SIGINT, SIGTERM, SIGHUP, SIGCHLD (and SIGPIPE, so a
// closed terminal pipe is an error code, not death) are blocked and read from a signalfd in the
// supervisor's poll loop. No handler, no global: the channel is owned by one launch.
#pragma once

#include <signal.h>

#include <vector>

#include "core/status.h"
#include "core/subprocess.h"

namespace partrain::launch {

class SignalChannel {
 public:
  // Blocks the signals in the calling thread; threads started afterwards (the rendezvous store's)
  // inherit the mask, so create this before any of them. Children get the defaults back.
  static StatusOr<SignalChannel> open();

  SignalChannel(SignalChannel&&) noexcept = default;
  SignalChannel& operator=(SignalChannel&&) noexcept = delete;
  // Restores the previous mask after discarding what is pending.
  ~SignalChannel();

  int fd() const { return fd_.get(); }
  // The signals that arrived since the last call, without blocking.
  std::vector<int> drain();

 private:
  SignalChannel(UniqueFd fd, sigset_t previous) : fd_(std::move(fd)), previous_(previous) {}
  UniqueFd fd_;
  sigset_t previous_;
};

// 130 for SIGINT, 143 for SIGTERM: what a launcher stopped by `signal` exits with.
inline int exit_code_for_signal(int signal) { return 128 + signal; }

}  // namespace partrain::launch
