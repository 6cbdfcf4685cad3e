#include "profiler/import/kineto_import.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "tests/support/kineto_fixture.h"
#include "tests/support/kineto_import_run.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::profiler {
namespace {

namespace fs = std::filesystem;
using testing::KinetoFixture;
using testing::ScratchDir;
using testing::TraceQuery;

StatusOr<TraceImportSummary> import(std::vector<fs::path> inputs, const fs::path& output,
                                    std::string step_marker = {}) {
  return testing::import_kineto(std::move(inputs), output, std::move(step_marker));
}

std::vector<fs::path> fixture_files(const std::string& job) {
  return testing::kineto_fixture_files(job);
}

void expect_no_output(const fs::path& dir, const fs::path& output) {
  EXPECT_FALSE(fs::exists(output));
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().string().find(".import-"), std::string::npos) << entry.path();
  }
}

TEST(KinetoImport, DdpFixtureAllCollectivesMatchedOnTheDefaultGroup) {
  ScratchDir dir;
  const fs::path out = dir.path() / "ddp.db";
  auto summary = import(fixture_files("ddp"), out);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->world_size, 4);
  EXPECT_EQ(summary->ranks.size(), 4u);
  EXPECT_TRUE(summary->missing_ranks.empty());
  EXPECT_EQ(summary->unmatched_collectives, 0);
  TraceQuery trace(out);
  EXPECT_EQ(trace.rows("SELECT status, world_size, json_extract(config, '$.imported_from'), "
                       "json_extract(config, '$.backend') FROM runs"),
            "completed|4|kineto|gloo\n");
  EXPECT_EQ(trace.rows("SELECT rank, node, local_rank, host, device FROM ranks ORDER BY rank"),
            "0|0|0|vm|cpu\n1|0|1|vm|cpu\n2|0|2|vm|cpu\n3|0|3|vm|cpu\n");
  EXPECT_EQ(trace.rows("SELECT rank, group_concat(step) FROM (SELECT rank, step FROM steps "
                       "ORDER BY rank, step) GROUP BY rank"),
            "0|2,3\n1|2,3\n2|2,3\n3|2,3\n");
  // DDP's two buckets (520 and 2112 floats) each step, all four ranks in each group.
  EXPECT_EQ(trace.rows("SELECT comm_id, seq, op, dtype, count, bytes, group_size, group_ranks, "
                       "count(*), count(DISTINCT step) FROM collectives GROUP BY comm_id, seq "
                       "ORDER BY seq"),
            "default_pg:0|0|all_reduce|float|520|2080|4|0,1,2,3|4|1\n"
            "default_pg:0|1|all_reduce|float|2112|8448|4|0,1,2,3|4|1\n"
            "default_pg:0|2|all_reduce|float|520|2080|4|0,1,2,3|4|1\n"
            "default_pg:0|3|all_reduce|float|2112|8448|4|0,1,2,3|4|1\n");
  // A collective runs from c10d's issue to the end of gloo's transfer.
  EXPECT_EQ(trace.number("SELECT count(*) FROM collectives WHERE dur_ns <= 0 OR state != "
                         "'completed'"),
            0);
  EXPECT_GT(trace.number("SELECT count(*) FROM slices WHERE category = 'compute' AND name LIKE "
                         "'aten::%'"),
            0);
  EXPECT_GT(trace.number("SELECT count(*) FROM slices WHERE track LIKE '%pt_gloo_runloop%' AND "
                         "name = 'gloo:all_reduce'"),
            0);
  EXPECT_GT(trace.number("SELECT count(*) FROM memory_events WHERE category = 'other'"), 0);
  // Every slice of a step's span carries its step.
  EXPECT_EQ(trace.number("SELECT count(*) FROM slices s JOIN steps t ON t.rank = s.rank AND "
                         "s.ts_ns >= t.ts_ns AND s.ts_ns < t.ts_ns + t.dur_ns WHERE s.step IS NOT "
                         "t.step"),
            0);
}

TEST(KinetoImport, TwoGroupsFixtureMatchedThroughTheWorkerThreads) {
  ScratchDir dir;
  const fs::path out = dir.path() / "two.db";
  auto summary = import(fixture_files("two_groups"), out);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->unmatched_collectives, 0);
  TraceQuery trace(out);
  // Per step: the pair's all-reduces of 64 and 8 floats; the world's all-reduce of 256, all-gather
  // of 32, broadcast of 16 from rank 0 and all-reduce of 8.
  EXPECT_EQ(trace.rows("SELECT comm_id, op, count, group_ranks, count(DISTINCT seq), "
                       "count(*) / count(DISTINCT seq) FROM collectives "
                       "GROUP BY comm_id, op, count ORDER BY comm_id, op, count"),
            "default_pg:0|all_gather|32|0,1,2,3|2|4\n"
            "default_pg:0|all_reduce|8|0,1,2,3|2|4\n"
            "default_pg:0|all_reduce|256|0,1,2,3|2|4\n"
            "default_pg:0|broadcast|16|0,1,2,3|2|4\n"
            "pg:1|all_reduce|8|0,1|2|2\n"
            "pg:1|all_reduce|64|0,1|2|2\n"
            "pg:2|all_reduce|8|2,3|2|2\n"
            "pg:2|all_reduce|64|2,3|2|2\n");
  EXPECT_EQ(trace.rows("SELECT DISTINCT peer, bytes FROM collectives WHERE op = 'broadcast'"),
            "0|64\n");
  EXPECT_EQ(trace.rows("SELECT DISTINCT bytes FROM collectives WHERE op = 'all_gather'"), "512\n");
}

// Four ranks: the world, and two groups "1" and "2" of the same ranks 0 and 1 (new_group([0, 1])
// twice, as jobs that keep a second group for checkpoints do), every gloo op on one worker thread
// per rank (so the threads tell nothing). Per step all four all-reduce 256 floats on the world,
// then ranks 0 and 1 all-reduce 64 floats on group "1": the trace cannot tell it from "2".
std::vector<KinetoFixture> ambiguous_two_groups() {
  std::vector<KinetoFixture> ranks;
  for (int r = 0; r < 4; ++r) {
    KinetoFixture f(r, 4);
    if (r < 2) f.group("1", {0, 1}).group("2", {0, 1});
    f.thread_name(5000 + r, "thread 5000 (pt_gloo_runloop)");
    for (int step = 0; step < 2; ++step) {
      const double t = 1000.0 * (step + 1);
      f.step(step, t, 900);
      f.gloo_all_reduce(256, t + 10, t + 20, t + 100, 5000 + r);
      if (r < 2) f.gloo_all_reduce(64, t + 200, t + 210, t + 300, 5000 + r);
    }
    ranks.push_back(std::move(f));
  }
  return ranks;
}

