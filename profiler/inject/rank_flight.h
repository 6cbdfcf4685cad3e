// A foreign rank's flight recorder put to the use a built-in rank's RankGuard makes of its own
// (runner/worker/rank_guard.h), so that a PyTorch job's hang is diagnosed whatever torch's own
// timeout (gloo's is 30 minutes and cannot be aborted):
// - PARTRAIN_COLLECTIVE_TIMEOUT set: a collective watchdog; an op unfinished past it makes the
//   rank say so on stderr, dump the recorder, ship what the tracer holds and exit with 124, as
//   PyTorch's TORCH_NCCL_ASYNC_ERROR_HANDLING ends a rank;
// - either set: a collective the Python module reports failed (gloo's timeout or a closed
//   connection, an op whose call raised) dumps the recorder (trigger `collective_error`), so
//   the launcher diagnoses a job that keeps torch's own timeouts; quietly on stderr, where the
//   rank's own traceback follows and is what its launcher's tail of it should show;
// - PARTRAIN_FLIGHT_DIR set (a launcher reads the dumps): SIGTERM and SIGINT first dump the
//   recorder quietly (trigger `signal`), so a rank that never entered the collective the others
//   wait in (stuck in Python, in compute) is seen, then take effect as they would have; SIGABRT
//   (a terminate() in gloo's or PyTorch's NCCL watchdog thread) dumps and ships what the tracer
//   holds before the rank dies of it.
// The dumps go to PARTRAIN_FLIGHT_DIR/rank_<R>.json and, unfinished ops as rows, to the trace.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#include "core/duration.h"
#include "profiler/flight/collective_watchdog.h"
#include "profiler/flight/flight_dumper.h"
#include "profiler/flight/flight_recorder.h"
#include "profiler/rank_tracer.h"

namespace partrain::profiler::inject {

class RankFlight {
 public:
  // nullptr when neither variable is set (or the timeout is malformed: said on stderr).
  // `recorder` and `tracer` must stay until close().
  static RankFlight* start(FlightRecorder& recorder, RankTracer& tracer);

  // The tracing ends: no dump from here on, and the watchdog stops (unless it is the one ending
  // the process). The object is never destroyed: a stop signal's handler may still reach it,
  // and then only passes the signal on.
  void close();

  // A collective failed (`event`, finished as failed): dump, on the reporting thread (a file and
  // the trace's rows: short). The first cause wins, as for every dump.
  void on_collective_failed(const CollectiveEvent& event);

  // The stop signal's work, on the relay's own thread (never in the handler): dump, ship. False
  // when the signal is not to take effect: the watchdog has fired and is ending the process.
  bool on_stop_signal(int signal);
  // Whether the rank has recorded any operation, so that a stop signal has a flight to dump.
  // Async-signal-safe.
  bool has_operations() const { return recorder_.recorded_any(); }

  // The program has ended (partrain's Python atexit handler ran): a signal from here on comes in
  // the interpreter's shutdown, and its dump says so (FlightDump::after_program_end).
  void program_ended() { program_ended_.store(true, std::memory_order_relaxed); }

 private:
  RankFlight(FlightRecorder& recorder, RankTracer& tracer, std::optional<std::string> dir);
  void watch(Nanoseconds timeout);
  void fire(const WatchdogTimeout& timeout);  // dump, ship, _Exit(124)

  FlightRecorder& recorder_;
  RankTracer& tracer_;
  FlightDumper dumper_;
  std::mutex mutex_;
  bool closed_ = false;  // guarded by mutex_: the recorder and tracer may be gone
  bool fired_ = false;   // guarded by mutex_: the watchdog's thread is ending the process
  std::atomic<bool> program_ended_{false};
  std::unique_ptr<CollectiveWatchdog> watchdog_;
};

// Takes SIGTERM, SIGINT and SIGABRT for `flight` in this process. The handler only hands the signal
// to a thread of its own and returns: the thread it interrupted may hold a lock the work needs, so
// it never waits for it. That thread calls flight.on_stop_signal() and then (unless the watchdog is
// already ending the process) sends the signal again, with its sender's details, to the process,
// whose handler gives it to the disposition found before (the default: the process dies by the
// signal). SIGABRT, which ends the process when its handler returns, is the exception: its
// handler waits (at most 3 s) for that thread's dump and flush, then hands it on. A fork()ed
// child passes its signals straight on.
// Unavailable (and the signals left as they were) when the host refuses the pipe or the thread.
Status take_stop_signals(RankFlight& flight);

// Takes `signal` (one of the stop signals) back after the program replaced our handler, the
// program's handler becoming the one the signal is passed on to after the dump. CPython's SIGINT
// handler goes in after ours (share/python/sitecustomize.py gives a rank its KeyboardInterrupt
// back), and a Ctrl-C then stopped the rank without its dump: no diagnosis of a hang the user
// gave up on. False when no relay runs in this process or the program ignores the signal.
// Exported to the program as partrain_retake_stop_signal(int) (1 when taken).
bool retake_stop_signal(int signal);

// Waits (at most `limit`) until every stop signal the handler gave the relay's thread has been
// dumped for and sent again. An exec takes that thread with it, and the signal it holds: the
// new image ran on as if never stopped. A signal sent again before the exec stays pending across
// it and ends the new image (or this one first).
void settle_stop_signals(std::chrono::milliseconds limit);

}  // namespace partrain::profiler::inject
