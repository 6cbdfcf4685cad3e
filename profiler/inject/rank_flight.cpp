#include "profiler/inject/rank_flight.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <thread>

#include "core/env.h"
#include "core/fd_above_stdio.h"
#include "core/log.h"
#include "core/subprocess.h"
#include "core/thread_start.h"
#include "profiler/host_refusal.h"

namespace partrain::profiler::inject {
namespace {

// SIGABRT ends the process whatever its handler does (abort() raises it again with the default
// action when the handler returns): the rank's dump and its unshipped events go before it, the
// handler waiting a bounded time for them. A terminate() in a library's thread (gloo's enforce,
// PyTorch's NCCL watchdog) aborts a rank that way.
constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGABRT};

size_t signal_index(int signal) { return signal == SIGTERM ? 0 : signal == SIGINT ? 1 : 2; }

bool is_fatal(int signal) { return signal == SIGABRT; }

// How long a fatal signal's handler waits for the dump and the flush: the relay's flush waits up
// to 2 s for the collector, and a relay that cannot finish (its thread the aborting one, a lock
// the aborting thread holds) must not keep the rank from dying.
constexpr int kFatalWaitMs = 3000;

// What the signal handler reaches. A handler can only reach static storage, so this is the one
// static of the file: made once per process and never freed (a late signal may still use it).
struct SignalRelay {
  std::atomic<RankFlight*> flight{nullptr};
  pid_t pid = 0;  // the process that took the signals: a fork()ed child passes them straight on
  // The handler writes the signal's siginfo here, as it came: the disposition found before ours
  // gets it with its sender (si_pid, a sigqueue value) once the work is done.
  int request_read = -1, request_write = -1;
  std::atomic<bool> relaying{true};           // false once the relay's thread has stopped
  // Set by the relay's thread before it sends the signal again, its work done: the handler then
  // hands that one on instead of relaying it.
  std::atomic<bool> passing[std::size(kStopSignals)] = {};
  // Fatal signals the relay's thread has dumped and flushed for; the handler waits for it to
  // move, then hands the signal on itself (nothing is sent again).
  std::atomic<uint64_t> fatal_done{0};
  // Signals the handler gave the relay's thread, and those it has handled (dumped for, and sent
  // again or handed on): settle_stop_signals waits for the second to catch up.
  std::atomic<uint64_t> relayed_count{0};
  std::atomic<uint64_t> settled_count{0};
  struct sigaction previous[std::size(kStopSignals)] = {};
};
std::atomic<SignalRelay*> g_relay{nullptr};

// The signal, handed to the disposition found before ours. Async-signal-safe.
void pass_on(const SignalRelay& relay, int signal, siginfo_t* info, void* context) {
  const struct sigaction& previous = relay.previous[signal_index(signal)];
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

// Async-signal-safe: atomics, getpid and one write. The handler never waits for the work: the
// thread it interrupted may hold a lock the work needs (the flight recorder's, malloc's,
// stdio's), and a handler that waited on it would leave the rank stopping without its dump,
// however long it waited.
void on_signal(int signal, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  SignalRelay* relay = g_relay.load();
  if (relay == nullptr) return;
  bool relayed = false;
  const uint64_t done_before = relay->fatal_done.load();
  // A rank that has recorded no operation has no flight to dump: a stop signal that is not fatal
  // takes effect at once, as without partrain. Relayed, it reached the program late, and a shell
  // whose last command it execs (bash 5.1 on: `bash -c '...; sleep 30'`) went on to exec with
  // the signal still in the relay's hands, lost: the rank ran out its command after a SIGTERM.
  const RankFlight* flight = relay->flight.load();
  const bool nothing_to_dump = !is_fatal(signal) && flight != nullptr && !flight->has_operations();
  // A resend that finds the flight swapped for an empty one is passed on here: its mark goes.
  if (nothing_to_dump) relay->passing[signal_index(signal)].store(false);
  if (!nothing_to_dump && ::getpid() == relay->pid && relay->relaying.load() &&
      !relay->passing[signal_index(signal)].exchange(false)) {
    siginfo_t request{};
    if (info != nullptr) request = *info;
    request.si_signo = signal;
    relay->relayed_count.fetch_add(1);
    relayed = ::write(relay->request_write, &request, sizeof request) == sizeof request;
    if (!relayed) relay->settled_count.fetch_add(1);
  }
  if (relayed && is_fatal(signal)) {
    // The process ends when this returns: wait, boundedly, for the dump and the flush.
    const struct timespec millisecond = {0, 1'000'000};
    for (int waited = 0; waited < kFatalWaitMs && relay->fatal_done.load() == done_before;
         ++waited) {
      ::nanosleep(&millisecond, nullptr);
    }
    relayed = false;
  }
  if (!relayed) pass_on(*relay, signal, info, context);
  errno = saved_errno;
}

// The signal again, as it came, now that the work is done: to this process (any thread that does
// not block it), whose handler passes it on. Sending a signal with its original siginfo is
// allowed to oneself only, which this is.
void send_again(SignalRelay& relay, siginfo_t info) {
  const int signal = info.si_signo;
  relay.passing[signal_index(signal)].store(true);
  if (::syscall(SYS_rt_sigqueueinfo, relay.pid, signal, &info) != 0)
    (void)::kill(relay.pid, signal);
}

void relay_signals(SignalRelay* relay) {
  while (true) {
    siginfo_t request{};
    const ssize_t n = ::read(relay->request_read, &request, sizeof request);
    if (n < 0 && errno == EINTR) continue;
    if (n != sizeof request) {
      relay->relaying.store(false);  // the handler passes the signals on itself from here
      return;
    }
    RankFlight* flight = relay->flight.load();
    if (is_fatal(request.si_signo)) {
      if (flight != nullptr) (void)flight->on_stop_signal(request.si_signo);
      relay->fatal_done.fetch_add(1);
    } else if (flight == nullptr || flight->on_stop_signal(request.si_signo)) {
      send_again(*relay, request);
    }
    relay->settled_count.fetch_add(1);
  }
}

StatusOr<SignalRelay*> make_relay() {
  int request[2];
  if (::pipe2(request, O_CLOEXEC) != 0) {
    return unavailable("no pipe for the stop signals ({})", std::strerror(errno));
  }
  request[0] = fd_above_stdio(request[0]);  // never the program's closed stdin or stdout
  request[1] = fd_above_stdio(request[1]);
  if (request[0] < 0 || request[1] < 0) {
    const int error = errno;
    for (int fd : request) {
      if (fd >= 0) ::close(fd);
    }
    return unavailable("no descriptor above stdio for the stop signals' pipe ({})",
                       std::strerror(error));
  }
  // The handler's write never blocks: with the pipe full (signals faster than the dumps), the
  // signal is passed on at once.
  (void)::fcntl(request[1], F_SETFL, O_NONBLOCK);
  auto* relay = new SignalRelay();
  relay->pid = ::getpid();
  relay->request_read = request[0];
  relay->request_write = request[1];
  // Started with the stop signals blocked, which it inherits: the signals it sends again go to
  // the program's threads, and none is relayed to itself.
  sigset_t stop;
  sigset_t before;
  sigemptyset(&stop);
  for (int signal : kStopSignals) sigaddset(&stop, signal);
  ::pthread_sigmask(SIG_BLOCK, &stop, &before);
  std::thread relay_thread;
  const Status started = start_thread(relay_thread, [relay] { relay_signals(relay); });
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (!started.is_ok()) {
    ::close(request[0]);
    ::close(request[1]);
    delete relay;
    return started;
  }
  relay_thread.detach();
  return relay;
}

}  // namespace

Status take_stop_signals(RankFlight& flight) {
  if (SignalRelay* relay = g_relay.load()) {
    relay->flight.store(&flight);
    return Status::ok();
  }
  ASSIGN_OR_RETURN(SignalRelay * relay, make_relay());
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
  return Status::ok();
}

bool retake_stop_signal(int signal) {
  if (std::find(std::begin(kStopSignals), std::end(kStopSignals), signal) ==
      std::end(kStopSignals)) {
    return false;
  }
  SignalRelay* relay = g_relay.load();
  if (relay == nullptr || relay->pid != ::getpid()) return false;
  struct sigaction current = {};
  if (::sigaction(signal, nullptr, &current) != 0) return false;
  if ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == on_signal) return true;
  if ((current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_IGN) return false;
  // The handler reads `previous` only while ours is installed, which it is not: no signal of
  // this number reaches it before the sigaction below.
  relay->previous[signal_index(signal)] = current;
  struct sigaction action = {};
  action.sa_sigaction = on_signal;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  return ::sigaction(signal, &action, nullptr) == 0;
}

void settle_stop_signals(std::chrono::milliseconds limit) {
  SignalRelay* relay = g_relay.load();
  if (relay == nullptr || relay->pid != ::getpid()) return;
  const struct timespec millisecond = {0, 1'000'000};
  for (int64_t waited = 0; waited < limit.count() && relay->relaying.load() &&
                           relay->settled_count.load() < relay->relayed_count.load();
       ++waited) {
    ::nanosleep(&millisecond, nullptr);
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
  if (dir) {
    if (Status taken = take_stop_signals(*flight); !taken.is_ok()) {
      report_host_refusal(tracer, "stop_signal_dump_unavailable", taken,
                          "a SIGTERM, SIGINT or SIGABRT does not dump the flight recorder");
    }
  }
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
        options.print_collective_error = false;  // the rank's traceback says it (above)
        return options;
      }()) {}

void RankFlight::watch(Nanoseconds timeout) {
  WatchdogOptions options;
  options.timeout = timeout;
  try {
    watchdog_ = std::make_unique<CollectiveWatchdog>(recorder_, options,
                                                     [this](const WatchdogTimeout& t) { fire(t); });
  } catch (const std::system_error& e) {
    report_host_refusal(tracer_, "collective_watchdog_unavailable",
                        unavailable("the host refused a new thread ({})", e.what()),
                        "no collective watchdog: a hung collective is neither diagnosed nor ended");
  }
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

bool RankFlight::on_stop_signal(int signal) {
  std::lock_guard lock(mutex_);
  // The watchdog's thread is ending the process with 124, its dump shipped and the tracing
  // ending: the signal would cut that short.
  if (fired_) return false;
  if (closed_) return true;
  const bool ended = program_ended_.load(std::memory_order_relaxed);
  (void)dumper_.dump(
      DumpTrigger::kSignal,
      "stopped by " + signal_name(signal) + (ended ? " after the program ended" : ""), ended);
  // Another rank failed: the trace must show how far this one got.
  (void)tracer_.flush(std::chrono::seconds(2));
  return true;
}

void RankFlight::on_collective_failed(const CollectiveEvent& event) {
  std::lock_guard lock(mutex_);
  if (fired_ || closed_) return;
  (void)dumper_.dump(DumpTrigger::kCollectiveError, describe_flight_op(event) + " failed");
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

// For share/python/sitecustomize.py (ctypes): after it gives CPython its SIGINT handler back.
extern "C" __attribute__((visibility("default"))) int partrain_retake_stop_signal(int signal) {
  return partrain::profiler::inject::retake_stop_signal(signal) ? 1 : 0;
}