TEST(KinetoImport, EqualSizedGroupsTheTraceCannotTellApartAreLeftUnmatchedAndSaid) {
  ScratchDir dir;
  const fs::path out = dir.path() / "amb.db";
  auto summary = import(testing::write_kineto_ranks(dir.path(), ambiguous_two_groups()), out);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  // Two steps x ranks 0 and 1 of the all-reduce of 64.
  EXPECT_EQ(summary->unmatched_collectives, 4);
  ASSERT_EQ(summary->warnings.size(), 2u);
  EXPECT_NE(summary->warnings.front().find("rank 0: 2 collectives left unmatched: 2: process "
                                           "groups '1' or '2' hold the same ranks"),
            std::string::npos)
      << summary->warnings.front();
  TraceQuery trace(out);
  EXPECT_EQ(trace.rows("SELECT comm_id, count, count(DISTINCT seq), count(*) FROM collectives "
                       "GROUP BY comm_id, count ORDER BY comm_id, count"),
            "default_pg:0|256|2|8\nunmatched:rank0|64|2|2\nunmatched:rank1|64|2|2\n");
  // Its size is known (both groups hold two ranks), its members are not.
  EXPECT_EQ(trace.rows("SELECT DISTINCT group_size, group_ranks IS NULL, bytes FROM collectives "
                       "WHERE comm_id LIKE 'unmatched%'"),
            "2|1|256\n");
  EXPECT_EQ(trace.rows("SELECT rank, value, severity FROM stats WHERE name = "
                       "'import_unmatched_collectives' ORDER BY rank"),
            "0|2|info\n1|2|info\n");
}

// Ranks 2 and 3 on host b, whose clock reads 1.5 ms ahead (and whose files count from a time
// base one second later); all-reduces whose transfers end together, within a few microseconds.
std::vector<KinetoFixture> two_hosts() {
  std::vector<KinetoFixture> ranks;
  const int64_t jitter_ns[4] = {0, 2000, -1000, 3000};
  for (int r = 0; r < 4; ++r) {
    KinetoFixture f(r, 4);
    const bool b = r >= 2;
    f.host(b ? "b" : "a");
    const double shift_us = b ? 1500.0 - 1'000'000.0 : 0;
    if (b) f.base_time_ns(1790857026000000000 + 1'000'000'000);
    for (int k = 0; k < 6; ++k) {
      const double t = 2'000'000.0 + 10'000.0 * (k + 1) + shift_us;
      f.gloo_all_reduce(16, t, t + 5 + r,
                        t + 500 + static_cast<double>(jitter_ns[r]) / 1000.0 + k * 0.001, 6000 + r);
    }
    ranks.push_back(std::move(f));
  }
  return ranks;
}

TEST(KinetoImport, HostsClocksAlignedByCollectivesThatEndTogether) {
  ScratchDir dir;
  const fs::path out = dir.path() / "hosts.db";
  auto summary = import(testing::write_kineto_ranks(dir.path(), two_hosts()), out);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  ASSERT_EQ(summary->ranks.size(), 4u);
  EXPECT_EQ(summary->ranks[0].clock.offset_ns, 0);
  EXPECT_EQ(summary->ranks[1].clock.offset_ns, 0);
  EXPECT_EQ(summary->ranks[2].clock.offset_ns, summary->ranks[3].clock.offset_ns);
  EXPECT_NEAR(static_cast<double>(summary->ranks[2].clock.offset_ns), -1'500'000, 5000);
  EXPECT_EQ(summary->ranks[2].clock.estimates, 6);
  TraceQuery trace(out);
  // Stored as native traces store it: the file's clock plus this reaches the timeline.
  const int64_t offset = trace.number("SELECT clock_offset_ns FROM ranks WHERE rank = 2");
  EXPECT_NEAR(static_cast<double>(offset), 1'000'000'000 - 1'500'000, 5000);
  EXPECT_LE(trace.number("SELECT clock_uncertainty_ns FROM ranks WHERE rank = 2"), 5000);
  EXPECT_EQ(trace.number("SELECT clock_uncertainty_ns FROM ranks WHERE rank = 0"), 0);
  // On the timeline the members end within the jitter, not 1.5 ms apart.
  EXPECT_LE(trace.number("SELECT max(spread) FROM (SELECT max(ts_ns + dur_ns) - min(ts_ns + "
                         "dur_ns) AS spread FROM collectives GROUP BY comm_id, seq)"),
            10'000);
}

// Rank 0's file from one run of a job and rank 1's from a run two hours later (each host writing
// its own). Their collectives pair up by sequence number, and the clock fit would line them up
// by shifting rank 1 two hours: the import says the files cannot be of one run, and so does the
// trace (a data-loss stat analyze reports; it had been said on import's stderr only, and analyze
// then called rank 1 a straggler by two hours).
TEST(KinetoImport, FilesThatDoNotOverlapInTimeAreSaidToBeOfDifferentRuns) {
  ScratchDir dir;
  std::vector<KinetoFixture> ranks;
  for (int r = 0; r < 2; ++r) {
    KinetoFixture f(r, 2);
    f.host(r == 0 ? "a" : "b");
    f.base_time_ns(1790857026000000000 + r * 7'200'000'000'000);
    for (int k = 0; k < 4; ++k) {
      const double t = 1000.0 + 10'000.0 * k;
      f.gloo_all_reduce(16, t, t + 5, t + 500, 6000 + r);
    }
    ranks.push_back(std::move(f));
  }
  auto summary = import(testing::write_kineto_ranks(dir.path(), ranks), dir.path() / "two.db");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  const std::string warnings = fmt::format("{}", fmt::join(summary->warnings, "\n"));
  EXPECT_NE(warnings.find("rank 1's events (rank1.json) begin 2 h after rank 0's (rank0.json) "
                          "end: files of one run overlap in time"),
            std::string::npos)
      << warnings;
  EXPECT_EQ(TraceQuery(dir.path() / "two.db")
                .rows("SELECT value, severity, description LIKE 'rank 1''s events (rank1.json) "
                      "begin 2 h after%different runs%' FROM stats WHERE name = "
                      "'import_ranks_not_overlapping' AND rank IS NULL"),
            "1|data_loss|1\n");

  // The same job's files written at once on two hosts (a time base a second apart): no warning.
  auto together =
      import(testing::write_kineto_ranks(dir.path(), two_hosts()), dir.path() / "one.db");
  ASSERT_TRUE(together.is_ok()) << together.status().message();
  for (const std::string& w : together->warnings) {
    EXPECT_EQ(w.find("overlap in time"), std::string::npos) << w;
  }
  EXPECT_EQ(TraceQuery(dir.path() / "one.db")
                .number("SELECT count(*) FROM stats WHERE name = 'import_ranks_not_overlapping'"),
            0);
}

// Two hosts profiling the same two steps (ProfilerStep#5, #6; 40 ms) whose clocks disagree by
// 3 s: their files do not overlap on the time bases, but they are one cycle, not two runs (the
// import called them different runs, and analyze reported a data-loss finding); the collectives
// align the clocks. Host b profiling the schedule's next cycle (steps 9, 10) instead is said.
std::vector<KinetoFixture> hosts_clocks_apart(int64_t b_first_step) {
  std::vector<KinetoFixture> ranks;
  for (int r = 0; r < 2; ++r) {
    KinetoFixture f(r, 2);
    f.host(r == 0 ? "a" : "b");
    f.base_time_ns(1790857026000000000 + r * 3'000'000'000LL);
    const int64_t first_step = r == 0 ? 5 : b_first_step;
    for (int k = 0; k < 2; ++k) {
      const double t = 1000.0 + 20'000.0 * k;
      f.step(first_step + k, t, 20'000);
      f.gloo_all_reduce(16, t + 100, t + 105, t + 600, 6000 + r);
    }
    ranks.push_back(std::move(f));
  }
  return ranks;
}

TEST(KinetoImport, HostsWhoseClocksDisagreeByMoreThanTheCycleAreOneCycleWhenTheirStepsAgree) {
  ScratchDir dir;
  auto summary =
      import(testing::write_kineto_ranks(dir.path(), hosts_clocks_apart(5)), dir.path() / "a.db");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  for (const std::string& w : summary->warnings) {
    EXPECT_EQ(w.find("overlap in time"), std::string::npos) << w;
  }
  EXPECT_EQ(TraceQuery(dir.path() / "a.db")
                .number("SELECT count(*) FROM stats WHERE name = 'import_ranks_not_overlapping'"),
            0);
  ASSERT_EQ(summary->ranks.size(), 2u);
  EXPECT_NEAR(static_cast<double>(summary->ranks[1].clock.offset_ns), -3'000'000'000.0, 10'000);

  fs::create_directories(dir.path() / "next");
  auto next_cycle = import(testing::write_kineto_ranks(dir.path() / "next", hosts_clocks_apart(9)),
                           dir.path() / "b.db");
  ASSERT_TRUE(next_cycle.is_ok()) << next_cycle.status().message();
  EXPECT_EQ(TraceQuery(dir.path() / "b.db")
                .number("SELECT count(*) FROM stats WHERE name = 'import_ranks_not_overlapping'"),
            1);
}

// Two hosts and no collective between them: their clocks cannot be aligned, said in one
// grammatical sentence (it read "ranks rank 1 are on other hosts than rank 0").
TEST(KinetoImport, RanksOnAnotherHostWithoutACollectiveAreSaidUnaligned) {
  ScratchDir dir;
  std::vector<KinetoFixture> ranks;
  for (int r = 0; r < 2; ++r) {
    KinetoFixture f(r, 2);
    f.host(r == 0 ? "a" : "b").step(0, 1000, 500).event("cpu_op", "aten::mm", 7, 1100, 200);
    ranks.push_back(std::move(f));
  }
  auto summary = import(testing::write_kineto_ranks(dir.path(), ranks), dir.path() / "two.db");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  const std::string warnings = fmt::format("{}", fmt::join(summary->warnings, "\n"));
  EXPECT_NE(warnings.find("rank 1 is on another host than rank 0 and no collective that ends "
                          "together on every member (all_reduce, all_gather, reduce_scatter, "
                          "all_to_all, barrier) links them: its clock is left as its file gives "
                          "it"),
            std::string::npos)
      << warnings;
}

// Two NCCL ranks as torch's NCCL process group records them: record_param_comms with c10d's
// metadata inside c10d's op, and the NCCL kernel it launched (carrying the same Seq and group).
// Rank 1's host reads 2 ms ahead; the kernels end together.
std::vector<KinetoFixture> nccl_ranks() {
  std::vector<KinetoFixture> ranks;
  for (int r = 0; r < 2; ++r) {
    KinetoFixture f(r, 2);
    f.host(r == 0 ? "a" : "b").backend("nccl");
    const double skew_us = r == 0 ? 0 : 2000;
    for (int seq = 0; seq < 3; ++seq) {
      const double t = 1000.0 * (seq + 1) + skew_us;
      f.event("cpu_op", "c10d::allreduce_", f.pid(), t, 30)
          .event("cpu_op", "record_param_comms", f.pid(), t + 1, 20,
                 fmt::format(R"j({{"External id": {}, "Collective name": "allreduce",
                    "dtype": "BFloat16", "In msg nelems": 1048576, "Out msg nelems": 1048576,
                    "Group size": 2, "In split size": "[]", "Out split size": "[]",
                    "Process Group Name": "0", "Process Group Description": "default_pg",
                    "Process Group Ranks": "[0, 1]", "Rank": {}, "Seq": {},
                    "Is asynchronized op": 0}})j",
                             100 + seq, r, 7 + seq))
          .raw_event(fmt::format(
              R"j({{"ph": "X", "cat": "kernel",
                   "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                   "pid": 0, "tid": 20, "ts": {:.3f}, "dur": {:.3f},
                   "args": {{"External id": {}, "device": {}, "stream": 20, "correlation": {},
                   "Collective name": "allreduce", "Process Group Name": "0", "Seq": {}}}}})j",
              t + 50 + (r == 0 ? 10 : 0), 200.0 - (r == 0 ? 10 : 0), 100 + seq, r, 500 + seq,
              7 + seq));
    }
    ranks.push_back(std::move(f));
  }
  return ranks;
}

