// Keeps a traced rank's clock on the run-wide timeline: the offset to the store host (node 0)
// measured at join is re-measured every interval on a connection of its own, and the offsets are
// fitted against local time (hosts drift by tens of ppm), DESIGN.md "Trace data model". Each
// round updates the tracer's clock model and re-sends the rank's metadata with the new offset,
// uncertainty and drift.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/duration.h"
#include "core/status.h"
#include "profiler/clock_sync.h"
#include "profiler/rank_tracer.h"
#include "runner/rendezvous/store_client.h"
#include "runner/worker/world.h"

namespace partrain::runner {

struct ClockResyncOptions {
  Nanoseconds interval = std::chrono::seconds(10);
  int pings = 8;
};

// One min-RTT offset measurement: `pings` round trips to the store, the tightest kept.
StatusOr<std::optional<profiler::ClockOffset>> measure_clock_offset(
    rendezvous::StoreClient& client, int pings);

class ClockResync {
 public:
  // `first` is the offset measured at join, at local time first_local_ns; `identity` is this
  // rank's metadata (host, pid, device...) re-sent with every new measurement. The tracer must
  // outlive this object. Without a connection to the store the first offset stays in force.
  static std::unique_ptr<ClockResync> start(const WorkerEnv& env, profiler::ClockOffset first,
                                            int64_t first_local_ns, profiler::RankInfo identity,
                                            profiler::RankTracer& tracer,
                                            ClockResyncOptions options = {});
  ~ClockResync();
  ClockResync(const ClockResync&) = delete;
  ClockResync& operator=(const ClockResync&) = delete;

  // One more round now (the worker's last, so even a short run fits its drift on two points).
  void measure_now();
  profiler::ClockDrift drift() const;

 private:
  ClockResync(std::unique_ptr<rendezvous::StoreClient> client, profiler::RankInfo identity,
              profiler::RankTracer& tracer, ClockResyncOptions options);
  void add(const profiler::ClockOffset& offset, int64_t local_ns);  // refits and publishes
  void loop();

  std::unique_ptr<rendezvous::StoreClient> client_;
  profiler::RankInfo identity_;
  profiler::RankTracer& tracer_;
  const ClockResyncOptions options_;
  mutable std::mutex mutex_;
  std::vector<profiler::OffsetObservation> observations_;  // guarded by mutex_
  profiler::ClockDrift drift_;                              // guarded by mutex_
  std::mutex measure_mutex_;                                // one round at a time
  std::condition_variable wake_;
  bool stop_ = false;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace partrain::runner
