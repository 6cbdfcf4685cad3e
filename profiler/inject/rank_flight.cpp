#include "profiler/inject/rank_flight.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <thread>

#include "core/env.h"
#include "core/log.h"
#include "core/subprocess.h"

namespace partrain::profiler::inject {
namespace {

constexpr int kStopSignals[] = {SIGTERM, SIGINT};
// How long a stop signal waits for its dump and the tracer's flush before it takes effect.
constexpr int kStopWorkTimeoutMs = 5000;

// What the signal handler reaches. A handler can only reach static storage, so this is the one
// static of the file: made once per process and never freed (a late signal may still use it).
struct SignalRelay {
  std::atomic<RankFlight*> flight{nullptr};
  pid_t pid = 0;  // the process that took the signals: a fork()ed child passes them straight on
  int request_read = -1, request_write = -1;  // the handler writes the signal number here...
  int done_read = -1, done_write = -1;        // ...and waits here for the thread's work
  struct sigaction previous[std::size(kStopSignals)] = {};
};
std::atomic<SignalRelay*> g_relay{nullptr};

const struct sigaction& previous_action(const SignalRelay& relay, int signal) {
  return relay.previous[signal == SIGTERM ? 0 : 1];
}

// The signal, handed to the disposition found before ours. Async-signal-safe.
void pass_on(const SignalRelay& relay, int signal, siginfo_t* info, void* context) {
  const struct sigaction& previous = previous_action(relay, signal);
  if ((previous.sa_flags & SA_SIGINFO) != 0) {
    if (previous.sa_sigaction != nullptr) previous.sa_sigaction(signal, info, context);
    return;
  }
  if (previous.sa_handler == SIG_IGN) return;
  if (previous.sa_handler == SIG_DFL) {
    struct sigaction default_action = {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    ::sigaction(signal, &default_action, nullptr);
    // Blocked while this handler runs: delivered, with the default action, when it returns.
    ::raise(signal);
    return;
  }
  previous.sa_handler(signal);
}

// Async-signal-safe: an atomic load, getpid, write, poll and read.
void on_signal(int signal, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const SignalRelay* relay = g_relay.load();
  if (relay == nullptr) return;
  if (::getpid() == relay->pid) {
    const int32_t number = signal;
    if (::write(relay->request_write, &number, sizeof number) == sizeof number) {
      pollfd done{relay->done_read, POLLIN, 0};
      int ready = 0;
      while ((ready = ::poll(&done, 1, kStopWorkTimeoutMs)) < 0 && errno == EINTR) {
      }
      char byte = 0;
      if (ready > 0) (void)!::read(relay->done_read, &byte, 1);
    }
  }
  pass_on(*relay, signal, info, context);
  errno = saved_errno;
}

void relay_signals(SignalRelay* relay) {
  while (true) {
    int32_t signal = 0;
    const ssize_t n = ::read(relay->request_read, &signal, sizeof signal);
    if (n < 0 && errno == EINTR) continue;
    if (n != sizeof signal) return;
    if (RankFlight* flight = relay->flight.load()) flight->on_stop_signal(signal);
    const char one = 1;
    (void)!::write(relay->done_write, &one, 1);
  }
}

SignalRelay* make_relay() {
  int request[2];
  int done[2];
  if (::pipe2(request, O_CLOEXEC) != 0) return nullptr;
  if (::pipe2(done, O_CLOEXEC) != 0) {
    ::close(request[0]);
    ::close(request[1]);
    return nullptr;
  }
  auto* relay = new SignalRelay();
  relay->pid = ::getpid();
  relay->request_read = request[0];
  relay->request_write = request[1];
  relay->done_read = done[0];
  relay->done_write = done[1];
  // Started with the stop signals blocked, which it inherits: were the thread to take one, it
  // would wait for itself.
  sigset_t stop;
  sigset_t before;
  sigemptyset(&stop);
  for (int signal : kStopSignals) sigaddset(&stop, signal);
  ::pthread_sigmask(SIG_BLOCK, &stop, &before);
  std::thread(relay_signals, relay).detach();
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  return relay;
}

}  // namespace

void take_stop_signals(RankFlight& flight) {
  if (SignalRelay* relay = g_relay.load()) {
    relay->flight.store(&flight);
    return;
  }
  SignalRelay* relay = make_relay();
  if (relay == nullptr) {
    log::warn("no pipe for the stop signals: a SIGTERM will not dump the flight recorder");
    return;
  }
  relay->flight.store(&flight);
  size_t i = 0;
  for (int signal : kStopSignals) {
    ::sigaction(signal, nullptr, &relay->previous[i]);
    ++i;
  }
  g_relay.store(relay);
  i = 0;
  for (int signal : kStopSignals) {
    // A program that ignores the signal keeps ignoring it; one that handles it keeps its
    // handler, called after the dump.
    if (relay->previous[i++].sa_handler == SIG_IGN) continue;
    struct sigaction action = {};
    action.sa_sigaction = on_signal;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    ::sigaction(signal, &action, nullptr);
  }
}

RankFlight* RankFlight::start(FlightRecorder& recorder, RankTracer& tracer) {
  StatusOr<std::optional<Nanoseconds>> timeout = collective_timeout_from_env();
  if (!timeout.is_ok()) {
    log::warn("rank {}: {}: no collective watchdog", tracer.rank(), timeout.status().message());
  }
  std::optional<std::string> dir = env::get(kFlightDirEnv);
  if (dir && dir->empty()) dir.reset();
  const bool watching = timeout.is_ok() && timeout->has_value();
  if (!watching && !dir) return nullptr;
  auto* flight = new RankFlight(recorder, tracer, dir);
  if (dir) take_stop_signals(*flight);
  if (watching) flight->watch(**timeout);
  return flight;
}

RankFlight::RankFlight(FlightRecorder& recorder, RankTracer& tracer,
                       std::optional<std::string> dir)
    : recorder_(recorder), tracer_(tracer), dumper_(recorder, [&] {
        FlightDumperOptions options;
        options.rank = tracer.rank();
        if (dir) options.dir = *dir;
        options.tracer = &tracer;
        return options;
      }()) {}

void RankFlight::watch(Nanoseconds timeout) {
  WatchdogOptions options;
  options.timeout = timeout;
  watchdog_ = std::make_unique<CollectiveWatchdog>(
      recorder_, options, [this](const WatchdogTimeout& t) { fire(t); });
}

void RankFlight::close() {
  bool stop_watchdog = false;
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    stop_watchdog = !fired_;
  }
  if (stop_watchdog) watchdog_.reset();  // joins its thread, which finds closed_ if it fires
}

void RankFlight::on_stop_signal(int signal) {
  std::lock_guard lock(mutex_);
  if (closed_ || fired_) return;
  (void)dumper_.dump(DumpTrigger::kSignal, "stopped by " + signal_name(signal));
  // Another rank failed: the trace must show how far this one got.
  (void)tracer_.flush(std::chrono::seconds(2));
}

void RankFlight::fire(const WatchdogTimeout& timeout) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    fired_ = true;
    const std::string reason = describe_watchdog_timeout(timeout);
    log::error(
        "rank {}: collective watchdog: {}; dumping the flight recorder and exiting with 124",
        tracer_.rank(), reason);
    (void)dumper_.dump(DumpTrigger::kWatchdog, reason);
    (void)tracer_.flush(std::chrono::seconds(2));
  }
  // The program's thread is blocked in the backend's collective, which gloo cannot abort: the
  // rank ends from here, as PyTorch's watchdog ends a rank whose NCCL collective timed out.
  // _Exit ends the tracing first (exit_interpose.cpp), which closes this.
  std::_Exit(124);
}

}  // namespace partrain::profiler::inject