// A gloo barrier as torch 2.15 records it: c10d's op with its one-element dummy tensor on the main
// thread, gloo's annotation without any tensor on the worker thread. Rank 0 waits 370 ms in it
// for rank 1: the barrier lasts until gloo's annotation ends, not the 0.44 ms c10d took to
// enqueue it (they did not pair, c10d's count 1 against gloo's 0).
TEST(KinetoImport, AGlooBarrierLastsAsLongAsGloosTransfer) {
  ScratchDir dir;
  std::vector<KinetoFixture> ranks;
  for (int r = 0; r < 2; ++r) {
    KinetoFixture f(r, 2);
    const double issue = r == 0 ? 1000.0 : 371'000.0;
    f.event("cpu_op", "c10d::barrier", f.pid(), issue, 442.0,
            R"({"External id": 2, "Input type": ["unsigned char", "", "ScalarList", "Scalar",
               "Scalar"], "Input Dims": [[1], [], [], [], []]})");
    f.event("user_annotation", "gloo:barrier", 7000 + r, issue + 600, 372'000.0 - issue - 600,
            R"({"External id": 513})");
    ranks.push_back(std::move(f));
  }
  auto summary = import(testing::write_kineto_ranks(dir.path(), ranks), dir.path() / "b.db");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->unmatched_collectives, 0);
  TraceQuery trace(dir.path() / "b.db");
  EXPECT_EQ(trace.rows("SELECT rank, op, bytes, (ts_ns + dur_ns) / 1000 FROM collectives ORDER BY "
                       "rank"),
            "0|barrier|0|372000\n1|barrier|0|372000\n");
}

