// A foreign rank's PyTorch ops in its flight recorder, so that a watchdog can time them and a dump
// shows where the rank stood: an op enters the recorder when partrain's Python module reports it
// called (its pre hook: enqueued, before the backend can fail or abort on it), moves on in place
// when it is reported issued (its post hook: started) and is finished in place when its
// completion is reported, the reports matched by group and the time the op was called (not by
// seq: an any-source recv is numbered once its sender is known, at completion).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "profiler/collective_event.h"
#include "profiler/flight/flight_recorder.h"

namespace partrain::profiler {

class TorchFlight {
 public:
  // `recorder` must outlive this.
  explicit TorchFlight(FlightRecorder& recorder) : recorder_(recorder) {}

  // Op `event` of group handle `group` was called (state kEnqueued) or issued (kStarted) and has
  // not completed: a new entry, or the op's entry updated in place when it is in flight already.
  // kUntimed: its completion shows only once the program waits on it, which waited() says (a
  // watchdog leaves it alone until then).
  void issued(int group, const CollectiveEvent& event,
              FlightRecorder::Timing timing = FlightRecorder::Timing::kFromEnqueue);
  // The program waits on that op from `since_ns` on: a watchdog times it from there.
  void waited(int group, const CollectiveEvent& event, int64_t since_ns);
  // It completed, failed, or was still in flight when the process ended (as its state says):
  // `deliver` writes it to the trace, unless a final dump holds it as it stood (then false).
  // A final dump waits for that delivery (FlightRecorder::final_snapshot).
  bool finished(int group, const CollectiveEvent& event, const FlightRecorder::Sink& deliver = {});

 private:
  // group, enqueue_ns: the module calls monotonic_ns() for each op under the GIL, one after
  // another, so no two ops of a group share it.
  using Key = std::tuple<int, int64_t>;

  FlightRecorder& recorder_;
  std::mutex mutex_;
  std::map<Key, uint64_t> in_flight_;  // guarded by mutex_: the recorder's id of each issued op
};

}  // namespace partrain::profiler
