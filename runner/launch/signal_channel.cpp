#include "runner/launch/signal_channel.h"

#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>

namespace partrain::launch {

StatusOr<SignalChannel> SignalChannel::open() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) sigaddset(&set, sig);
  sigset_t previous;
  if (int rc = pthread_sigmask(SIG_BLOCK, &set, &previous); rc != 0) {
    return failed("cannot block signals: {}", strerror(rc));
  }
  int fd = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) {
    int error = errno;
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    return failed("cannot create a signalfd: {}", strerror(error));
  }
  return SignalChannel(UniqueFd(fd), previous);
}

SignalChannel::~SignalChannel() {
  if (!fd_.valid()) return;  // moved from
  (void)drain();
  pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

std::vector<int> SignalChannel::drain() {
  std::vector<int> signals;
  signalfd_siginfo info;
  while (::read(fd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    signals.push_back(static_cast<int>(info.ssi_signo));
  }
  return signals;
}

}  // namespace partrain::launch
