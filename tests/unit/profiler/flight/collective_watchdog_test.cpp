// The collective watchdog: fires once on an operation left unfinished past the timeout, reports
// the oldest one and how long it waited, and never fires on finished operations.
#include "profiler/flight/collective_watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "core/clock.h"

namespace partrain::profiler {
namespace {

using namespace std::chrono_literals;

CollectiveEvent op(uint64_t seq, int64_t enqueue_ns) {
  CollectiveEvent event;
  event.comm_id = "world";
  event.seq = seq;
  event.op = "all_reduce";
  event.enqueue_ns = enqueue_ns;
  return event;
}

struct Firings {
  std::mutex mutex;
  std::vector<WatchdogTimeout> seen;
  void add(const WatchdogTimeout& t) {
    std::lock_guard lock(mutex);
    seen.push_back(t);
  }
  size_t count() {
    std::lock_guard lock(mutex);
    return seen.size();
  }
};

// Waits (bounded) for a condition the watchdog's thread makes true.
template <typename Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 500 && !pred(); ++i) std::this_thread::sleep_for(10ms);
  return pred();
}

TEST(CollectiveWatchdog, FiresOnceOnTheOldestUnfinishedOp) {
  FlightRecorder recorder;
  const int64_t now = monotonic_ns();
  const uint64_t done = recorder.record(op(0, now - 10'000'000'000));  // 10 s ago, but finished
  CollectiveEvent finished = op(0, now - 10'000'000'000);
  finished.state = CollectiveState::kCompleted;
  recorder.update(done, finished);
  recorder.record(op(1, now - 5'000'000'000));  // stuck for 5 s
  recorder.record(op(2, now - 4'000'000'000));
  Firings firings;
  {
    CollectiveWatchdog watchdog(recorder, {1s, 10ms},
                                [&](const WatchdogTimeout& t) { firings.add(t); });
    ASSERT_TRUE(eventually([&] { return firings.count() > 0; }));
    std::this_thread::sleep_for(50ms);  // several more polls: still one firing
  }
  ASSERT_EQ(firings.count(), 1u);
  EXPECT_EQ(firings.seen[0].event.seq, 1u);
  EXPECT_GE(firings.seen[0].waited, 5s);
  EXPECT_EQ(firings.seen[0].timeout, 1s);
}

// An op whose completion shows only once the program waits on it (a gloo isend never waited, a
// reduce_scatter waited from C++) is left alone while nothing waits on it: it had ended a healthy
// PyTorch job with 124. Once the program waits on it, it is timed from that wait.
TEST(CollectiveWatchdog, AnUntimedOpIsTimedOnlyFromWhenTheProgramWaitsOnIt) {
  FlightRecorder recorder;
  const int64_t now = monotonic_ns();
  const uint64_t send =
      recorder.record(op(0, now - 10'000'000'000), FlightRecorder::Timing::kUntimed);
  recorder.record(op(1, now - 2'000'000'000));  // in flight for 2 s, timed
  Firings firings;
  {
    CollectiveWatchdog watchdog(recorder, {5s, 10ms},
                                [&](const WatchdogTimeout& t) { firings.add(t); });
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(firings.count(), 0u) << "seq 0 is 10 s old but untimed, seq 1 within 5 s";
    recorder.time_from(send, monotonic_ns() - 6'000'000'000);  // waited on for 6 s
    ASSERT_TRUE(eventually([&] { return firings.count() > 0; }));
  }
  EXPECT_EQ(firings.seen[0].event.seq, 0u);
  EXPECT_GE(firings.seen[0].waited, 6s);
  EXPECT_LT(firings.seen[0].waited, 7s) << "counted from the wait, not from the op's issue";
}

TEST(CollectiveWatchdog, QuietWhileOpsFinishInTime) {
  FlightRecorder recorder;
  Firings firings;
  {
    CollectiveWatchdog watchdog(recorder, {200ms, 10ms},
                                [&](const WatchdogTimeout& t) { firings.add(t); });
    for (uint64_t seq = 0; seq < 5; ++seq) {
      CollectiveEvent event = op(seq, monotonic_ns());
      const uint64_t id = recorder.record(event);
      std::this_thread::sleep_for(20ms);
      event.state = CollectiveState::kCompleted;
      recorder.update(id, event);
    }
  }
  EXPECT_EQ(firings.count(), 0u);
}

TEST(CollectiveWatchdog, PollIntervalFollowsTheTimeout) {
  FlightRecorder recorder;
  auto interval = [&](Nanoseconds timeout) {
    return CollectiveWatchdog(recorder, {timeout, Nanoseconds(0)}, {}).poll_interval();
  };
  EXPECT_EQ(interval(2s), 200ms);
  EXPECT_EQ(interval(300s), 1s);    // the default answers within a second
  EXPECT_EQ(interval(20ms), 10ms);  // a tiny timeout does not spin
}

// PARTRAIN_COLLECTIVE_TIMEOUT as launchers pass it: unset means no watchdog (a foreign rank's
// default; partrain's own workers fall back to 300 s); malformed or not positive is refused.
TEST(CollectiveWatchdog, TheTimeoutComesFromTheEnvironment) {
  ::unsetenv(kCollectiveTimeoutEnv);
  auto unset = collective_timeout_from_env();
  ASSERT_TRUE(unset.is_ok());
  EXPECT_FALSE(unset->has_value());
  ::setenv(kCollectiveTimeoutEnv, "3000000000ns", 1);
  auto given = collective_timeout_from_env();
  ASSERT_TRUE(given.is_ok());
  EXPECT_EQ(given->value(), 3s);
  for (const char* bad : {"soon", "0s", "-2s"}) {
    ::setenv(kCollectiveTimeoutEnv, bad, 1);
    auto refused = collective_timeout_from_env();
    ASSERT_FALSE(refused.is_ok()) << bad;
    EXPECT_NE(refused.status().message().find(kCollectiveTimeoutEnv), std::string::npos)
        << refused.status().message();
  }
  ::unsetenv(kCollectiveTimeoutEnv);
}

TEST(CollectiveWatchdog, TheReasonNamesTheOpItsCommunicatorSeqAndBothDurations) {
  WatchdogTimeout timeout;
  timeout.event = op(6, 0);
  timeout.event.comm_id = "default_pg:0";
  timeout.waited = 3150ms;
  timeout.timeout = 3s;
  EXPECT_EQ(describe_watchdog_timeout(timeout),
            "all_reduce (comm default_pg:0, seq 6) not completed after 3.15 s "
            "(--collective-timeout 3 s)");
}

// A broadcast's `peer` is its root, not a peer: the line says so; a send's is its peer.
TEST(CollectiveWatchdog, TheReasonCallsABroadcastsRootItsRootAndASendsPeerItsPeer) {
  WatchdogTimeout timeout;
  timeout.event = op(6, 0);
  timeout.event.comm_id = "default_pg:0";
  timeout.event.op = "broadcast";
  timeout.event.peer = 0;
  timeout.waited = 5340ms;
  timeout.timeout = 5s;
  EXPECT_EQ(describe_watchdog_timeout(timeout),
            "broadcast (comm default_pg:0, root 0, seq 6) not completed after 5.34 s "
            "(--collective-timeout 5 s)");
  timeout.event.op = "send";
  timeout.event.peer = 1;
  EXPECT_NE(describe_watchdog_timeout(timeout).find("(comm default_pg:0, peer 1, seq 6)"),
            std::string::npos)
      << describe_watchdog_timeout(timeout);
}

}  // namespace
}  // namespace partrain::profiler