// FSDP's reduce-scatter on gloo as torch 2.15 records it: c10d's `_reduce_scatter_base_` (output
// 65,664 floats, input 131,328), and ProcessGroupGloo's transfer, an all-reduce of a copy of the
// whole input (`gloo:all_reduce` of 131,328). It lasts until that transfer ends, 6.4 ms after
// the 0.33 ms c10d took to enqueue it (they did not pair: c10d's op and count against gloo's).
TEST(KinetoImport, AGlooReduceScatterLastsUntilItsWholeInputAllReduceEnds) {
  ScratchDir dir;
  std::vector<KinetoFixture> ranks;
  for (int r = 0; r < 2; ++r) {
    KinetoFixture f(r, 2);
    f.event("cpu_op", "c10d::_reduce_scatter_base_", f.pid(), 1000.0, 331.6,
            R"({"External id": 4, "Input Dims": [[65664], [131328], [], [], [], []],
               "Input type": ["float", "float", "", "", "Scalar", "Scalar"],
               "Concrete Inputs": ["", "", "", "", "False", "-1"]})");
    f.event("user_annotation", "gloo:all_reduce", 7000 + r, 1400.0, 6400.0,
            R"({"Input Dims": [[131328]], "Input type": ["float"]})");
    // A later all-reduce of the same size is the user's own, paired with its own transfer.
    f.gloo_all_reduce(131328, 9000.0, 9100.0, 9500.0, 7000 + r);
    ranks.push_back(std::move(f));
  }
  auto summary = import(testing::write_kineto_ranks(dir.path(), ranks), dir.path() / "rs.db");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->unmatched_collectives, 0);
  TraceQuery trace(dir.path() / "rs.db");
  // nccl-tests' size of a reduce-scatter is its whole input.
  EXPECT_EQ(trace.rows("SELECT rank, seq, op, dtype, count, bytes, ts_ns / 1000, "
                       "(ts_ns + dur_ns) / 1000 FROM collectives ORDER BY rank, seq"),
            "0|0|reduce_scatter|float|65664|525312|1000|7800\n"
            "0|1|all_reduce|float|131328|525312|9000|9500\n"
            "1|0|reduce_scatter|float|65664|525312|1000|7800\n"
            "1|1|all_reduce|float|131328|525312|9000|9500\n");
}

// A loss all-reduced as a 0-d tensor: c10d's list holds one tensor of shape [], gloo's annotation
// the shape [] itself. One float, 4 bytes, until gloo's transfer ends (it had been left unpaired:
// no dtype, 0 bytes, the 0.1 ms of c10d's enqueue).
TEST(KinetoImport, AZeroDimensionalAllReduceIsOneElementPairedWithItsTransfer) {
  ScratchDir dir;
  std::vector<KinetoFixture> ranks;
  for (int r = 0; r < 2; ++r) {
    KinetoFixture f(r, 2);
    f.event("cpu_op", "c10d::allreduce_", f.pid(), 1000.0, 101.8,
            R"({"External id": 5, "Input Dims": [[[]], [], [], [], [], []],
               "Input type": ["TensorList", "", "", "", "Scalar", "Scalar"],
               "Concrete Inputs": ["", "", "", "", "False", "-1"]})");
    f.event("user_annotation", "gloo:all_reduce", 7000 + r, 1200.0, 2900.0,
            R"({"Input Dims": [[]], "Input type": ["float"]})");
    ranks.push_back(std::move(f));
  }
  auto summary = import(testing::write_kineto_ranks(dir.path(), ranks), dir.path() / "loss.db");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->unmatched_collectives, 0);
  TraceQuery trace(dir.path() / "loss.db");
  EXPECT_EQ(trace.rows("SELECT rank, op, dtype, count, bytes, (ts_ns + dur_ns) / 1000 FROM "
                       "collectives ORDER BY rank"),
            "0|all_reduce|float|1|4|4100\n1|all_reduce|float|1|4|4100\n");
}

// A profiler schedule with repeat 2 writes two files per rank, a cycle each: --cycle picks one,
// each rank's files taken in time order whatever their names, and a cycle that is not there is
// a usage error.
TEST(KinetoImport, CyclePicksOneProfilerCyclesFiles) {
  ScratchDir dir;
  std::vector<fs::path> files;
  for (int r = 0; r < 2; ++r) {
    for (int cycle = 1; cycle <= 2; ++cycle) {
      KinetoFixture f(r, 2);
      const double t = cycle * 1'000'000.0;  // a second apart
      f.step(cycle * 10, t, 5000);
      f.step(cycle * 10 + 1, t + 5000, 5000);
      // Named so that name order is not time order.
      files.push_back(dir.path() / fmt::format("rank{}.{}.json", r, 3 - cycle));
      testing::write_text(files.back(), f.json());
    }
  }
  auto steps_of = [&](std::optional<int> cycle) -> std::string {
    TraceImportOptions options;
    options.inputs = files;
    options.output = dir.path() / "c.db";
    options.overwrite = true;
    options.cycle = cycle;
    auto summary = import_kineto_traces(options);
    if (!summary.is_ok()) return summary.status().message();
    return TraceQuery(options.output)
        .rows(
            "SELECT rank, group_concat(step) FROM (SELECT rank, step FROM steps ORDER BY rank, "
            "step) "
            "GROUP BY rank");
  };
  EXPECT_EQ(steps_of(1), "0|10,11\n1|10,11\n");
  EXPECT_EQ(steps_of(2), "0|20,21\n1|20,21\n");
  EXPECT_EQ(steps_of(TraceImportOptions::kLastCycle), "0|20,21\n1|20,21\n");
  EXPECT_EQ(steps_of(3), "--cycle 3: the traces hold 2 profiler cycles per rank");
  EXPECT_NE(steps_of(std::nullopt)
                .find("rank 0 has 2 files (rank0.2.json, rank0.1.json, in time "
                      "order)"),
            std::string::npos)
      << steps_of(std::nullopt);
  // A rank with a cycle fewer: which files go together is unknown.
  files.pop_back();
  EXPECT_NE(steps_of(1).find("rank 1 has 1 file and rank 0 has 2"), std::string::npos)
      << steps_of(1);
}

TEST(KinetoImport, NcclCollectivesFromRecordParamCommsWithTheirKernelsTimes) {
  ScratchDir dir;
  const fs::path out = dir.path() / "nccl.db";
  auto summary = import(testing::write_kineto_ranks(dir.path(), nccl_ranks()), out);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->unmatched_collectives, 0);
  EXPECT_EQ(summary->ranks[1].clock.offset_ns, -2'000'000);
  TraceQuery trace(out);
  EXPECT_EQ(trace.rows("SELECT comm_id, seq, op, dtype, count, bytes, group_size, group_ranks, "
                       "count(*) FROM collectives GROUP BY comm_id, seq ORDER BY seq"),
            "default_pg:0|7|all_reduce|bfloat16|1048576|2097152|2|0,1|2\n"
            "default_pg:0|8|all_reduce|bfloat16|1048576|2097152|2|0,1|2\n"
            "default_pg:0|9|all_reduce|bfloat16|1048576|2097152|2|0,1|2\n");
  // Host side: record_param_comms (it returns once the kernel is queued); device side: the
  // kernel, which on the timeline ends at one instant on both ranks.
  EXPECT_EQ(trace.rows("SELECT DISTINCT dur_ns FROM collectives"), "20000\n");
  EXPECT_EQ(trace.number("SELECT max(s) FROM (SELECT max(gpu_end_ns) - min(gpu_end_ns) AS s "
                         "FROM collectives GROUP BY seq)"),
            0);
  EXPECT_EQ(trace.rows("SELECT device FROM ranks ORDER BY rank"), "cuda:0\ncuda:1\n");
  EXPECT_EQ(trace.rows("SELECT json_extract(config, '$.backend') FROM runs"), "nccl\n");
}

