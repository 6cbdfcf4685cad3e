// The collective watchdog (PyTorch's ProcessGroupNCCL watchdog, for any backend): a thread that
// polls a rank's flight recorder and reports, once, an operation left unfinished for longer than
// the timeout, counted from when it was enqueued (or, for an op recorded untimed, from when the
// program began to wait on it: FlightRecorder::Timing). What firing means (dump the recorder, end
// the rank with 124) is the caller's: a unit test passes a callback that only records.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/duration.h"
#include "core/status.h"
#include "profiler/collective_event.h"
#include "profiler/flight/flight_recorder.h"

namespace partrain::profiler {

// --collective-timeout as a launcher passes it to its ranks ("2s", "1500000000ns"): partrain's
// own workers and, through the injection library, a foreign job's ranks read it.
inline constexpr const char* kCollectiveTimeoutEnv = "PARTRAIN_COLLECTIVE_TIMEOUT";
// The timeout it gives, nullopt when unset or empty; kInvalidArgument when malformed or not
// positive.
StatusOr<std::optional<Nanoseconds>> collective_timeout_from_env();

struct WatchdogOptions {
  Nanoseconds timeout = std::chrono::seconds(300);
  // How often the recorder is looked at; zero: a tenth of the timeout, within [10 ms, 1 s].
  Nanoseconds poll_interval{0};
};

struct WatchdogTimeout {
  profiler::CollectiveEvent event;  // the oldest unfinished operation
  Nanoseconds waited{0};            // since it was enqueued (or its timing started)
  Nanoseconds timeout{0};
};

// An operation as a dump's reason names it: "all_reduce (comm world, seq 12)", a transfer's or a
// rooted op's with its "peer N".
std::string describe_flight_op(const CollectiveEvent& event);

// The reason a dump gives for it, one line: "all_reduce (comm world, seq 12) not completed after
// 2.1 s (--collective-timeout 2.0 s)".
std::string describe_watchdog_timeout(const WatchdogTimeout& timeout);

class CollectiveWatchdog {
 public:
  using OnTimeout = std::function<void(const WatchdogTimeout&)>;

  // Starts watching; `recorder` must outlive the watchdog. on_timeout runs on the watchdog's
  // thread, at most once, and may end the process.
  CollectiveWatchdog(const FlightRecorder& recorder, WatchdogOptions options, OnTimeout on_timeout);
  ~CollectiveWatchdog();  // stops the thread (after on_timeout returns, if it is running)
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  Nanoseconds poll_interval() const { return poll_interval_; }

 private:
  void run();

  const FlightRecorder& recorder_;
  const Nanoseconds timeout_;
  const Nanoseconds poll_interval_;
  const OnTimeout on_timeout_;
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;   // guarded by mutex_
  std::thread thread_;  // last: starts once the members it reads exist
};

}  // namespace partrain::profiler
