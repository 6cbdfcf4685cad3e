// analyze_collective_stats on hand-made traces: nccl-tests' algbw/busbw, arrival skew, size
// buckets, the window, desyncs, ops a member never recorded, and send/recv pairing. Every
// expected number is worked out in the comments.
#include "analyzers/collective_stats.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "analyzers/analysis_report.h"
#include "analyzers/stragglers.h"
#include "core/number_format.h"
#include "tests/unit/analyzers/collective_fixture.h"

namespace partrain::analyzers {
namespace {

using fixture::CollectiveTrace;
using fixture::Op;
using fixture::window;

TEST(CollectiveStatsTest, SizeBucketsArePowersOfTwo) {
  EXPECT_EQ(size_bucket(0), 0);
  EXPECT_EQ(size_bucket(1), 1);
  EXPECT_EQ(size_bucket(1000), 512);
  EXPECT_EQ(size_bucket(1024), 1024);
  EXPECT_EQ(size_bucket(1500), 1024);
  EXPECT_EQ(size_bucket(int64_t{1} << 30), int64_t{1} << 30);
}

// Two all-reduces of 1 MiB on 4 ranks, 1 ms each: algbw = 1048576 B / 1 ms = 1.048576 GB/s,
// busbw = algbw x 2(4-1)/4 = 1.572864 GB/s. Skews: seq 0 starts at 1000, 1100, 1200, 1500
// (500 ns), seq 1 at 10000, 12000, 10000, 10000 (2000 ns): p50 1250 ns, p99 500 + 0.99 x 1500.
TEST(CollectiveStatsTest, AllReduceBusbwAndSkewOnFourRanks) {
  CollectiveTrace trace("busbw");
  const int64_t starts[2][4] = {{1000, 1100, 1200, 1500}, {10000, 12000, 10000, 10000}};
  for (uint64_t seq = 0; seq < 2; ++seq) {
    for (int rank = 0; rank < 4; ++rank) trace.add({.rank = rank, .seq = seq,
                                                     .start_ns = starts[seq][rank]});
  }
  auto report = analyze_collective_stats(trace.finish(), window({0, 1, 2, 3}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->rows.size(), 1u);
  const CollectiveStatsRow& row = report->rows[0];
  EXPECT_EQ(row.comm_id, "dp0");
  EXPECT_EQ(row.op, "all_reduce");
  EXPECT_EQ(row.size_bucket, 1048576);
  EXPECT_EQ(row.group_size, 4);
  EXPECT_EQ(row.count, 8);
  EXPECT_EQ(row.bytes, 8 * 1048576);
  EXPECT_DOUBLE_EQ(row.time_p50_ms, 1.0);
  EXPECT_DOUBLE_EQ(row.time_p99_ms, 1.0);
  EXPECT_NEAR(row.algbw_gbps, 1.048576, 1e-9);
  EXPECT_NEAR(row.busbw_gbps, 1.572864, 1e-9);
  EXPECT_EQ(row.matched, 2);
  EXPECT_NEAR(row.skew_p50_ms, 0.00125, 1e-12);
  EXPECT_NEAR(row.skew_p99_ms, (500 + 0.99 * 1500) / 1e6, 1e-12);
  EXPECT_EQ(report->groups, 2);
  EXPECT_TRUE(report->desyncs.empty());
  EXPECT_TRUE(report->missing.empty());
  EXPECT_TRUE(collective_stats_findings(*report).empty());
  const std::string text = format_collective_stats(*report);
  EXPECT_NE(text.find("1.57 GB/s"), std::string::npos) << text;
  // One op's size and the total of all of them, both as byte sizes (was "size (B)" 1048576
  // beside "bytes" 8.00 MiB).
  EXPECT_NE(text.find("1.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("8.00 MiB"), std::string::npos) << text;
  EXPECT_EQ(text.find("size (B)"), std::string::npos) << text;
  EXPECT_NE(text.find(" size "), std::string::npos) << text;
  EXPECT_NE(text.find(" total "), std::string::npos) << text;
  EXPECT_EQ(collective_stats_json(*report)[0]["busbw_gbps"].get<double>(),
            row.busbw_gbps);
  EXPECT_EQ(collective_stats_json(*report)[0]["skew_p50_ms"].get<double>(), row.skew_p50_ms);
}

// Ops without a recorded size (a Kineto trace profiled without record_shapes) have unknown
// bytes and bandwidth: "-" and null, with a line saying how to record them, never "0 B" at
// "0 B/s". A 12-byte broadcast shows 12 B, not its bucket's 8 B.
// Rows list communicators in counting order: tp 2 before tp 10 (byte order put "color10" first).
TEST(CollectiveStatsTest, CommunicatorsInCountingOrder) {
  CollectiveTrace trace("counting");
  for (const char* comm : {"world/split0/color10", "world/split0/color2"}) {
    for (int rank = 0; rank < 2; ++rank) trace.add({.rank = rank, .comm = comm, .group = {0, 1}});
  }
  auto report = analyze_collective_stats(trace.finish(), window({0, 1}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->rows.size(), 2u);
  EXPECT_EQ(report->rows[0].comm_id, "world/split0/color2");
  EXPECT_EQ(report->rows[1].comm_id, "world/split0/color10");
}

TEST(CollectiveStatsTest, UnknownSizesAreUnknownNotZero) {
  CollectiveTrace trace("unsized");
  for (int rank = 0; rank < 2; ++rank) {
    // As a Kineto trace without record_shapes has them: no size, no dtype.
    trace.add(
        {.rank = rank, .seq = 0, .dtype = "other", .bytes = 0, .start_ns = 1000, .group = {0, 1}});
    trace.add({.rank = rank,
               .seq = 1,
               .op = "broadcast",
               .bytes = 12,
               .start_ns = 5000,
               .group = {0, 1}});
  }
  auto report = analyze_collective_stats(trace.finish(), window({0, 1}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  const std::string text = format_collective_stats(*report);
  EXPECT_EQ(text.find(" 0 B "), std::string::npos) << text;
  EXPECT_EQ(text.find("0 B/s"), std::string::npos) << text;
  EXPECT_NE(text.find("size -: the trace holds no message size"), std::string::npos) << text;
  EXPECT_NE(text.find(" 12 B "), std::string::npos) << text;
  const nlohmann::json rows = collective_stats_json(*report);
  ASSERT_EQ(rows.size(), 2u);
  for (const nlohmann::json& row : rows) {
    const bool unsized = row["op"] == "all_reduce";
    EXPECT_EQ(row["busbw_gbps"].is_null(), unsized) << row;
    EXPECT_EQ(row["bytes"].is_null(), unsized) << row;
    EXPECT_EQ(row["size_bucket_bytes"].is_null(), unsized) << row;  // not a size bucket of 0
    if (!unsized) EXPECT_EQ(row["size_bytes"], 12) << row;
  }
}

// An import of traces profiled with record_shapes=True whose op the import could not size (a
// gloo all_reduce_coalesced it did not pair with its transfer): the note had told the user to
// turn on record_shapes, which was on.
TEST(CollectiveStatsTest, UnknownSizesOfATraceThatRecordedShapesDoNotAskForThem) {
  CollectiveTrace trace("shaped", R"({"imported_from": "kineto", "record_shapes": true})");
  for (int rank = 0; rank < 2; ++rank) {
    trace.add(
        {.rank = rank, .seq = 0, .dtype = "other", .bytes = 0, .start_ns = 1000, .group = {0, 1}});
  }
  auto report = analyze_collective_stats(trace.finish(), window({0, 1}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_TRUE(report->shapes_recorded);
  const std::string text = format_collective_stats(*report);
  EXPECT_NE(text.find("size -: the trace holds no message size for these ops (the profiler "
                      "recorded shapes, but the import found no dtype or transfer that sizes "
                      "them)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("record_shapes=True"), std::string::npos) << text;
}

// A collective of empty tensors (PowerSGD's all_reduce of a 0-element tensor) has a known size,
// 0 B: analyze showed "-" with the note that a profiler trace needs record_shapes. Its bandwidth
// stays unknown: nothing moved.
TEST(CollectiveStatsTest, AnEmptyCollectiveIsZeroBytesNotUnknown) {
  CollectiveTrace trace("empty");
  for (int rank = 0; rank < 2; ++rank) {
    trace.add({.rank = rank, .seq = 0, .bytes = 0, .start_ns = 1000, .group = {0, 1}});
  }
  auto report = analyze_collective_stats(trace.finish(), window({0, 1}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  const std::string text = format_collective_stats(*report);
  EXPECT_EQ(text.find("size -"), std::string::npos) << text;
  EXPECT_NE(text.find(" 0 B      2 "), std::string::npos) << text;  // size, count
  EXPECT_EQ(text.find("B/s"), std::string::npos) << text;
  const nlohmann::json rows = collective_stats_json(*report);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["size_bytes"], 0) << rows[0];
  EXPECT_EQ(rows[0]["bytes"], 0) << rows[0];
  EXPECT_TRUE(rows[0]["busbw_gbps"].is_null()) << rows[0];
}

// An all_to_all with split sizes moves a size of each rank's own: matched, no desync (a mixture
// of experts' dispatch is uneven by nature); an all_reduce of two sizes is one.
TEST(CollectiveStatsTest, UnevenAllToAllIsNoDesync) {
  CollectiveTrace trace("uneven");
  for (int rank = 0; rank < 2; ++rank) {
    trace.add({.rank = rank,
               .seq = 0,
               .op = "all_to_all",
               .bytes = 12u * (rank + 1),
               .start_ns = 1000,
               .group = {0, 1}});
  }
  auto report = analyze_collective_stats(trace.finish(), window({0, 1}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_TRUE(report->desyncs.empty());
  int64_t matched = 0;
  for (const CollectiveStatsRow& row : report->rows) matched += row.matched;
  EXPECT_EQ(matched, 1);
}

// Ops issued but never completed in the window (a functional collective waited from C++): no
// time, size or bandwidth, said so, never "0 ms" at "0 B/s".
TEST(CollectiveStatsTest, OpsThatNeverCompletedHaveNoTime) {
  CollectiveTrace trace("started");
  for (int rank = 0; rank < 2; ++rank) {
    trace.add({.rank = rank,
               .seq = 0,
               .op = "reduce_scatter",
               .bytes = 128,
               .start_ns = 1000 + rank * 2'000'000,
               .group = {0, 1},
               .state = profiler::CollectiveState::kStarted});
  }
  auto report = analyze_collective_stats(trace.finish(), window({0, 1}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->rows.size(), 1u);
  EXPECT_EQ(report->rows[0].count, 0);
  const std::string text = format_collective_stats(*report);
  EXPECT_EQ(text.find(" 0 ms"), std::string::npos) << text;
  EXPECT_EQ(text.find("0 B/s"), std::string::npos) << text;
  EXPECT_NE(text.find("count 0: issued in the window, none completed there"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("size -: the trace holds no message size"), std::string::npos) << text;
  EXPECT_TRUE(collective_stats_json(*report)[0]["time_p50_ms"].is_null());
}

// A row none of whose groups matched (one member recorded) has no skew: "-" and null alike.
TEST(CollectiveStatsTest, UnmatchedRowsHaveNoSkew) {
  CollectiveTrace trace("alone");
  trace.add({.rank = 0, .seq = 0, .start_ns = 1000, .group = {0, 1}});
  auto report = analyze_collective_stats(trace.finish(), window({0, 1}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->rows.size(), 1u);
  EXPECT_EQ(report->rows[0].matched, 0);
  const nlohmann::json row = collective_stats_json(*report)[0];
  EXPECT_TRUE(row["skew_p50_ms"].is_null()) << row;
  EXPECT_TRUE(row["skew_p99_ms"].is_null()) << row;
}

// A slow CPU run's 4-byte all-reduce over 1 ms moves 4 KB/s: printed "0.000004 GB/s" before.
TEST(CollectiveStatsTest, SlowBandwidthInTheUnitThatFits) {
  CollectiveTrace trace("slow");
  for (int rank = 0; rank < 2; ++rank) {
    trace.add({.rank = rank, .seq = 0, .bytes = 4, .start_ns = 1000, .group = {0, 1}});
  }
  auto report = analyze_collective_stats(trace.finish(), window({0, 1}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->rows.size(), 1u);
  const std::string text = format_collective_stats(*report);
  EXPECT_NE(text.find(format_bandwidth(report->rows[0].algbw_gbps * 1e9)), std::string::npos)
      << text;
  EXPECT_NE(text.find(" KB/s"), std::string::npos) << text;
  EXPECT_EQ(text.find("0.000"), std::string::npos) << text;
}

// The GPU span wins over the host duration: 4 MiB all-gathers on 2 ranks, 2 ms on the GPU
// (10 ms on the host): algbw = 4194304 / 2 ms = 2.097152 GB/s, busbw x (2-1)/2 = 1.048576.
TEST(CollectiveStatsTest, GpuTimeWinsOverHostDuration) {
  CollectiveTrace trace("gpu_time");
  for (int rank = 0; rank < 2; ++rank) {
    trace.add({.rank = rank, .comm = "tp0", .op = "all_gather", .bytes = 4u << 20,
               .start_ns = 100, .dur_ns = 10'000'000, .group = {0, 1},
               .gpu_start_ns = 1'000, .gpu_end_ns = 2'001'000});
  }
  auto report = analyze_collective_stats(trace.finish(), window({0, 1}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->rows.size(), 1u);
  EXPECT_DOUBLE_EQ(report->rows[0].time_p50_ms, 2.0);
  EXPECT_NEAR(report->rows[0].algbw_gbps, 2.097152, 1e-9);
  EXPECT_NEAR(report->rows[0].busbw_gbps, 1.048576, 1e-9);
  EXPECT_DOUBLE_EQ(report->rows[0].skew_p50_ms, 0.0);
}

// Only analysed ranks' ops that start inside their span are counted; buckets split by size.
TEST(CollectiveStatsTest, WindowAndSizeBucketsSplitRows) {
  CollectiveTrace trace("window");
  for (int rank = 0; rank < 2; ++rank) {
    trace.add({.rank = rank, .seq = 0, .bytes = 1000, .start_ns = 100, .group = {0, 1}});
    trace.add({.rank = rank, .seq = 1, .bytes = 1500, .start_ns = 5'000, .group = {0, 1}});
    trace.add({.rank = rank, .seq = 2, .bytes = 4096, .start_ns = 50'000, .group = {0, 1}});
  }
  // Rank 1 alone, from 1000 to 60000 ns: seq 1 and 2 on rank 1.
  auto report = analyze_collective_stats(trace.finish(), window({1}, 1'000, 60'000));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->rows.size(), 2u);
  EXPECT_EQ(report->rows[0].size_bucket, 1024);
  EXPECT_EQ(report->rows[0].count, 1);
  EXPECT_EQ(report->rows[0].bytes, 1500);
  EXPECT_EQ(report->rows[1].size_bucket, 4096);
  EXPECT_EQ(report->rows[1].count, 1);
  EXPECT_EQ(report->ops, 2);
  EXPECT_EQ(report->groups, 2);
}

// Rank 1 does an all-gather where ranks 0,2 and 3 all-reduce, at seq 5 of dp0.
TEST(CollectiveStatsTest, DesyncAtSeqFiveNamesRankAndOps) {
  CollectiveTrace trace("desync");
  for (uint64_t seq = 0; seq < 8; ++seq) {
    for (int rank = 0; rank < 4; ++rank) {
      const bool odd_one = seq == 5 && rank == 1;
      trace.add({.rank = rank, .seq = seq, .op = odd_one ? "all_gather" : "all_reduce",
                 .bytes = 4096, .start_ns = static_cast<int64_t>(seq) * 1'000'000});
    }
  }
  auto report = analyze_collective_stats(trace.finish(), window({0, 1, 2, 3}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->desyncs.size(), 1u);
  EXPECT_EQ(report->desyncs[0].comm_id, "dp0");
  EXPECT_EQ(report->desyncs[0].seq, 5);
  EXPECT_EQ(report->desyncs[0].later_mismatches, 0);
  ASSERT_EQ(report->desyncs[0].members.size(), 4u);
  EXPECT_EQ(report->desyncs[0].members[1].op, "all_gather");
  std::vector<Finding> findings = collective_stats_findings(*report);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, "desync");
  EXPECT_EQ(findings[0].severity, Severity::kCritical);
  EXPECT_EQ(findings[0].rank, 1);
  EXPECT_NE(findings[0].evidence.find("seq 5"), std::string::npos) << findings[0].evidence;
  EXPECT_NE(findings[0].evidence.find("rank 1 did all_gather of 4096 B"), std::string::npos)
      << findings[0].evidence;
  EXPECT_NE(findings[0].evidence.find("ranks 0,2,3 did all_reduce of 4096 B"), std::string::npos)
      << findings[0].evidence;
  // The desynced group gives no skew: 7 matched groups, not 8.
  ASSERT_EQ(report->rows.size(), 2u);  // all_gather and all_reduce rows
  EXPECT_EQ(report->rows[1].op, "all_reduce");
  EXPECT_EQ(report->rows[1].matched, 7);
}

// c10d's names diverge when only some ranks call new_group(..., use_local_synchronization=True):
// on 4 ranks, ranks 0 and 3 each named a different group "2" (0's is [0,2], 3's is [1,3]), and
// rank 2 and rank 1 recorded nothing under it. analyze blamed rank 2 ("never recorded ... that
// ranks 0,3 recorded", a crash or a hang) for a group it never belonged to; it now says that one
// id holds groups of different members, each rank's list, and blames no one.
TEST(CollectiveStatsTest, OneIdRecordedWithDifferentMembersIsSaidNotBlamedOnARank) {
  CollectiveTrace trace("members_differ");
  for (uint64_t seq = 0; seq < 8; ++seq) {
    const int64_t start = static_cast<int64_t>(seq) * 1'000'000;
    trace.add({.rank = 0, .comm = "undefined:2", .seq = seq, .start_ns = start, .group = {0, 2}});
    trace.add({.rank = 3, .comm = "undefined:2", .seq = seq, .start_ns = start, .group = {1, 3}});
  }
  auto report = analyze_collective_stats(trace.finish(), window({0, 1, 2, 3}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_TRUE(report->missing.empty()) << report->missing.front().rank;
  EXPECT_EQ(report->missing_total, 0);
  ASSERT_EQ(report->conflicts.size(), 1u);
  EXPECT_EQ(report->conflicts[0].comm_id, "undefined:2");
  EXPECT_EQ(report->conflicts[0].members, (std::map<int, std::string>{{0, "0,2"}, {3, "1,3"}}));
  std::vector<Finding> findings = collective_stats_findings(*report);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, "group_members_differ");
  EXPECT_FALSE(findings[0].rank.has_value());
  EXPECT_EQ(findings[0].evidence,
            "ranks recorded communicator undefined:2 with different members: rank 0 with "
            "members 0,2; rank 3 with members 1,3");
  EXPECT_NE(format_collective_stats(*report).find("  members differ: ranks recorded "
                                                  "communicator undefined:2"),
            std::string::npos);
  // A communicator whose members agree is still judged: rank 1 missing from dp0 is blamed.
  CollectiveTrace agreeing("members_agree");
  agreeing.add({.rank = 0, .seq = 0, .group = {0, 1}});
  auto missing = analyze_collective_stats(agreeing.finish(), window({0, 1}));
  ASSERT_TRUE(missing.is_ok()) << missing.status().message();
  EXPECT_TRUE(missing->conflicts.empty());
  ASSERT_EQ(missing->missing.size(), 1u);
  EXPECT_EQ(missing->missing[0].rank, 1);
}

// A failed run's decisive collectives come after its last whole step, outside the window the
// figures describe: rank 1 never issued seq 3, and at seq 4 it sent another size. Both are judged
// (they had been skipped with the group), while the figures keep to the window's seqs 0-2.
TEST(CollectiveStatsTest, AgreementIsJudgedAfterTheWindowToo) {
  CollectiveTrace trace("tail");
  for (uint64_t seq = 0; seq < 5; ++seq) {
    for (int rank = 0; rank < 4; ++rank) {
      if (rank == 1 && seq == 3) continue;
      trace.add({.rank = rank,
                 .seq = seq,
                 .bytes = rank == 1 && seq == 4 ? 64 : 4,
                 .start_ns = static_cast<int64_t>(seq) * 1'000'000});
    }
  }
  // The window: seqs 0-2 (the steps that ended).
  auto report = analyze_collective_stats(trace.finish(), window({0, 1, 2, 3}, 0, 2'500'000));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_EQ(report->groups, 3);
  EXPECT_EQ(report->ops, 12);
  ASSERT_EQ(report->missing.size(), 1u);
  EXPECT_EQ(report->missing[0].rank, 1);
  EXPECT_EQ(report->missing[0].first_seq, 3);
  ASSERT_EQ(report->desyncs.size(), 1u);
  EXPECT_EQ(report->desyncs[0].seq, 4);
}

// Rank 3 skips seq 2 of dp0 but records seq 3: seq 2 is missing whatever the run's state. It
// stops after seq 3 while the others go on to seq 5: seqs 4-5 are missing once the run is over,
// and not yet while it runs (rank 3 may still get there).
TEST(CollectiveStatsTest, MissingRankIsFoundOnceItCannotStillArrive) {
  for (profiler::RunStatus status : {profiler::RunStatus::kCompleted,
                                     profiler::RunStatus::kRunning}) {
    CollectiveTrace trace(status == profiler::RunStatus::kRunning ? "missing_live" : "missing");
    for (uint64_t seq = 0; seq < 6; ++seq) {
      for (int rank = 0; rank < 4; ++rank) {
        if (rank == 3 && (seq == 2 || seq > 3)) continue;
        // 10 s apart: past the time a live trace takes to hold every rank's record.
        trace.add(
            {.rank = rank, .seq = seq, .start_ns = static_cast<int64_t>(seq) * 10'000'000'000});
      }
    }
    auto report = analyze_collective_stats(trace.finish(status), window({0, 1, 2, 3}));
    ASSERT_TRUE(report.is_ok()) << report.status().message();
    const bool ended = status != profiler::RunStatus::kRunning;
    ASSERT_EQ(report->missing.size(), ended ? 2u : 1u);
    EXPECT_EQ(report->missing[0].rank, 3);
    EXPECT_EQ(report->missing[0].first_seq, 2);
    EXPECT_EQ(report->missing[0].count, 1);
    EXPECT_EQ(report->missing[0].present, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(report->missing_total, ended ? 3 : 1);
    std::vector<Finding> findings = collective_stats_findings(*report);
    ASSERT_FALSE(findings.empty());
    EXPECT_EQ(findings[0].kind, "missing_collective");
    EXPECT_EQ(findings[0].rank, 3);
    EXPECT_EQ(findings[0].evidence,
              "rank 3 never recorded all_reduce seq 2 of communicator dp0 that ranks 0-2 "
              "recorded");
    if (ended) {
      EXPECT_EQ(report->missing[1].first_seq, 4);
      EXPECT_EQ(report->missing[1].last_seq, 5);
      EXPECT_NE(findings[1].evidence.find("seqs 4-5 (2 ops)"), std::string::npos);
    }
  }
}

// A 4-rank run of 6 all-reduces without the (rank, seq) records `skipped` leaves out, `stat` beside
// them, analysed whole.
StatusOr<AnalysisReport> run_of_six_without(const std::string& name,
                                            const std::function<bool(int, uint64_t)>& skipped,
                                            profiler::StatEvent stat) {
  CollectiveTrace trace(name);
  for (uint64_t seq = 0; seq < 6; ++seq) {
    for (int rank = 0; rank < 4; ++rank) {
      if (skipped(rank, seq)) continue;
      trace.add({.rank = rank, .seq = seq, .start_ns = static_cast<int64_t>(seq) * 1'000'000});
    }
  }
  trace.add(std::move(stat));
  return analyze_run(trace.finish(), window({0, 1, 2, 3}));
}

// The report's missing_collective findings by rank.
std::map<int, const Finding*> missing_by_rank(const AnalysisReport& report) {
  std::map<int, const Finding*> missing;
  for (const Finding& f : report.findings) {
    if (f.kind == "missing_collective") missing[f.rank.value_or(-1)] = &f;
  }
  return missing;
}

// A rank whose recorder dropped events (a collector held up by a locked trace file, full
// buffers) "never recorded" collectives the trace lost: analyze called them critical, blaming
// the rank ("crashed, hung or skipped the op"). They are warnings now that name the loss; a rank
// the trace lost nothing of is still blamed.
TEST(CollectiveStatsTest, CollectivesMissingOnARankWhoseEventsWereLostAreBlamedOnTheLoss) {
  const auto report = run_of_six_without(
      "lost",
      [](int rank, uint64_t seq) { return (rank == 3 && seq == 2) || (rank == 1 && seq == 4); },
      {"recorder_dropped_events", 3, 40, profiler::StatSeverity::kDataLoss,
       "events the rank lost before they reached the collector"});
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  std::map<int, const Finding*> missing = missing_by_rank(*report);
  ASSERT_EQ(missing.size(), 2u);
  ASSERT_TRUE(missing.count(3));
  EXPECT_EQ(missing[3]->severity, Severity::kWarning);
  EXPECT_EQ(missing[3]->evidence,
            "rank 3 never recorded all_reduce seq 2 of communicator dp0 that ranks 0-2 "
            "recorded; the trace lost events of rank 3: recorder_dropped_events = 40 on rank 3 "
            "(events the rank lost before they reached the collector)");
  EXPECT_NE(missing[3]->advice.find("likely a record lost from the trace"), std::string::npos);
  ASSERT_TRUE(missing.count(1));
  EXPECT_EQ(missing[1]->severity, Severity::kCritical);
  EXPECT_NE(missing[1]->advice.find("rank 1 crashed, hung or skipped the op"), std::string::npos);
}

// A SIGKILLed rank's unshipped records die with it: its connection ended without a goodbye
// (collector_unclean_disconnects, an info stat), and analyze said it "crashed, hung or skipped the
// op" with no hint that its last ops may only be unshipped. The finding says so now and stays
// critical (a rank that skipped the op and was then killed reads the same); a rank whose
// connection ended cleanly is blamed as before.
TEST(CollectiveStatsTest, CollectivesMissingOnARankWhoseConnectionEndedUncleanMayBeUnshipped) {
  const auto report = run_of_six_without(
      "unclean",
      [](int rank, uint64_t seq) { return (rank == 3 && seq >= 4) || (rank == 1 && seq == 2); },
      {"collector_unclean_disconnects", 3, 1, profiler::StatSeverity::kInfo,
       "connections of the rank that ended without a goodbye"});
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  std::map<int, const Finding*> missing = missing_by_rank(*report);
  ASSERT_EQ(missing.size(), 2u);
  ASSERT_TRUE(missing.count(3));
  EXPECT_EQ(missing[3]->severity, Severity::kCritical);
  EXPECT_NE(missing[3]->evidence.find("rank 3's connection to the collector ended without a "
                                      "goodbye"),
            std::string::npos)
      << missing[3]->evidence;
  EXPECT_NE(missing[3]->evidence.find("its last collectives may be missing though it issued them"),
            std::string::npos);
  EXPECT_NE(missing[3]->advice.find("rank 3 was killed or crashed"), std::string::npos)
      << missing[3]->advice;
  ASSERT_TRUE(missing.count(1));
  EXPECT_EQ(missing[1]->severity, Severity::kCritical);
  EXPECT_EQ(missing[1]->evidence.find("goodbye"), std::string::npos) << missing[1]->evidence;
  EXPECT_NE(missing[1]->advice.find("rank 1 crashed, hung or skipped the op"), std::string::npos);
}

// A hang's missing collective names the step the others were in (their rows carry it): the
// finding said only the seq, and the reader had to look the step up in the trace.
TEST(CollectiveStatsTest, AMissingCollectiveNamesTheStepTheOthersWereIn) {
  CollectiveTrace trace("missing_step");
  for (uint64_t seq = 0; seq < 6; ++seq) {
    for (int rank = 0; rank < 3; ++rank) {
      if (rank == 1 && seq >= 4) continue;
      trace.add({.rank = rank,
                 .seq = seq,
                 .start_ns = static_cast<int64_t>(seq) * 1'000'000,
                 .group = {0, 1, 2},
                 .step = static_cast<int64_t>(seq / 2)});
    }
  }
  auto report = analyze_collective_stats(trace.finish(), window({0, 1, 2}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->missing.size(), 1u);
  EXPECT_EQ(report->missing[0].step, 2);
  const std::vector<Finding> findings = collective_stats_findings(*report);
  ASSERT_FALSE(findings.empty());
  EXPECT_NE(findings[0].evidence.find("rank 1 never recorded all_reduce seqs 4-5 (2 ops, from step "
                                      "2) of communicator"),
            std::string::npos)
      << findings[0].evidence;
  EXPECT_EQ(collective_matching_json(*report)["missing"][0]["step"], 2);
}

// A run of missing seqs with different ops names each: an all_reduce then a barrier is not
// "all_reduce seqs 0-1".
TEST(CollectiveStatsTest, AMissingRunOfSeveralOpsNamesEach) {
  CollectiveTrace trace("missing_ops");
  for (uint64_t seq = 0; seq < 3; ++seq) {
    for (int rank = 0; rank < 2; ++rank) {
      if (rank == 1 && seq > 0) continue;
      trace.add({.rank = rank,
                 .seq = seq,
                 .op = seq == 2 ? "barrier" : "all_reduce",
                 .start_ns = static_cast<int64_t>(seq) * 10'000'000'000,
                 .group = {0, 1}});
    }
  }
  auto report = analyze_collective_stats(trace.finish(), window({0, 1}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->missing.size(), 1u);
  EXPECT_EQ(report->missing[0].ops, (std::vector<std::string>{"all_reduce", "barrier"}));
  const std::vector<Finding> findings = collective_stats_findings(*report);
  ASSERT_FALSE(findings.empty());
  EXPECT_NE(findings[0].evidence.find("rank 1 never recorded all_reduce and barrier seqs 1-2 (2 "
                                      "ops)"),
            std::string::npos)
      << findings[0].evidence;
  EXPECT_EQ(collective_matching_json(*report)["missing"][0]["ops"][1], "barrier");
}

// While a run is live, a rank's records reach the trace per thread and per flush: its seq 3 may
// be stored before its seq 2. A gap whose later record started within a few seconds is not yet
// missing (top showed healthy runs with a critical missing_collective); once the run is over,
// it is.
TEST(CollectiveStatsTest, ALiveGapIsMissingOnlyOnceItHasSettled) {
  for (profiler::RunStatus status :
       {profiler::RunStatus::kRunning, profiler::RunStatus::kCompleted}) {
    CollectiveTrace trace(status == profiler::RunStatus::kRunning ? "gap_live" : "gap_ended");
    for (uint64_t seq = 0; seq < 4; ++seq) {
      for (int rank = 0; rank < 2; ++rank) {
        if (rank == 1 && seq == 2) continue;  // not stored yet
        trace.add({.rank = rank,
                   .seq = seq,
                   .start_ns = static_cast<int64_t>(seq) * 1'000'000,
                   .group = {0, 1}});
      }
    }
    auto report = analyze_collective_stats(trace.finish(status), window({0, 1}));
    ASSERT_TRUE(report.is_ok()) << report.status().message();
    EXPECT_EQ(report->missing_total, status == profiler::RunStatus::kRunning ? 0 : 1);
  }
}

// Sends pair with the recv whose rank is their peer: 0 -> 1 pairs (4 KiB in 1 ms each side:
// algbw = busbw = 4096 B / 1 ms = 0.004096 GB/s, skew 300 ns); 2 -> 3 has no recv; a recv of
// a different size is a desync.
TEST(CollectiveStatsTest, SendRecvMatchAsPairs) {
  CollectiveTrace trace("p2p");
  trace.add({.rank = 0, .comm = "pp", .op = "send", .bytes = 4096, .start_ns = 1'000,
             .group = {0, 1, 2, 3}, .peer = 1});
  trace.add({.rank = 1, .comm = "pp", .op = "recv", .bytes = 4096, .start_ns = 1'300,
             .group = {0, 1, 2, 3}, .peer = 0});
  trace.add({.rank = 2, .comm = "pp", .op = "send", .bytes = 4096, .start_ns = 1'000,
             .group = {0, 1, 2, 3}, .peer = 3});
  trace.add({.rank = 0, .comm = "pp", .seq = 1, .op = "send", .bytes = 4096, .start_ns = 9'000,
             .group = {0, 1, 2, 3}, .peer = 1});
  trace.add({.rank = 1, .comm = "pp", .seq = 1, .op = "recv", .bytes = 8192, .start_ns = 9'000,
             .group = {0, 1, 2, 3}, .peer = 0});
  auto report = analyze_collective_stats(trace.finish(), window({0, 1, 2, 3}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->missing.size(), 1u);
  EXPECT_EQ(report->missing[0].rank, 3);
  EXPECT_EQ(report->missing[0].ops.front(), "recv");
  EXPECT_EQ(report->missing[0].present, std::vector<int>{2});
  ASSERT_EQ(report->desyncs.size(), 1u);
  EXPECT_EQ(report->desyncs[0].seq, 1);
  const CollectiveStatsRow* send = nullptr;
  for (const CollectiveStatsRow& row : report->rows) {
    if (row.op == "send" && row.size_bucket == 4096) send = &row;
  }
  ASSERT_NE(send, nullptr);
  EXPECT_EQ(send->count, 3);  // three sends of 4 KiB
  EXPECT_NEAR(send->algbw_gbps, 0.004096, 1e-12);
  EXPECT_NEAR(send->busbw_gbps, 0.004096, 1e-12);
  EXPECT_EQ(send->matched, 1);
  EXPECT_NEAR(send->skew_p50_ms, 0.0003, 1e-12);
}

// `partrain analyze` feeds the statistics and the stragglers from one read of the groups; each
// must come out as its own pass gives it, over two communicators (matching state is per
// communicator), a desync, a missing member and a rank that starts late.
TEST(CollectiveStatsTest, SharedPassGivesWhatSeparatePassesGive) {
  CollectiveTrace trace("shared_pass");
  for (uint64_t seq = 0; seq < 40; ++seq) {
    for (int rank = 0; rank < 4; ++rank) {
      if (seq == 7 && rank == 2) continue;  // rank 2 never records seq 7
      const int64_t start = static_cast<int64_t>(seq) * 10'000'000 + (rank == 3 ? 3'000'000 : 0);
      trace.add({.rank = rank, .seq = seq, .bytes = seq == 30 && rank == 1 ? 512u : 4096u,
                 .start_ns = start});
      trace.add({.rank = rank, .comm = "tp", .seq = seq, .op = "all_gather",
                 .start_ns = start + 1'000'000 + 1'000 * rank});
    }
  }
  const profiler::SqliteDb& db = trace.finish();
  const AnalysisWindow w = window({0, 1, 2, 3}, 0, 400'000'000);  // one 400 ms "step"
  auto alone_stats = analyze_collective_stats(db, w);
  auto alone_stragglers = analyze_stragglers(db, w);
  ASSERT_TRUE(alone_stats.is_ok()) << alone_stats.status().message();
  ASSERT_TRUE(alone_stragglers.is_ok()) << alone_stragglers.status().message();

  CollectiveStatsPass stats(true);
  StragglerPass stragglers;
  ASSERT_TRUE(
      for_each_collective_group(db, w, visit_all({stats.visitor(), stragglers.visitor()})).is_ok());
  const CollectiveStatsReport shared_stats = stats.finish();
  auto shared_stragglers = stragglers.finish(db, w);
  ASSERT_TRUE(shared_stragglers.is_ok()) << shared_stragglers.status().message();

  EXPECT_EQ(shared_stats.desyncs.size(), 1u);
  EXPECT_EQ(shared_stats.missing_total, 2);  // seq 7 on both communicators
  EXPECT_EQ(collective_stats_json(shared_stats), collective_stats_json(*alone_stats));
  EXPECT_EQ(collective_matching_json(shared_stats), collective_matching_json(*alone_stats));
  EXPECT_EQ(stragglers_json(*shared_stragglers), stragglers_json(*alone_stragglers));
  ASSERT_TRUE(shared_stragglers->straggler.has_value()) << stragglers_json(*shared_stragglers);
  EXPECT_EQ(*shared_stragglers->straggler, 3);
}

}  // namespace
}  // namespace partrain::analyzers