TEST(KinetoImport, MissingRankIsNoErrorAndTheTraceSaysWhich) {
  ScratchDir dir;
  auto fixtures = ambiguous_two_groups();
  auto files = testing::write_kineto_ranks(dir.path(), fixtures);
  files.erase(files.begin() + 2);
  const fs::path out = dir.path() / "missing.db";
  auto summary = import(files, out);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->missing_ranks, std::vector<int>{2});
  TraceQuery trace(out);
  EXPECT_EQ(trace.rows("SELECT value, severity, description FROM stats WHERE name = "
                       "'import_missing_ranks'"),
            "1|data_loss|rank 2 of the world of 4 had no trace file: their events and their "
            "part of every collective are absent\n");
  EXPECT_EQ(trace.rows("SELECT group_concat(rank) FROM ranks"), "0,1,3\n");
}

// torch.profiler's record_shapes=True ("record_shapes": 1 in each file, as the committed fixtures
// have it) is kept in the run's config, so analyze does not advise turning it on for an op the
// import could not size; files without it leave it out.
TEST(KinetoImport, RecordShapesIsKeptInTheRunsConfig) {
  ScratchDir dir;
  auto fixture = import(fixture_files("ddp"), dir.path() / "ddp.db");
  ASSERT_TRUE(fixture.is_ok()) << fixture.status().message();
  EXPECT_EQ(TraceQuery(dir.path() / "ddp.db")
                .rows("SELECT json_extract(config, '$.record_shapes') FROM runs"),
            "1\n");
  auto without = import(testing::write_kineto_ranks(dir.path(), two_hosts()), dir.path() / "w.db");
  ASSERT_TRUE(without.is_ok()) << without.status().message();
  EXPECT_EQ(TraceQuery(dir.path() / "w.db")
                .rows("SELECT json_extract(config, '$.record_shapes') IS NULL FROM runs"),
            "1\n");
}

// Kineto records no loss: an imported step has none (NULL, as a live run's step without one),
// where it had been a loss of 0 that `top` showed.
TEST(KinetoImport, ImportedStepsHaveNoLoss) {
  ScratchDir dir;
  KinetoFixture f(0, 1);
  f.step(1, 1000.0, 500.0).step(2, 1500.0, 500.0);
  testing::write_text(dir.path() / "r.json", f.json());
  auto summary = import({dir.path() / "r.json"}, dir.path() / "s.db");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  TraceQuery trace(dir.path() / "s.db");
  EXPECT_EQ(trace.rows("SELECT step, loss FROM step ORDER BY step"), "1|NULL\n2|NULL\n");
}

TEST(KinetoImport, CpuMemoryOfACpuRankAsOtherCategory) {
  ScratchDir dir;
  KinetoFixture f(0, 1);
  f.memory(10, 1024).memory(20, 3072).event("cpu_op", "aten::add", f.pid(), 15, 2);
  testing::write_text(dir.path() / "r.json", f.json());
  auto summary = import({dir.path() / "r.json"}, dir.path() / "m.db");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  TraceQuery trace(dir.path() / "m.db");
  EXPECT_EQ(trace.rows("SELECT category, bytes FROM memory_events ORDER BY ts_ns"),
            "other|1024\nother|3072\n");
  EXPECT_EQ(trace.rows("SELECT device FROM ranks"), "cpu\n");
  EXPECT_EQ(trace.rows("SELECT category FROM slices WHERE name = 'aten::add'"), "compute\n");
  // torch's CPU memory profiling counts from zero when it starts: said, so analyze does not read
  // the samples as bytes in use.
  EXPECT_EQ(trace.rows("SELECT rank, value FROM stats WHERE name = 'import_cpu_memory_relative'"),
            "0|2\n");
}

TEST(KinetoImport, GpuRankKeepsItsDevicesMemoryAndItsKernelsAreTheCompute) {
  ScratchDir dir;
  KinetoFixture f(0, 1);
  f.memory(10, 1024)
      .memory(20, 4096, /*device_type=*/1, /*device=*/0)
      .event("cpu_op", "aten::mm", f.pid(), 15, 2)
      .raw_event(R"j({"ph": "X", "cat": "kernel", "name": "void gemm<float>(float*)", "pid": 0,
                      "tid": 7, "ts": 18.000, "dur": 30.000, "args": {"device": 0, "stream": 7,
                      "correlation": 11, "grid": [64, 1, 1], "block": [256, 1, 1],
                      "registers per thread": 128, "shared memory": 1024}})j")
      .raw_event(R"j({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)",
                      "pid": 0, "tid": 7, "ts": 12.000, "dur": 2.000, "args": {"device": 0,
                      "stream": 7, "correlation": 10, "bytes": 1048576}})j");
  testing::write_text(dir.path() / "r.json", f.json());
  auto summary = import({dir.path() / "r.json"}, dir.path() / "g.db");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  TraceQuery trace(dir.path() / "g.db");
  EXPECT_EQ(trace.rows("SELECT category, bytes FROM memory_events"), "other|4096\n");
  EXPECT_EQ(trace.rows("SELECT count(*) FROM stats WHERE name = 'import_cpu_memory_relative'"),
            "0\n");  // the caching allocator's totals are bytes in use
  EXPECT_EQ(trace.rows("SELECT device FROM ranks"), "cuda:0\n");
  EXPECT_EQ(trace.rows("SELECT category FROM slices WHERE name = 'aten::mm'"), "phase\n");
  EXPECT_EQ(trace.rows("SELECT name, ts_ns, dur_ns, correlation_id, device, stream, grid_x, "
                       "block_x, registers FROM kernels"),
            "void gemm<float>(float*)|18000|30000|11|0|7|64|256|128\n");
  EXPECT_EQ(trace.rows("SELECT name, bytes, stream FROM transfers"), "memcpy HtoD|1048576|7\n");
  EXPECT_EQ(trace.rows("SELECT DISTINCT track FROM slices WHERE track_kind = 'cuda_stream'"),
            "gpu0 stream 7\n");
}

TEST(KinetoImport, AFileWithoutDistributedInfoAloneIsRankZero) {
  ScratchDir dir;
  KinetoFixture f(0, 1);
  f.step(7, 100, 50).event("cpu_op", "aten::mm", f.pid(), 110, 10);
  testing::write_text(dir.path() / "single.json", f.json(/*with_distributed_info=*/false));
  auto summary = import({dir.path() / "single.json"}, dir.path() / "s.db");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  TraceQuery trace(dir.path() / "s.db");
  EXPECT_EQ(trace.rows("SELECT rank, step FROM steps"), "0|7\n");
  EXPECT_EQ(trace.rows("SELECT name, step, category FROM slices WHERE name = 'aten::mm'"),
            "aten::mm|7|compute\n");
}

