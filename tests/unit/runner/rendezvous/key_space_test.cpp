// A key space of the rendezvous store: values, budget, waiters, queues and barriers.
#include "runner/rendezvous/key_space.h"

#include <gtest/gtest.h>

namespace partrain::rendezvous {
namespace {

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

TEST(KeySpace, SetFindEraseAndTheBytesTheyCost) {
  KeySpace keys(1 << 20);
  EXPECT_EQ(keys.find("k"), nullptr);
  ASSERT_TRUE(keys.set("k", "value").is_ok());
  ASSERT_NE(keys.find("k"), nullptr);
  EXPECT_EQ(*keys.find("k"), "value");
  EXPECT_EQ(keys.bytes_used(), 5 + 1 + KeySpace::kEntryOverheadBytes);
  ASSERT_TRUE(keys.set("k", "v2").is_ok());
  EXPECT_EQ(keys.bytes_used(), 2 + 1 + KeySpace::kEntryOverheadBytes);
  EXPECT_EQ(keys.size(), 1u);
  EXPECT_TRUE(keys.erase("k"));
  EXPECT_FALSE(keys.erase("k"));
  EXPECT_EQ(keys.bytes_used(), 0u);
}

TEST(KeySpace, AFullBudgetRefusesNamingItAndKeepsWhatWasThere) {
  KeySpace keys(1000);
  ASSERT_TRUE(keys.set("a", std::string(500, 'x')).is_ok());
  Status full = keys.set("b", std::string(500, 'y'));
  ASSERT_FALSE(full.is_ok());
  EXPECT_TRUE(contains(full.message(), "the rendezvous store is full")) << full.message();
  EXPECT_FALSE(keys.contains("b"));
  EXPECT_EQ(keys.find("a")->size(), 500u);
  EXPECT_LE(keys.bytes_used(), keys.byte_limit());
  // Many empty keys cost their entries: bounded as well.
  int made = 0;
  while (keys.set("key" + std::to_string(made), "").is_ok()) ++made;
  EXPECT_LT(made, 1000 / static_cast<int>(KeySpace::kEntryOverheadBytes) + 1);
}

// A value still held by a reply being written counts until it is gone: replacing it over and
// over while readers hold the old ones cannot grow the store past its budget.
TEST(KeySpace, ValuesHeldElsewhereStillCountUntilReleased) {
  KeySpace keys(3000);
  ASSERT_TRUE(keys.set("k", std::string(1000, 'a')).is_ok());
  Value held = keys.find("k");
  ASSERT_TRUE(keys.set("k", std::string(1000, 'b')).is_ok());
  EXPECT_GE(keys.bytes_used(), 2000u);
  Value held_too = keys.find("k");
  EXPECT_FALSE(keys.set("k", std::string(1000, 'c')).is_ok()) << "two held copies and a third";
  held.reset();
  EXPECT_TRUE(keys.set("k", std::string(1000, 'c')).is_ok());
  EXPECT_EQ(*held_too, std::string(1000, 'b'));
}

TEST(KeySpace, AddCountsInDecimalTextAndRefusesOthers) {
  KeySpace keys(1 << 20);
  EXPECT_EQ(*keys.add("n", 5), 5);
  EXPECT_EQ(*keys.add("n", -2), 3);
  EXPECT_EQ(*keys.find("n"), "3");
  ASSERT_TRUE(keys.set("text", "abc").is_ok());
  EXPECT_FALSE(keys.add("text", 1).is_ok());
  ASSERT_TRUE(keys.set("big", std::to_string(INT64_MAX)).is_ok());
  auto overflow = keys.add("big", 1);
  ASSERT_FALSE(overflow.is_ok());
  EXPECT_TRUE(contains(overflow.status().message(), "overflows"));
}

TEST(KeySpace, AppendAndCompareSetAsTcpStore) {
  KeySpace keys(1 << 20);
  ASSERT_TRUE(keys.append("log", "ab").is_ok());
  ASSERT_TRUE(keys.append("log", "cd").is_ok());
  EXPECT_EQ(*keys.find("log"), "abcd");
  // Absent key, empty expectation: set.
  EXPECT_EQ(**keys.compare_set("c", "", "first"), "first");
  // Mismatch: the current value comes back, unchanged.
  EXPECT_EQ(**keys.compare_set("c", "other", "second"), "first");
  EXPECT_EQ(**keys.compare_set("c", "first", "second"), "second");
  // Absent key, non-empty expectation: the expectation comes back, nothing set.
  EXPECT_EQ(**keys.compare_set("absent", "x", "y"), "x");
  EXPECT_FALSE(keys.contains("absent"));
}

TEST(KeySpace, WaitersWakeWhenTheirLastKeyAppears) {
  KeySpace keys(1 << 20);
  ASSERT_TRUE(keys.set("a", "1").is_ok());
  EXPECT_FALSE(keys.wait_for(7, {"a"})) << "nothing to wait for";
  EXPECT_TRUE(keys.wait_for(7, {"a", "b", "c", "c"}));
  EXPECT_TRUE(keys.wait_for(8, {"c"}));
  ASSERT_TRUE(keys.set("b", "2").is_ok());
  EXPECT_TRUE(keys.take_ready().empty());
  ASSERT_TRUE(keys.set("c", "3").is_ok());
  std::vector<WaiterId> ready = keys.take_ready();
  std::sort(ready.begin(), ready.end());
  EXPECT_EQ(ready, (std::vector<WaiterId>{7, 8}));
  EXPECT_FALSE(keys.waiting(7));
}

TEST(KeySpace, ACancelledWaiterIsNotWoken) {
  KeySpace keys(1 << 20);
  EXPECT_TRUE(keys.wait_for(1, {"k"}));
  EXPECT_TRUE(keys.wait_for(2, {"k"}));
  keys.cancel_wait(1);
  ASSERT_TRUE(keys.set("k", "v").is_ok());
  EXPECT_EQ(keys.take_ready(), (std::vector<WaiterId>{2}));
}

TEST(KeySpace, QueuesPushPopAndWakeOneWaiterPerValue) {
  KeySpace keys(1 << 20);
  EXPECT_FALSE(keys.present_or_queued("q"));
  EXPECT_TRUE(keys.wait_for(1, {"q"}));
  EXPECT_TRUE(keys.wait_for(2, {"q"}));
  ASSERT_TRUE(keys.queue_push("q", "first").is_ok());
  EXPECT_EQ(keys.take_ready(), (std::vector<WaiterId>{1}));
  ASSERT_TRUE(keys.queue_push("q", "second").is_ok());
  EXPECT_EQ(keys.take_ready(), (std::vector<WaiterId>{2}));
  EXPECT_TRUE(keys.present_or_queued("q"));
  EXPECT_FALSE(keys.contains("q")) << "a queue is not a key";
  EXPECT_EQ(keys.queue_length("q"), 2u);
  EXPECT_EQ(**keys.queue_pop("q"), "first");
  EXPECT_EQ(**keys.queue_pop("q"), "second");
  EXPECT_FALSE(keys.queue_pop("q").has_value());
  EXPECT_EQ(keys.bytes_used(), 0u);
}

TEST(KeySpace, BarrierReleasesEveryoneWhenTheLastArrives) {
  KeySpace keys(1 << 20);
  EXPECT_FALSE(*keys.arrive_at_barrier(1, "b", 3));
  EXPECT_FALSE(*keys.arrive_at_barrier(2, "b", 3));
  EXPECT_TRUE(keys.take_ready().empty()) << "the count is stored without waking the barrier";
  EXPECT_TRUE(*keys.arrive_at_barrier(3, "b", 3));
  std::vector<WaiterId> ready = keys.take_ready();
  std::sort(ready.begin(), ready.end());
  EXPECT_EQ(ready, (std::vector<WaiterId>{1, 2}));
  EXPECT_EQ(*keys.find("b"), "3");
}

}  // namespace
}  // namespace partrain::rendezvous
