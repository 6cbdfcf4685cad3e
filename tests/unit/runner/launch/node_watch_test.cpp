// Node 0's judgement of the other nodes' heartbeats.
#include "runner/launch/node_watch.h"

#include <gtest/gtest.h>

namespace partrain::launch {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

rendezvous::KeyLiveness beat(int64_t at, std::string value = "7", bool connected = true,
                             int64_t disconnected_at = 0) {
  rendezvous::KeyLiveness liveness;
  liveness.last_write_ns = at;
  liveness.value = std::move(value);
  liveness.writer_connected = connected;
  liveness.disconnected_ns = disconnected_at;
  return liveness;
}

TEST(NodeWatch, HealthyNodesAreNotLost) {
  std::map<std::string, rendezvous::KeyLiveness> beats{{"1", beat(10 * kSecond)},
                                                       {"2", beat(10 * kSecond)}};
  EXPECT_FALSE(find_lost_node(beats, 3, 11 * kSecond, 0, false).has_value());
}

TEST(NodeWatch, ASilentNodeIsLostAfterTheSilenceLimit) {
  std::map<std::string, rendezvous::KeyLiveness> beats{{"1", beat(10 * kSecond)},
                                                       {"2", beat(7 * kSecond)}};
  EXPECT_FALSE(find_lost_node(beats, 3, 9 * kSecond + kSecond / 2, 0, false).has_value());
  auto lost = find_lost_node(beats, 3, 10 * kSecond + kSecond / 2, 0, false);
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(lost->node_rank, 2);
  EXPECT_NE(lost->why.find("no heartbeat for 3.5 s"), std::string::npos) << lost->why;
}

TEST(NodeWatch, AClosedConnectionIsLostAfterTheReconnectGraceOrAtOnceWhenAsked) {
  std::map<std::string, rendezvous::KeyLiveness> beats{
      {"1", beat(10 * kSecond, "7", false, 10 * kSecond)}};
  EXPECT_FALSE(find_lost_node(beats, 2, 10 * kSecond + kSecond / 2, 0, false).has_value());
  EXPECT_TRUE(find_lost_node(beats, 2, 10 * kSecond + kSecond / 2, 0, true).has_value());
  auto lost = find_lost_node(beats, 2, 11 * kSecond, 0, false);
  ASSERT_TRUE(lost.has_value());
  EXPECT_NE(lost->why.find("connection to the rendezvous store closed"), std::string::npos);
}

TEST(NodeWatch, ANodeThatSaidDoneIsNotLost) {
  std::map<std::string, rendezvous::KeyLiveness> beats{
      {"1", beat(1 * kSecond, std::string(kHeartbeatDone), false, 1 * kSecond)}};
  EXPECT_FALSE(find_lost_node(beats, 2, 60 * kSecond, 0, true).has_value());
}

TEST(NodeWatch, ANodeThatNeverBeatIsLostAfterTheSilenceLimit) {
  std::map<std::string, rendezvous::KeyLiveness> beats{{"1", beat(10 * kSecond)}};
  EXPECT_FALSE(find_lost_node(beats, 3, 10 * kSecond, 8 * kSecond, false).has_value());
  auto lost = find_lost_node(beats, 3, 11 * kSecond, 8 * kSecond, false);
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(lost->node_rank, 2);
}

}  // namespace
}  // namespace partrain::launch