// Values that did not read were replaced without a word: a dur of 1e300 made the op 0 long, a
// baseTimeNanoseconds written as a string (or past int64) named the run after 1970. Both are
// said now, once per kind, as a negative dur already was.
TEST(KinetoImport, TimesThatDoNotReadAreSaidOnce) {
  ScratchDir dir;
  KinetoFixture f(0, 1);
  f.step(1, 10, 100)
      .event("cpu_op", "aten::mm", 1, 20, 1e300)
      .event("cpu_op", "aten::add", 1, 30, 1e300)
      .event("cpu_op", "aten::relu", 1, 40, 5);
  std::string json = f.json();
  const std::string base = "\"baseTimeNanoseconds\": 1790857026000000000";
  ASSERT_NE(json.find(base), std::string::npos);
  json.replace(json.find(base), base.size(), "\"baseTimeNanoseconds\": \"1790857026000000000\"");
  testing::write_text(dir.path() / "a.json", json);
  auto summary = import({dir.path() / "a.json"}, dir.path() / "a.db");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  const std::string warnings = fmt::format("{}", fmt::join(summary->warnings, "\n"));
  EXPECT_NE(warnings.find("2 events have a ts or dur that is no number of microseconds"),
            std::string::npos)
      << warnings;
  EXPECT_NE(warnings.find("a.json: baseTimeNanoseconds \"1790857026000000000\" is no integer of "
                          "Unix ns"),
            std::string::npos)
      << warnings;

  // Past 2^62 ns the ts added to it overflowed (a run named for the year 1677).
  json = f.json();
  json.replace(json.find(base), base.size(), "\"baseTimeNanoseconds\": 9223372036854775807");
  testing::write_text(dir.path() / "b.json", json);
  auto big = import({dir.path() / "b.json"}, dir.path() / "b.db");
  ASSERT_TRUE(big.is_ok()) << big.status().message();
  EXPECT_NE(fmt::format("{}", fmt::join(big->warnings, "\n"))
                .find("b.json: baseTimeNanoseconds 9223372036854775807 is no integer"),
            std::string::npos);
  EXPECT_GE(TraceQuery(dir.path() / "b.db").number("SELECT start_unix_ns FROM run"), 0);
}

// ProfilerStep#-1 vanished as a step, and ProfilerStep#99999999999999999999 became step 0,
// both without a word.
TEST(KinetoImport, StepNumbersThatDoNotReadAreSaid) {
  ScratchDir dir;
  KinetoFixture f(0, 1);
  f.event("user_annotation", "ProfilerStep#-1", f.pid(), 10, 100)
      .event("user_annotation", "ProfilerStep#-1", f.pid(), 200, 100)
      .event("user_annotation", "ProfilerStep#99999999999999999999", f.pid(), 400, 100)
      .event("cpu_op", "aten::mm", 1, 20, 5);
  testing::write_text(dir.path() / "a.json", f.json());
  auto summary = import({dir.path() / "a.json"}, dir.path() / "a.db");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  const std::string warnings = fmt::format("{}", fmt::join(summary->warnings, "\n"));
  EXPECT_NE(warnings.find("2 ProfilerStep# annotations have no step number partrain reads"),
            std::string::npos)
      << warnings;
  EXPECT_NE(warnings.find("1 step markers' numbers are past what partrain reads"),
            std::string::npos)
      << warnings;
}

// A rank's file as HTA's test traces have it: distributedInfo without world_size ({"rank": 0}),
// or without rank ({"backend": "nccl"}) when `keep_rank` is false.
std::string without_world_size(const KinetoFixture& f, bool keep_rank = true) {
  std::string json = f.json();
  const size_t world = json.find("\"world_size\": ");
  json.erase(world, json.find(", ", world) + 2 - world);
  if (!keep_rank) {
    const size_t rank = json.find("\"rank\": ");
    json.erase(rank, json.find(", ", rank) + 2 - rank);
  }
  return json;
}

// They had been refused ("distributedInfo has no world_size"); HTA loads them: one file is rank 0
// of a world of 1, several a world of the largest rank + 1 (said).
TEST(KinetoImport, DistributedInfoWithoutWorldSizeImportsAsHtaReadsIt) {
  ScratchDir dir;
  KinetoFixture one(0, 1);
  one.step(1, 100, 50).event("cpu_op", "aten::mm", one.pid(), 110, 10);
  testing::write_text(dir.path() / "single.json", without_world_size(one));
  auto single = import({dir.path() / "single.json"}, dir.path() / "s.db");
  ASSERT_TRUE(single.is_ok()) << single.status().message();
  EXPECT_EQ(single->world_size, 1);
  EXPECT_TRUE(single->warnings.empty());

  std::vector<fs::path> files;
  for (int r = 0; r < 2; ++r) {
    KinetoFixture f(r, 2);
    f.step(1, 100, 50);
    files.push_back(dir.path() / fmt::format("r{}.json", r));
    testing::write_text(files.back(), without_world_size(f));
  }
  auto two = import(files, dir.path() / "t.db");
  ASSERT_TRUE(two.is_ok()) << two.status().message();
  EXPECT_EQ(two->world_size, 2);
  EXPECT_TRUE(two->missing_ranks.empty());
  ASSERT_FALSE(two->warnings.empty());
  EXPECT_NE(two->warnings[0].find("no world_size: the world is taken as 2 ranks (the largest "
                                  "rank + 1, as HTA takes it)"),
            std::string::npos)
      << two->warnings[0];
  TraceQuery trace(dir.path() / "t.db");
  EXPECT_EQ(trace.rows("SELECT world_size FROM runs"), "2\n");
}

// {"backend": "nccl"} alone: rank 0, as a file without distributedInfo; among several files its
// rank is unknown, and the message says what to do.
TEST(KinetoImport, DistributedInfoWithoutRankIsRankZeroAloneAndRefusedWithTheFixAmongSeveral) {
  ScratchDir dir;
  KinetoFixture f(0, 1);
  f.step(1, 100, 50);
  testing::write_text(dir.path() / "a.json", without_world_size(f, /*keep_rank=*/false));
  auto alone = import({dir.path() / "a.json"}, dir.path() / "a.db");
  ASSERT_TRUE(alone.is_ok()) << alone.status().message();
  EXPECT_EQ(alone->world_size, 1);
  EXPECT_EQ(alone->ranks.size(), 1u);

  KinetoFixture other(1, 2);
  other.step(1, 100, 50);
  testing::write_text(dir.path() / "b.json", other.json());
  auto both = import({dir.path() / "a.json", dir.path() / "b.json"}, dir.path() / "b.db");
  ASSERT_FALSE(both.is_ok());
  EXPECT_EQ(both.status().exit_code(), 3);
  EXPECT_NE(both.status().message().find("a.json: has a distributedInfo without a rank, so its "
                                         "rank is unknown among several files; import it alone"),
            std::string::npos)
      << both.status().message();
}

