// What a worker does when its run goes wrong (docs/reliability.md). Installed first, before any
// thread starts, it takes the launcher's stop signals (and ignores SIGPIPE); once the world is
// joined, watch() adds the collective watchdog and the flight dumper while the Watch lives:
// - the watchdog fires (a collective unfinished past --collective-timeout): dump the flight
//   recorder, end the rank with 124;
// - a collective fails with an error: dump, and give the launcher a moment to stop this rank
//   (the caller then exits with the error's code); a failure outside collectives dumps quietly;
// - the launcher's stop signal: dump quietly (file only), ship what the tracer still buffers
//   (another rank failed: the trace must show how far this one got), then die by the signal.
#pragma once

#include <memory>
#include <mutex>

#include "core/duration.h"
#include "core/status.h"
#include "profiler/flight/collective_watchdog.h"
#include "profiler/flight/flight_dumper.h"
#include "profiler/rank_tracer.h"
#include "runner/worker/stop_signal_watch.h"
#include "runner/worker/world.h"

namespace partrain::runner {

inline constexpr Nanoseconds kDefaultCollectiveTimeout = std::chrono::seconds(300);
// How long a rank whose collective failed waits to be stopped before it exits by itself: a
// failed collective usually means a peer died first, and the launcher should see that peer's
// exit first, so its summary names the rank that failed first rather than this one.
inline constexpr Nanoseconds kPeerFailureGrace = std::chrono::seconds(2);

// --collective-timeout as the launcher passes it (PARTRAIN_COLLECTIVE_TIMEOUT, "2s"); 300 s when
// unset; kInvalidArgument when malformed or not positive.
StatusOr<Nanoseconds> collective_timeout_from_env();

class RankGuard {
 public:
  // Call before any other thread starts (see StopSignalWatch).
  static std::unique_ptr<RankGuard> install();
  ~RankGuard();

  // While a Watch lives, the world's recorder is watched and dumped on trouble. Destroy it
  // before the World.
  class Watch {
   public:
    ~Watch();
    // After the workload failed with `status`: dumps the recorder, as a collective_error when
    // one of the world's collectives failed (then returns true: the caller should linger), else
    // quietly as a rank_error.
    bool dump_after_failure(const Status& status);

   private:
    friend class RankGuard;
    Watch(RankGuard& guard, const World& world, profiler::RankTracer* tracer,
          Nanoseconds timeout);
    void fire(const profiler::WatchdogTimeout& timeout);  // dump, flush, _Exit(124)

    RankGuard& guard_;
    const profiler::FlightRecorder& recorder_;
    const int rank_;
    profiler::RankTracer* tracer_;
    profiler::FlightDumper dumper_;
    std::unique_ptr<profiler::CollectiveWatchdog> watchdog_;
  };

  std::unique_ptr<Watch> watch(const World& world, profiler::RankTracer* tracer,
                               Nanoseconds timeout);
  // Sleeps up to kPeerFailureGrace; the launcher's stop signal ends the rank meanwhile.
  static void linger_for_launcher();

 private:
  RankGuard() = default;
  void on_stop_signal(int signal);

  std::mutex mutex_;
  profiler::FlightDumper* dumper_ = nullptr;  // guarded by mutex_: the live Watch's
  profiler::RankTracer* tracer_ = nullptr;  // guarded by mutex_: the live Watch's
  std::unique_ptr<StopSignalWatch> signals_;
};

}  // namespace partrain::runner
