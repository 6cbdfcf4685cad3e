// The flight-recorder dump's file form: a JSON round trip keeps every field, names outside the
// trace's vocabulary read as "other", and what is not a dump is refused; the stderr form lists
// the last entries and every unfinished one.
#include "profiler/flight/flight_dump.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace partrain::profiler {
namespace {

CollectiveEvent entry(uint64_t seq, CollectiveState state) {
  CollectiveEvent e;
  e.comm_id = "world/split1/color0";
  e.seq = seq;
  e.op = "all_reduce";
  e.dtype = "float";
  e.reduce_op = "sum";
  e.count = 1024;
  e.bytes = 4096;
  e.rank = 2;
  e.group_ranks = {0, 1, 2, 3};
  e.enqueue_ns = 1'000'000'000 + static_cast<int64_t>(seq) * 1'000'000;
  e.start_ns = e.enqueue_ns + 1000;
  e.end_ns = state == CollectiveState::kCompleted ? e.start_ns + 500'000 : 0;
  e.state = state;
  return e;
}

FlightDump sample() {
  FlightDump dump;
  dump.rank = 2;
  dump.trigger = DumpTrigger::kWatchdog;
  dump.reason = "all_reduce (comm world/split1/color0, seq 3) not completed after 2.0 s";
  dump.dumped_ns = 3'000'000'000;
  dump.total_recorded = 4;
  for (uint64_t seq = 0; seq < 3; ++seq)
    dump.entries.push_back(entry(seq, CollectiveState::kCompleted));
  dump.entries.push_back(entry(3, CollectiveState::kStarted));
  return dump;
}

TEST(FlightDump, JsonRoundTripKeepsEveryField) {
  const FlightDump dump = sample();
  auto back = flight_dump_from_json(flight_dump_to_json(dump));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->rank, 2);
  EXPECT_EQ(back->trigger, DumpTrigger::kWatchdog);
  EXPECT_EQ(back->reason, dump.reason);
  EXPECT_EQ(back->dumped_ns, dump.dumped_ns);
  EXPECT_EQ(back->total_recorded, 4u);
  ASSERT_EQ(back->entries.size(), 4u);
  const CollectiveEvent& e = back->entries[3];
  EXPECT_EQ(e.comm_id, "world/split1/color0");
  EXPECT_EQ(e.seq, 3u);
  EXPECT_EQ(e.op, "all_reduce");
  EXPECT_EQ(e.dtype, "float");
  EXPECT_EQ(e.reduce_op, "sum");
  EXPECT_EQ(e.count, 1024u);
  EXPECT_EQ(e.bytes, 4096u);
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.group_ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(e.enqueue_ns, dump.entries[3].enqueue_ns);
  EXPECT_EQ(e.start_ns, dump.entries[3].start_ns);
  EXPECT_EQ(e.state, CollectiveState::kStarted);
}

// A signal's dump after the program ended says so to the launcher; a dump of an older partrain,
// without the field, reads as one taken while the program ran.
TEST(FlightDump, AfterTheProgramsEndRoundTripsAndIsFalseWhenAbsent) {
  FlightDump dump = sample();
  dump.trigger = DumpTrigger::kSignal;
  dump.after_program_end = true;
  const std::string text = flight_dump_to_json(dump);
  auto back = flight_dump_from_json(text);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_TRUE(back->after_program_end);
  nlohmann::json older = nlohmann::json::parse(text);
  older.erase("after_program_end");
  back = flight_dump_from_json(older.dump());
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_FALSE(back->after_program_end);
}

TEST(FlightDump, UnknownNamesReadAsOtherAndJunkIsRefused) {
  FlightDump dump = sample();
  std::string json = flight_dump_to_json(dump);
  const std::string from = "\"op\":\"all_reduce\"";
  json.replace(json.find(from), from.size(), "\"op\":\"all_reduce_v2\"");
  auto back = flight_dump_from_json(json);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->entries[0].op, "other");
  EXPECT_EQ(flight_dump_from_json("{\"rank\": 1}").status().code(), StatusCode::kUnreadable);
  EXPECT_EQ(flight_dump_from_json("not json").status().code(), StatusCode::kUnreadable);
  EXPECT_EQ(flight_dump_from_json("{\"partrain_flight_dump\": 1, \"rank\": \"x\"}").status().code(),
            StatusCode::kUnreadable);
}

TEST(FlightDump, TextListsTheLastEntriesAndEveryUnfinishedOne) {
  FlightDump dump = sample();
  dump.entries.insert(dump.entries.begin(), entry(9, CollectiveState::kEnqueued));
  dump.total_recorded = 10;
  const std::string text = format_flight_dump(dump, 2);
  EXPECT_NE(text.find("flight recorder of rank 2 (watchdog: all_reduce (comm world/split1/color0, "
                      "seq 3) not completed after 2.0 s); 5 of its 10 operations kept, the last 2 "
                      "and every unfinished one:"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  dp 0 seq 9 all_reduce 4.00 KiB float enqueued"),
            std::string::npos)
      << text;                                                // old, but unfinished: always listed
  EXPECT_EQ(text.find("seq 0 "), std::string::npos) << text;  // old and completed: left out
  EXPECT_NE(text.find("seq 2 all_reduce 4.00 KiB float completed in"), std::string::npos) << text;
  EXPECT_NE(text.find("seq 3 all_reduce 4.00 KiB float started 2 s ago"), std::string::npos)
      << text;
}

// A PyTorch transfer's tag rides in its seq (T * 2^32 + n): the dump reads it back.
TEST(FlightDump, ATaggedTransferShowsItsNumberAndTag) {
  FlightDump dump = sample();
  CollectiveEvent send = entry((uint64_t{5} << 32) | 2, CollectiveState::kStarted);
  send.op = "send";
  send.peer = 1;
  dump.entries.push_back(send);
  const std::string text = format_flight_dump(dump, 2);
  EXPECT_NE(text.find("  dp 0 seq 2 (tag 5) send peer 1 4.00 KiB float started"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace partrain::profiler
