// Which deadline of a store connection comes next, and which one it missed.
#include "runner/rendezvous/connection_deadlines.h"

#include <gtest/gtest.h>

namespace partrain::rendezvous::detail {
namespace {

constexpr int64_t kSecond = 1'000'000'000;
const Timeouts kTimeouts{10 * kSecond, 30 * kSecond, 30 * kSecond};

TEST(ConnectionDeadlines, ASilentConnectionHasItsHandshakeDeadline) {
  Connection silent;
  silent.accepted_ns = 100 * kSecond;
  EXPECT_EQ(next_deadline(silent, kTimeouts, 101 * kSecond), 110 * kSecond);
  EXPECT_EQ(missed_deadline(silent, kTimeouts, 109 * kSecond), "");
  EXPECT_EQ(missed_deadline(silent, kTimeouts, 110 * kSecond), "sent no valid request within 10 s");
}

TEST(ConnectionDeadlines, AnIdleClientThatSpokeHasNone) {
  Connection idle;
  idle.accepted_ns = 0;
  idle.handshaken = true;
  EXPECT_EQ(next_deadline(idle, kTimeouts, 3600 * kSecond), -1);
  EXPECT_EQ(missed_deadline(idle, kTimeouts, 3600 * kSecond), "");
}

TEST(ConnectionDeadlines, TheEarliestOfARequestBegunRepliesUnreadAndAParkedWait) {
  Connection busy;
  busy.handshaken = true;
  busy.request_started_ns = 50 * kSecond;
  busy.write_blocked_ns = 40 * kSecond;
  busy.parked_until_ns = 75 * kSecond;
  EXPECT_EQ(next_deadline(busy, kTimeouts, 60 * kSecond), 70 * kSecond);
  EXPECT_EQ(missed_deadline(busy, kTimeouts, 70 * kSecond), "read none of its replies for 30 s");
  busy.write_blocked_ns = -1;
  EXPECT_EQ(next_deadline(busy, kTimeouts, 60 * kSecond), 75 * kSecond);
  EXPECT_EQ(missed_deadline(busy, kTimeouts, 80 * kSecond),
            "began a request and did not finish it within 30 s");
}

TEST(ConnectionDeadlines, ARejectedPeerGetsItsLingerOrTheWriteTimeout) {
  Connection rejected;
  rejected.closing = true;
  EXPECT_EQ(next_deadline(rejected, kTimeouts, 5 * kSecond), 35 * kSecond) << "reply not out";
  rejected.closing_until_ns = 6 * kSecond;
  EXPECT_EQ(next_deadline(rejected, kTimeouts, 5 * kSecond), 6 * kSecond);
}

}  // namespace
}  // namespace partrain::rendezvous::detail