// Kineto of HTA's ROCm, Triton and MTIA traces writes baseTimeNanoseconds after traceEvents. It
// had been read only up to traceEvents: the run started in 1970 (kineto-19700218-154109).
TEST(KinetoImport, BaseTimeWrittenAfterTheEventsIsRead) {
  ScratchDir dir;
  KinetoFixture f(0, 1);
  f.step(1, 1'000'000, 50);
  std::string json = f.json();
  const std::string base = "  \"baseTimeNanoseconds\": 1790857026000000000,\n";
  const size_t at = json.find(base);
  ASSERT_NE(at, std::string::npos);
  json.erase(at, base.size());
  json.insert(json.find("  \"traceName\""), base);  // after traceEvents' `],`
  testing::write_text(dir.path() / "late.json", json);
  auto summary = import({dir.path() / "late.json"}, dir.path() / "l.db");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->run_id, "kineto-20261001-121707");
}

// torch.profiler stopped by leaving its `with` after the loop's last prof.step(): that step opened
// a ProfilerStep#N with nothing in it (HTA's ROCm trace: #2, 49 us). It had been a step, and the
// default window (warm-up step 1 skipped) landed on it: "0.0 ms", no GPU work of its own.
TEST(KinetoImport, AnEmptyLastProfilerStepIsNoStep) {
  ScratchDir dir;
  KinetoFixture f(0, 1);
  f.step(1, 100, 1000)
      .event("cpu_op", "aten::mm", f.pid(), 200, 500)
      .step(2, 1100, 49)
      .event("cpu_op", "aten::mm", f.pid(), 1050, 10)  // began in step 1
      // Launched in step 1, run into step 2 by a GPU that lags: no work of step 2's.
      .raw_event(R"j({"ph": "X", "cat": "kernel", "name": "void gemm<float>(float*)", "pid": 0,
                      "tid": 7, "ts": 1120.000, "dur": 20.000, "args": {"device": 0, "stream": 7,
                      "correlation": 11}})j");
  testing::write_text(dir.path() / "r.json", f.json());
  auto summary = import({dir.path() / "r.json"}, dir.path() / "e.db");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  TraceQuery trace(dir.path() / "e.db");
  EXPECT_EQ(trace.rows("SELECT step FROM steps"), "1\n");
  EXPECT_EQ(trace.rows("SELECT rank, value, description FROM stats WHERE name = "
                       "'import_empty_last_step'"),
            "0|1|ProfilerStep#2, the last, holds nothing: the step torch.profiler's last step() "
            "opened, cut where the profiler stopped; kept as a slice, not a step\n");
  EXPECT_EQ(trace.number("SELECT count(*) FROM slices WHERE name = 'ProfilerStep#2'"), 1);

  // A last step with work in it stays a step (a profiler schedule's last active step is whole).
  KinetoFixture g(0, 1);
  g.step(1, 100, 1000).step(2, 1100, 900).event("cpu_op", "aten::mm", g.pid(), 1200, 10);
  testing::write_text(dir.path() / "w.json", g.json());
  ASSERT_TRUE(import({dir.path() / "w.json"}, dir.path() / "w.db").is_ok());
  EXPECT_EQ(TraceQuery(dir.path() / "w.db").rows("SELECT step FROM steps ORDER BY step"), "1\n2\n");
}

// An MTIA trace (HTA's): its device's work is mtia_ccp_events with a stream (DMA requests, waits),
// which had been imported silently as host phases, and analyze called the rank 88% idle.
TEST(KinetoImport, DeviceEventsOfAnotherAcceleratorAreLeftOutAndSaid) {
  ScratchDir dir;
  KinetoFixture f(0, 1);
  f.step(1, 100, 1000)
      .event("cpu_op", "aten::mm", f.pid(), 110, 10)
      .event("mtia_runtime", "mtiaLaunchKernel", f.pid(), 120, 5)
      .event("mtia_ccp_events", "dma_request", 408, 130, 14.12,
             R"({"stream": 102, "direction": "HOST_TO_DEVICE", "size": 1852})")
      .event("mtia_ccp_events", "event_wait", 409, 140, 158.6,
             R"({"stream": 108, "wait_on_stream": 104})");
  testing::write_text(dir.path() / "m.json", f.json());
  auto summary = import({dir.path() / "m.json"}, dir.path() / "m.db");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  TraceQuery trace(dir.path() / "m.db");
  EXPECT_EQ(trace.number("SELECT count(*) FROM slices WHERE name IN ('dma_request', "
                         "'event_wait')"),
            0);
  EXPECT_EQ(trace.rows("SELECT rank, value, severity FROM stats WHERE name = "
                       "'import_foreign_device_events'"),
            "0|2|data_loss\n");
  ASSERT_EQ(summary->warnings.size(), 1u);
  EXPECT_NE(summary->warnings[0].find("rank 0: 2 device events of an accelerator partrain does "
                                      "not import (2 mtia_ccp_events: work on its streams"),
            std::string::npos)
      << summary->warnings[0];
  // The host's own events stay (the runtime's launch is a phase, as cudaLaunchKernel is).
  EXPECT_EQ(trace.number("SELECT count(*) FROM slices WHERE name = 'mtiaLaunchKernel'"), 1);
}

TEST(KinetoImport, CustomStepMarkerWithoutANumberCountsEachRanksSteps) {
  ScratchDir dir;
  std::vector<KinetoFixture> ranks;
  for (int r = 0; r < 2; ++r) {
    KinetoFixture f(r, 2);
    f.event("user_annotation", "train_step", f.pid(), 100, 50)
        .event("user_annotation", "train_step", f.pid(), 200, 50);
    ranks.push_back(std::move(f));
  }
  auto summary =
      import(testing::write_kineto_ranks(dir.path(), ranks), dir.path() / "s.db", "train_step");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  TraceQuery trace(dir.path() / "s.db");
  EXPECT_EQ(trace.rows("SELECT rank, step FROM steps ORDER BY rank, step"), "0|0\n0|1\n1|0\n1|1\n");
  EXPECT_TRUE(summary->warnings.empty());
  // A marker that matches nothing leaves the trace without steps, and says so.
  auto unmatched =
      import(testing::write_kineto_ranks(dir.path(), ranks), dir.path() / "u.db", "train_stp");
  ASSERT_TRUE(unmatched.is_ok()) << unmatched.status().message();
  ASSERT_EQ(unmatched->warnings.size(), 1u);
  EXPECT_NE(unmatched->warnings[0].find("--step-marker 'train_stp' matched no event's name"),
            std::string::npos)
      << unmatched->warnings[0];
}

struct BadInput {
  std::string name;
  std::function<std::vector<fs::path>(const fs::path&)> make;
  std::string message;  // part of the error
};

class KinetoImportBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(KinetoImportBadInput, ExitThreeNamingTheFileAndNothingLeftBehind) {
  ScratchDir dir;
  const BadInput& bad = GetParam();
  const std::vector<fs::path> files = bad.make(dir.path());
  const fs::path out = dir.path() / "out.db";
  auto summary = import(files, out);
  ASSERT_FALSE(summary.is_ok());
  EXPECT_EQ(summary.status().exit_code(), 3) << summary.status().message();
  EXPECT_NE(summary.status().message().find(bad.message), std::string::npos)
      << summary.status().message();
  expect_no_output(dir.path(), out);
}

