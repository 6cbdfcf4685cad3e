#include "runner/launch/signal_channel.h"

#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace partrain::launch {
namespace {

// Runs in a thread that does not block the signal (the main thread does): re-sends it to the
// main thread, whose thread id is the process id, where it waits for the signalfd.
extern "C" void pass_to_main_thread(int signal) {
  const int saved_errno = errno;
  ::syscall(SYS_tgkill, ::getpid(), ::getpid(), signal);
  errno = saved_errno;
}

}  // namespace

StatusOr<SignalChannel> SignalChannel::open() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kLauncherSignals) sigaddset(&set, sig);
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
  SignalChannel channel(UniqueFd(fd), previous);
  for (size_t i = 0; i < std::size(kForwarded); ++i) {
    struct sigaction current{};
    ::sigaction(kForwarded[i], nullptr, &current);
    if (current.sa_handler == SIG_IGN) continue;  // nohup's SIGHUP, a background job's SIGINT
    struct sigaction forward{};
    forward.sa_handler = pass_to_main_thread;
    forward.sa_flags = SA_RESTART;
    sigemptyset(&forward.sa_mask);
    if (::sigaction(kForwarded[i], &forward, nullptr) == 0) channel.previous_actions_[i] = current;
  }
  return channel;
}

SignalChannel::~SignalChannel() {
  if (!fd_.valid()) return;  // moved from
  for (size_t i = 0; i < std::size(kForwarded); ++i) {
    if (previous_actions_[i]) ::sigaction(kForwarded[i], &*previous_actions_[i], nullptr);
  }
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
