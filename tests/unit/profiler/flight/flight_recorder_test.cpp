#include "profiler/flight/flight_recorder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

namespace partrain::profiler {
namespace {

CollectiveEvent event_with_seq(uint64_t seq) {
  CollectiveEvent event;
  event.comm_id = "world";
  event.seq = seq;
  event.op = "all_reduce";
  return event;
}

TEST(FlightRecorder, KeepsTheLastNOldestFirst) {
  FlightRecorder recorder(3);
  for (uint64_t seq = 0; seq < 5; ++seq) recorder.record(event_with_seq(seq));
  std::vector<CollectiveEvent> events = recorder.snapshot();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].seq, 2u);
  EXPECT_EQ(events[1].seq, 3u);
  EXPECT_EQ(events[2].seq, 4u);
  EXPECT_EQ(recorder.total_recorded(), 5u);
  EXPECT_EQ(FlightRecorder().capacity(), 2000u);
}

// What was recorded since an id, after the ring wrapped too: what a step counts of its own
// (counting the whole ring at the end saw the last 2000 of a long run only).
TEST(FlightRecorder, SinceGivesTheEntriesFromAnIdStillInTheRing) {
  FlightRecorder recorder(3);
  recorder.record(event_with_seq(0));
  recorder.record(event_with_seq(1));
  std::vector<CollectiveEvent> events = recorder.since(1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].seq, 1u);
  EXPECT_TRUE(recorder.since(2).empty());
  for (uint64_t seq = 2; seq < 7; ++seq) recorder.record(event_with_seq(seq));
  events = recorder.since(5);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].seq, 5u);
  EXPECT_EQ(events[1].seq, 6u);
  events = recorder.since(0);  // 0 to 3 were evicted
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].seq, 4u);
}

TEST(FlightRecorder, UpdatesInPlaceAndSinksFinishedEvenAfterEviction) {
  std::vector<CollectiveEvent> sunk;
  FlightRecorder recorder(2, [&](const CollectiveEvent& e) { sunk.push_back(e); });
  const uint64_t first = recorder.record(event_with_seq(0));
  const uint64_t second = recorder.record(event_with_seq(1));

  CollectiveEvent started = event_with_seq(1);
  started.state = CollectiveState::kStarted;
  recorder.update(second, started);
  EXPECT_TRUE(sunk.empty());  // only finished events reach the sink
  EXPECT_EQ(recorder.snapshot()[1].state, CollectiveState::kStarted);

  recorder.record(event_with_seq(2));  // evicts the first
  CollectiveEvent done = event_with_seq(0);
  done.state = CollectiveState::kCompleted;
  recorder.update(first, done);
  ASSERT_EQ(sunk.size(), 1u);
  EXPECT_EQ(sunk[0].seq, 0u);
  for (const auto& e : recorder.snapshot()) EXPECT_NE(e.seq, 0u);  // not resurrected
}

// A final dump writes the operations it holds unfinished into the trace itself: their later end
// (a failure as the rank's peers are torn down) must not reach the sink as a second row.
TEST(FlightRecorder, AfterTheFinalSnapshotFinishedOperationsNoLongerReachTheSink) {
  std::vector<CollectiveEvent> sunk;
  FlightRecorder recorder(4, [&](const CollectiveEvent& e) { sunk.push_back(e); });
  const uint64_t done_before = recorder.record(event_with_seq(0));
  const uint64_t open = recorder.record(event_with_seq(1));
  CollectiveEvent done = event_with_seq(0);
  done.state = CollectiveState::kCompleted;
  EXPECT_TRUE(recorder.update(done_before, done));
  ASSERT_EQ(sunk.size(), 1u);
  const std::vector<CollectiveEvent> final = recorder.final_snapshot();
  ASSERT_EQ(final.size(), 2u);
  EXPECT_EQ(final[1].state, CollectiveState::kEnqueued);
  CollectiveEvent failed = event_with_seq(1);
  failed.state = CollectiveState::kFailed;
  EXPECT_FALSE(recorder.update(open, failed)) << "a caller writing its own rows leaves it out";
  EXPECT_EQ(sunk.size(), 1u) << "the dump wrote seq 1 as it stood";
  EXPECT_EQ(recorder.snapshot()[1].state, CollectiveState::kFailed) << "the ring still follows";
}