std::vector<fs::path> two_ranks(const fs::path& dir, int world0, int rank1, int world1) {
  KinetoFixture a(0, world0), b(rank1, world1);
  a.step(1, 10, 5);
  b.step(1, 10, 5);
  testing::write_text(dir / "a.json", a.json());
  testing::write_text(dir / "b.json", b.json());
  return {dir / "a.json", dir / "b.json"};
}

INSTANTIATE_TEST_SUITE_P(
    Cases, KinetoImportBadInput,
    ::testing::Values(
        BadInput{"malformed",
                 [](const fs::path& dir) {
                   testing::write_text(dir / "bad.json", "{\"traceEvents\": [{\"ph\": }]}");
                   return std::vector<fs::path>{dir / "bad.json"};
                 },
                 "bad.json: malformed JSON at byte"},
        BadInput{"truncated_gzip",
                 [](const fs::path& dir) {
                   auto file = fixture_files("ddp")[0];
                   fs::copy_file(file, dir / "cut.json.gz");
                   fs::resize_file(dir / "cut.json.gz", fs::file_size(file) / 2);
                   return std::vector<fs::path>{dir / "cut.json.gz"};
                 },
                 "cut.json.gz: the gzip stream ends before its end"},
        BadInput{"not_kineto",
                 [](const fs::path& dir) {
                   testing::write_text(dir / "config.json", "{\"lr\": 0.1}");
                   return std::vector<fs::path>{dir / "config.json"};
                 },
                 "config.json: is JSON but not a Kineto trace"},
        // The JSON torch writes beside its Kineto traces, named explicitly: said for what it is
        // (the memory timeline had been called Chrome's JSON array format).
        BadInput{"execution_trace",
                 [](const fs::path& dir) {
                   testing::write_text(dir / "et_rank0.json",
                                       R"({"schema": "1.1.1-chakra.0.0.4", "pid": 20634,
                                           "nodes": [{"id": 2, "name": "[pytorch|profiler]"}]})");
                   return std::vector<fs::path>{dir / "et_rank0.json"};
                 },
                 "et_rank0.json: is an execution trace (torch's ExecutionTraceObserver, Chakra's "
                 "schema), not a Kineto trace"},
        BadInput{"memory_timeline",
                 [](const fs::path& dir) {
                   testing::write_text(dir / "tl.json",
                                       "[[1796006632478833, 1796006632479887], [[0, 512], [0, "
                                       "1024]]]");
                   return std::vector<fs::path>{dir / "tl.json"};
                 },
                 "tl.json: is a memory timeline (torch.profiler's export_memory_timeline), not a "
                 "Kineto trace"},
        BadInput{"chrome_array",
                 [](const fs::path& dir) {
                   testing::write_text(dir / "events.json",
                                       R"([{"name": "step", "ph": "X", "ts": 1, "dur": 2}])");
                   return std::vector<fs::path>{dir / "events.json"};
                 },
                 "events.json: not a Kineto trace: its top level is an array (Chrome's JSON "
                 "array format)"},
        // A file a crashed profiler left without a byte: it had read "malformed JSON at byte 1
        // ... truncated?".
        BadInput{"empty",
                 [](const fs::path& dir) {
                   testing::write_text(dir / "rank0.pt.trace.json.gz", "");
                   return std::vector<fs::path>{dir / "rank0.pt.trace.json.gz"};
                 },
                 "rank0.pt.trace.json.gz: the file is empty, no JSON in it"},
        BadInput{"world_sizes_disagree",
                 [](const fs::path& dir) { return two_ranks(dir, 2, 1, 4); },
                 "b.json: says the world has 4 ranks, but"},
        BadInput{"two_files_one_rank", [](const fs::path& dir) { return two_ranks(dir, 2, 0, 2); },
                 "a.json: rank 0 has 2 files (a.json, b.json, in time order): a profiler "
                 "schedule with repeat or several active cycles writes one per cycle; import one "
                 "cycle with --cycle 1..2 (or --cycle last)"},
        BadInput{"no_distributed_info",
                 [](const fs::path& dir) {
                   KinetoFixture a(0, 2);
                   testing::write_text(dir / "a.json", a.json(false));
                   testing::write_text(dir / "b.json", a.json(false));
                   return std::vector<fs::path>{dir / "a.json", dir / "b.json"};
                 },
                 "a.json: has no distributedInfo"},
        BadInput{"bad_distributed_info",
                 [](const fs::path& dir) {
                   testing::write_text(dir / "a.json",
                                       "{\"distributedInfo\": {\"rank\": \"x\", \"world_size\": "
                                       "2}, \"traceEvents\": []}");
                   return std::vector<fs::path>{dir / "a.json"};
                 },
                 "a.json: distributedInfo: distributedInfo has no rank"},
        // A world the import sized per-rank vectors by: 2e9 was bad_alloc after 4 GB, reported
        // as "an internal error ... please report it"; 2^32 + 2 was read as 2.
        BadInput{"world_size_huge",
                 [](const fs::path& dir) {
                   testing::write_text(dir / "a.json",
                                       "{\"distributedInfo\": {\"rank\": 0, \"world_size\": "
                                       "2000000000}, \"traceEvents\": []}");
                   return std::vector<fs::path>{dir / "a.json"};
                 },
                 "a.json: distributedInfo: distributedInfo's world_size is 2000000000, past what "
                 "partrain imports (a world of at most 1048576 ranks"},
        BadInput{"world_size_past_int",
                 [](const fs::path& dir) {
                   testing::write_text(dir / "a.json",
                                       "{\"distributedInfo\": {\"rank\": 0, \"world_size\": "
                                       "4294967298}, \"traceEvents\": []}");
                   return std::vector<fs::path>{dir / "a.json"};
                 },
                 "a.json: distributedInfo: distributedInfo's world_size is 4294967298"},
        BadInput{"rank_huge_without_world_size",
                 [](const fs::path& dir) {
                   testing::write_text(dir / "a.json",
                                       "{\"distributedInfo\": {\"rank\": 2147483647}, "
                                       "\"traceEvents\": []}");
                   return std::vector<fs::path>{dir / "a.json"};
                 },
                 "a.json: distributedInfo: distributedInfo's rank is 2147483647"}),
    [](const auto& test) { return test.param.name; });

TEST(KinetoImport, ExistingOutputIsRefusedWithoutOverwrite) {
  ScratchDir dir;
  testing::write_text(dir.path() / "out.db", "keep me");
  auto summary = import(fixture_files("ddp"), dir.path() / "out.db");
  ASSERT_FALSE(summary.is_ok());
  EXPECT_EQ(summary.status().exit_code(), 2);
  std::ifstream kept(dir.path() / "out.db");
  std::string text((std::istreambuf_iterator<char>(kept)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "keep me");
}

}  // namespace
}  // namespace partrain::profiler
