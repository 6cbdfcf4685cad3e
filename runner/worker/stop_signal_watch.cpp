#include "runner/worker/stop_signal_watch.h"

#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <utility>

namespace partrain::runner {
namespace {

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

// Ends the process by `signal` itself, with its default action, from this thread.
[[noreturn]] void die_by(int signal) {
  ::signal(signal, SIG_DFL);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, signal);
  ::pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
  ::raise(signal);
  std::_Exit(128 + signal);  // the signal was ignored by someone else's disposition
}

}  // namespace

std::unique_ptr<StopSignalWatch> StopSignalWatch::start(BeforeExit before_exit) {
  const sigset_t set = stop_signals();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return std::unique_ptr<StopSignalWatch>(new StopSignalWatch(std::move(before_exit)));
}

StopSignalWatch::StopSignalWatch(BeforeExit before_exit)
    : before_exit_(std::move(before_exit)), thread_([this] { run(); }) {}

StopSignalWatch::~StopSignalWatch() {
  stop_ = true;
  thread_.join();
  const sigset_t set = stop_signals();
  ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

void StopSignalWatch::run() {
  const sigset_t set = stop_signals();
  // A short wait so the destructor's stop is seen promptly; signals are never lost meanwhile,
  // they stay pending.
  const timespec wait{0, 100'000'000};
  while (!stop_) {
    siginfo_t info{};
    const int signal = ::sigtimedwait(&set, &info, &wait);
    if (signal <= 0) continue;  // EAGAIN (timeout) or EINTR
    if (before_exit_) before_exit_(signal);
    die_by(signal);
  }
}

}  // namespace partrain::runner