// A PyTorch rank dumps at its first failed collective, and the program may catch the error and
// go on: the operations it records after the dump still reach the trace (they had been lost).
TEST(FlightRecorder, OperationsRecordedAfterTheFinalSnapshotStillReachTheSink) {
  std::vector<CollectiveEvent> sunk;
  FlightRecorder recorder(4, [&](const CollectiveEvent& e) { sunk.push_back(e); });
  (void)recorder.record(event_with_seq(0));
  (void)recorder.final_snapshot();
  const uint64_t later = recorder.record(event_with_seq(1));
  CollectiveEvent done = event_with_seq(1);
  done.state = CollectiveState::kCompleted;
  EXPECT_TRUE(recorder.update(later, done));
  ASSERT_EQ(sunk.size(), 1u);
  EXPECT_EQ(sunk[0].seq, 1u);
}

// A rank stopped by a signal as its collective failed: the signal's final dump found the op
// failed (so wrote no row of its own), and the flush after it ran before the program's thread
// had delivered the failure to the trace; the kill then lost the row. The final snapshot waits
// for a delivery under way, through update() and record() alike.
TEST(FlightRecorder, AFinalSnapshotWaitsForTheDeliveryOfAnOperationItHoldsFinished) {
  for (const bool in_flight_before : {true, false}) {
    FlightRecorder recorder(4);
    const uint64_t open = recorder.record(event_with_seq(0));
    CollectiveEvent failed = event_with_seq(in_flight_before ? 0 : 1);
    failed.state = CollectiveState::kFailed;
    std::promise<void> entered;
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    std::atomic<bool> delivered{false};
    auto deliver = [&](const CollectiveEvent&) {
      entered.set_value();
      released.wait();
      delivered.store(true);
    };
    std::thread finishing([&] {
      if (in_flight_before) {
        (void)recorder.update(open, failed, deliver);
      } else {
        (void)recorder.record(failed, FlightRecorder::Timing::kFromEnqueue, deliver);
      }
    });
    entered.get_future().wait();  // the ring holds the op failed; its delivery is under way
    std::future<bool> dumped = std::async(std::launch::async, [&] {
      (void)recorder.final_snapshot();
      return delivered.load();
    });
    // Without the wait the snapshot returns at once, its delivery still held back here.
    EXPECT_EQ(dumped.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout)
        << (in_flight_before ? "update" : "record");
    release.set_value();
    EXPECT_TRUE(dumped.get()) << "the snapshot came back before the delivery it held finished";
    finishing.join();
  }
}

TEST(FlightRecorder, OldestUnfinishedIsTheFirstEnqueuedStillOpen) {
  FlightRecorder recorder(3);
  EXPECT_FALSE(recorder.oldest_unfinished().has_value());
  const uint64_t first = recorder.record(event_with_seq(0));
  recorder.record(event_with_seq(1));
  CollectiveEvent done = event_with_seq(0);
  done.state = CollectiveState::kCompleted;
  recorder.update(first, done);
  ASSERT_TRUE(recorder.oldest_unfinished().has_value());
  EXPECT_EQ(recorder.oldest_unfinished()->event.seq, 1u);
  // After wrapping the ring, "oldest" is by recording order, not by slot.
  recorder.record(event_with_seq(2));
  recorder.record(event_with_seq(3));  // evicts seq 0, lands in slot 0
  EXPECT_EQ(recorder.oldest_unfinished()->event.seq, 1u);
  CollectiveEvent failed = event_with_seq(1);
  failed.state = CollectiveState::kFailed;  // failed is finished: not the watchdog's business
  recorder.update(1, failed);
  EXPECT_EQ(recorder.oldest_unfinished()->event.seq, 2u);
}

}  // namespace
}  // namespace partrain::profiler
