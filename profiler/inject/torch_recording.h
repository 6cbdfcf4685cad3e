// A traced process's PyTorch side: the c10d process groups the Python module
// (share/python/partrain_torch) registered, the collectives it reports for them, and the windows
// in which NCCL calls belong to a PyTorch op (profiler/torch_nccl_join.h). Owned by the
// InjectedProcess; reached from the C entry points of torch_abi.cpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "profiler/flight/flight_recorder.h"
#include "profiler/flight/torch_flight.h"
#include "profiler/rank_tracer.h"
#include "profiler/torch_collective.h"
#include "profiler/torch_nccl_join.h"

namespace partrain::profiler::inject {

// The PyTorch op the calling thread is inside (between its pre and post hook), on an NCCL
// group: the NCCL calls it makes carry `op` and push `correlation`.
struct TorchWindow {
  uint64_t op = 0;
  uint64_t correlation = 0;
  int depth = 0;  // an op issuing another op keeps the outer window
};

class TorchRecording {
 public:
  // `deliver`: where a row leaves for the trace (through GPU activity when it is collected).
  TorchRecording(RankTracer& tracer, TorchNcclJoin::Deliver deliver);

  // A process group: its handle for collective(), or -1 past kMaxGroups.
  static constexpr size_t kMaxGroups = 1 << 16;
  int add_group(TorchGroup group);
  // An op of group `group` reported by the hooks once it completed or failed; `window` is the
  // op's window (0: none). The op as recorded (nullopt: no collective, or an unknown group).
  std::optional<CollectiveEvent> collective(int group, const TorchOp& op, uint64_t window);
  // The same op when it was called (the pre hook: enqueued) and when it was issued (the post
  // hook: started), before it completes: in flight, in the flight recorder. kUntimed: the
  // watchdog leaves it alone from its issue until waited() (FlightRecorder::Timing).
  void called(int group, const TorchOp& op);
  void issued(int group, const TorchOp& op,
              FlightRecorder::Timing timing = FlightRecorder::Timing::kFromEnqueue);
  // The program waits on that op from now on: the watchdog times it from here.
  void waited(int group, const TorchOp& op);
  // The ops of this rank, in flight and recent (the rank's watchdog and dumps read it).
  FlightRecorder& flight_recorder() { return recorder_; }

  // An NCCL call, which waits for its PyTorch op when it was made in a window.
  void nccl_call(const NcclCallRecord& call) { join_.nccl_call(call); }
  void flush() { join_.flush(); }

  // The calling thread's window; open() starts one (or nests in the open one) with a fresh op
  // id and the given correlation id, close() ends it at the outermost level.
  static const TorchWindow& window();
  uint64_t open_window(uint64_t correlation);
  static void close_window();

 private:
  // The op's event, nullopt (and a notice, once) for a group never registered.
  std::optional<CollectiveEvent> event_of(int group, const TorchOp& op);

  RankTracer& tracer_;
  TorchNcclJoin join_;
  FlightRecorder recorder_;
  TorchFlight flight_{recorder_};
  std::mutex groups_mutex_;
  std::vector<TorchGroup> groups_;
  std::atomic<uint64_t> next_window_{0};
  std::atomic<bool> warned_unknown_group_{false};
};

}  // namespace partrain::profiler::inject
