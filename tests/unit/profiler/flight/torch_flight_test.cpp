// A foreign rank's PyTorch ops in its flight recorder: in flight from their call (what the
// watchdog times and a dump shows), finished in place when their completion is reported, and
// left out of the trace once a final dump holds them unfinished.
#include "profiler/flight/torch_flight.h"

#include <gtest/gtest.h>

#include <vector>

namespace partrain::profiler {
namespace {

CollectiveEvent op(uint64_t seq, int64_t enqueue_ns, CollectiveState state) {
  CollectiveEvent event;
  event.comm_id = "default_pg:0";
  event.seq = seq;
  event.op = "all_reduce";
  event.enqueue_ns = enqueue_ns;
  event.start_ns = enqueue_ns + 10;
  event.end_ns = state == CollectiveState::kCompleted ? enqueue_ns + 100 : event.start_ns;
  event.state = state;
  return event;
}

// An any-source recv called at 1000 ns on group 0 (the recorder's one entry) completes from rank
// 1 as its seq 4: that entry finishes in place, taking its sender and seq.
void expect_any_source_completion_finishes_in_place(TorchFlight& flight, FlightRecorder& recorder) {
  CollectiveEvent completed = op(4, 1000, CollectiveState::kCompleted);
  completed.peer = 1;
  EXPECT_TRUE(flight.finished(0, completed));
  ASSERT_EQ(recorder.snapshot().size(), 1u);
  EXPECT_EQ(recorder.snapshot()[0].seq, 4u);
  EXPECT_EQ(recorder.snapshot()[0].peer, 1);
  EXPECT_FALSE(recorder.oldest_unfinished().has_value());
}

TEST(TorchFlight, AnIssuedOpIsInFlightUntilItsCompletionArrives) {
  FlightRecorder recorder;
  TorchFlight flight(recorder);
  flight.issued(0, op(0, 1000, CollectiveState::kStarted));
  flight.issued(0, op(1, 2000, CollectiveState::kStarted));
  ASSERT_TRUE(recorder.oldest_unfinished().has_value());
  EXPECT_EQ(recorder.oldest_unfinished()->event.seq, 0u);

  EXPECT_TRUE(flight.finished(0, op(0, 1000, CollectiveState::kCompleted)));
  ASSERT_TRUE(recorder.oldest_unfinished().has_value());
  EXPECT_EQ(recorder.oldest_unfinished()->event.seq, 1u) << "seq 0 completed in place";
  EXPECT_EQ(recorder.total_recorded(), 2u) << "one entry per op, not one per report";
  EXPECT_TRUE(flight.finished(0, op(1, 2000, CollectiveState::kCompleted)));
  EXPECT_FALSE(recorder.oldest_unfinished().has_value());
}

// An any-source recv is issued under peer -1 and a provisional seq, and completes numbered among
// its sender's sends: it finishes in place (it stayed in flight, and the watchdog ended a
// healthy job).
TEST(TorchFlight, ACompletionMatchesItsIssueByGroupAndCallTimeWhateverItsSeq) {
  FlightRecorder recorder;
  TorchFlight flight(recorder);
  CollectiveEvent issued = op(0, 1000, CollectiveState::kStarted);
  issued.peer = -1;
  flight.issued(0, issued);
  expect_any_source_completion_finishes_in_place(flight, recorder);
}

// An op issued untimed is timed from when the program waits on it.
TEST(TorchFlight, AnUntimedOpIsTimedFromItsWait) {
  FlightRecorder recorder;
  TorchFlight flight(recorder);
  flight.issued(0, op(0, 1000, CollectiveState::kStarted), FlightRecorder::Timing::kUntimed);
  EXPECT_FALSE(recorder.oldest_unfinished().has_value());
  flight.waited(0, op(0, 1000, CollectiveState::kStarted), 7000);
  ASSERT_TRUE(recorder.oldest_unfinished().has_value());
  EXPECT_EQ(recorder.oldest_unfinished()->timed_from_ns, 7000);
  EXPECT_TRUE(flight.finished(0, op(0, 1000, CollectiveState::kCompleted)));
  EXPECT_FALSE(recorder.oldest_unfinished().has_value());
}

// The pre hook reports the op called (enqueued) before the backend can abort the rank on it
// (gloo's enforce on a size mismatch); the post hook's report moves that entry on: one entry per
// op, so a dump never holds it twice.
TEST(TorchFlight, ACalledOpIsInFlightAndItsIssueMovesTheSameEntryOn) {
  FlightRecorder recorder;
  TorchFlight flight(recorder);
  flight.issued(0, op(0, 1000, CollectiveState::kEnqueued));
  ASSERT_EQ(recorder.snapshot().size(), 1u);
  EXPECT_EQ(recorder.snapshot()[0].state, CollectiveState::kEnqueued);
  flight.issued(0, op(0, 1000, CollectiveState::kStarted));
  ASSERT_EQ(recorder.snapshot().size(), 1u) << "issued in place, not a second entry";
  EXPECT_EQ(recorder.snapshot()[0].state, CollectiveState::kStarted);
  EXPECT_TRUE(flight.finished(0, op(0, 1000, CollectiveState::kCompleted)));
  ASSERT_EQ(recorder.snapshot().size(), 1u);
  EXPECT_EQ(recorder.snapshot()[0].state, CollectiveState::kCompleted);
}

// An op called (timed from its call: a backend may hang or abort in it) whose Work then turns out
// to complete only once waited on: its one entry is left alone from its issue until the program
// waits on it, and its any-source completion still finishes that entry.
TEST(TorchFlight, ACalledOpIssuedUntimedIsTimedFromItsWaitInItsOneEntry) {
  FlightRecorder recorder;
  TorchFlight flight(recorder);
  CollectiveEvent called = op(0, 1000, CollectiveState::kEnqueued);
  called.peer = -1;
  flight.issued(0, called);
  ASSERT_TRUE(recorder.oldest_unfinished().has_value());
  EXPECT_EQ(recorder.oldest_unfinished()->timed_from_ns, 1000);
  CollectiveEvent issued = called;
  issued.state = CollectiveState::kStarted;
  flight.issued(0, issued, FlightRecorder::Timing::kUntimed);
  ASSERT_EQ(recorder.snapshot().size(), 1u) << "issued in place, not a second entry";
  EXPECT_EQ(recorder.snapshot()[0].state, CollectiveState::kStarted);
  EXPECT_FALSE(recorder.oldest_unfinished().has_value());
  flight.waited(0, issued, 7000);
  ASSERT_TRUE(recorder.oldest_unfinished().has_value());
  EXPECT_EQ(recorder.oldest_unfinished()->timed_from_ns, 7000);
  expect_any_source_completion_finishes_in_place(flight, recorder);
}

// Ops of two groups (or a send and a recv) may share a seq: group and call time tell them apart.
TEST(TorchFlight, CompletionsMatchByGroupAndCallTime) {
  FlightRecorder recorder;
  TorchFlight flight(recorder);
  flight.issued(0, op(3, 1000, CollectiveState::kStarted));
  flight.issued(1, op(3, 1000, CollectiveState::kStarted));
  flight.issued(1, op(3, 5000, CollectiveState::kStarted));
  EXPECT_TRUE(flight.finished(1, op(3, 1000, CollectiveState::kCompleted)));
  const std::vector<CollectiveEvent> ring = recorder.snapshot();
  ASSERT_EQ(ring.size(), 3u);
  EXPECT_EQ(ring[0].state, CollectiveState::kStarted);
  EXPECT_EQ(ring[1].state, CollectiveState::kCompleted);
  EXPECT_EQ(ring[2].state, CollectiveState::kStarted);
}

// Work that was done when issued is never reported in flight: it enters finished.
TEST(TorchFlight, AnOpNeverReportedInFlightEntersFinished) {
  FlightRecorder recorder;
  TorchFlight flight(recorder);
  EXPECT_TRUE(flight.finished(0, op(0, 1000, CollectiveState::kCompleted)));
  ASSERT_EQ(recorder.snapshot().size(), 1u);
  EXPECT_EQ(recorder.snapshot()[0].state, CollectiveState::kCompleted);
  EXPECT_FALSE(recorder.oldest_unfinished().has_value());
}

// A rank stopped by its launcher dumps what was in flight; should the op still complete before
// the process ends, the dump's row stands and the op is not written a second time.
TEST(TorchFlight, AfterAFinalDumpAnOpItHeldUnfinishedStaysOutOfTheTrace) {
  FlightRecorder recorder;
  TorchFlight flight(recorder);
  flight.issued(0, op(0, 1000, CollectiveState::kStarted));
  const std::vector<CollectiveEvent> dumped = recorder.final_snapshot();
  ASSERT_EQ(dumped.size(), 1u);
  EXPECT_EQ(dumped[0].state, CollectiveState::kStarted);
  EXPECT_FALSE(flight.finished(0, op(0, 1000, CollectiveState::kCompleted)));
  EXPECT_TRUE(flight.finished(0, op(1, 3000, CollectiveState::kCompleted)))
      << "an op the dump did not hold unfinished still goes to the trace";
}

// The op's last word goes to the trace whatever its state: one still in flight as the process
// ends (a gloo Work nothing waited on) is written as it stood, as is one that never was in
// flight; none after a final dump held it unfinished.
TEST(TorchFlight, EveryLastWordIsDeliveredAnOpStillInFlightAtTheEndToo) {
  FlightRecorder recorder;
  TorchFlight flight(recorder);
  std::vector<CollectiveEvent> delivered;
  auto deliver = [&](const CollectiveEvent& event) { delivered.push_back(event); };
  flight.issued(0, op(0, 1000, CollectiveState::kStarted));
  EXPECT_TRUE(flight.finished(0, op(0, 1000, CollectiveState::kStarted), deliver));
  EXPECT_TRUE(flight.finished(0, op(1, 2000, CollectiveState::kCompleted), deliver));
  flight.issued(0, op(2, 3000, CollectiveState::kStarted));
  (void)recorder.final_snapshot();
  EXPECT_FALSE(flight.finished(0, op(2, 3000, CollectiveState::kFailed), deliver));
  ASSERT_EQ(delivered.size(), 2u);
  EXPECT_EQ(delivered[0].state, CollectiveState::kStarted);
  EXPECT_EQ(delivered[1].seq, 1u);
}

// Ops whose completion never comes (the module stopped recording) do not pile up.
TEST(TorchFlight, OpsThatNeverCompleteAreForgottenOnceTheRingEvictsThem) {
  FlightRecorder recorder(4);
  TorchFlight flight(recorder);
  for (uint64_t seq = 0; seq < 100; ++seq) {
    flight.issued(0, op(seq, static_cast<int64_t>(seq) * 1000, CollectiveState::kStarted));
  }
  // Still in the ring: its completion finds it.
  EXPECT_TRUE(flight.finished(0, op(99, 99'000, CollectiveState::kCompleted)));
  EXPECT_EQ(recorder.snapshot().back().state, CollectiveState::kCompleted);
  // Evicted long ago: recorded afresh, finished.
  const uint64_t before = recorder.total_recorded();
  EXPECT_TRUE(flight.finished(0, op(0, 0, CollectiveState::kCompleted)));
  EXPECT_EQ(recorder.total_recorded(), before + 1);
}

}  // namespace
}  // namespace partrain::profiler
