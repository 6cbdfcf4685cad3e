#include "profiler/flight/collective_watchdog.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "core/clock.h"
#include "core/env.h"
#include "profiler/p2p_seq.h"
#include "profiler/trace_reader/communicator_name.h"

namespace partrain::profiler {
namespace {

Nanoseconds choose_poll_interval(const WatchdogOptions& options) {
  if (options.poll_interval.count() > 0) return options.poll_interval;
  // A tenth of the timeout fires at most 10% late; the bounds keep a tiny timeout from spinning
  // and the default 300 s from answering only every 30 s.
  return std::clamp<Nanoseconds>(options.timeout / 10, std::chrono::milliseconds(10),
                                 std::chrono::seconds(1));
}

}  // namespace

StatusOr<std::optional<Nanoseconds>> collective_timeout_from_env() {
  std::optional<std::string> text = env::get(kCollectiveTimeoutEnv);
  if (!text || text->empty()) return std::optional<Nanoseconds>();
  auto timeout = parse_duration(*text);
  if (!timeout.is_ok()) return timeout.status().with_context(kCollectiveTimeoutEnv);
  if (timeout->count() <= 0) {
    return invalid_argument("{}={}: the collective timeout must be positive", kCollectiveTimeoutEnv,
                            *text);
  }
  return std::optional<Nanoseconds>(*timeout);
}

std::string describe_flight_op(const CollectiveEvent& e) {
  // `peer` is a send/recv's peer, else a broadcast's or reduce's root.
  return e.peer >= 0
             ? fmt::format("{} (comm {}, {} {}, seq {})", e.op, communicator_name(e.comm_id),
                           is_p2p(e.op) ? "peer" : "root", e.peer, e.seq)
             : fmt::format("{} (comm {}, seq {})", e.op, communicator_name(e.comm_id), e.seq);
}

std::string describe_watchdog_timeout(const WatchdogTimeout& timeout) {
  return fmt::format("{} not completed after {} (--collective-timeout {})",
                     describe_flight_op(timeout.event), format_duration(timeout.waited),
                     format_duration(timeout.timeout));
}

CollectiveWatchdog::CollectiveWatchdog(const FlightRecorder& recorder, WatchdogOptions options,
                                       OnTimeout on_timeout)
    : recorder_(recorder),
      timeout_(options.timeout),
      poll_interval_(choose_poll_interval(options)),
      on_timeout_(std::move(on_timeout)),
      thread_([this] { run(); }) {}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

void CollectiveWatchdog::run() {
  std::unique_lock lock(mutex_);
  while (!stop_cv_.wait_for(lock, poll_interval_, [&] { return stop_; })) {
    std::optional<FlightRecorder::Unfinished> oldest = recorder_.oldest_unfinished();
    if (!oldest) continue;
    const Nanoseconds waited(monotonic_ns() - oldest->timed_from_ns);
    if (waited <= timeout_) continue;
    lock.unlock();  // the callback may take long (a dump) or never return (the rank ends)
    if (on_timeout_) on_timeout_(WatchdogTimeout{std::move(oldest->event), waited, timeout_});
    return;  // fired once: what follows is the caller's
  }
}

}  // namespace partrain::profiler
