// analyze_stragglers on hand-made traces: lateness per rank, who arrives last, the straggler
// score and its thresholds, and the finding's wording.
#include "analyzers/stragglers.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analyzers/analysis_report.h"
#include "tests/unit/analyzers/collective_fixture.h"

namespace partrain::analyzers {
namespace {

using fixture::CollectiveTrace;
using fixture::Op;
using fixture::window;

constexpr int64_t kMs = 1'000'000;

// Ten all-reduces 100 ms apart and ten 100 ms steps per rank. Ranks 0, 1, 3 start at +0, +0.1
// and +0.2 ms; `late_ns` is rank 2's offset in the first nine, +0.05 ms in the tenth.
void write_run(CollectiveTrace& trace, int64_t late_ns, int64_t step_ns = 100 * kMs) {
  const int64_t offsets[4] = {0, kMs / 10, 0, kMs / 5};
  for (int64_t k = 0; k < 10; ++k) {
    for (int rank = 0; rank < 4; ++rank) {
      int64_t offset = offsets[rank];
      if (rank == 2) offset = k < 9 ? late_ns : kMs / 20;
      trace.add({.rank = rank, .seq = static_cast<uint64_t>(k), .start_ns = k * 100 * kMs + offset,
                 .step = k});
      trace.step(rank, k, k * 100 * kMs, step_ns);
    }
  }
}

// The first nine all-reduces start 30 ms apart (delayed, skew >= 1 ms), rank 2 last; the tenth
// starts 0.2 ms apart (in sync, not delayed). Rank 2: last at 9 of 9 delayed (100%), 30 ms late
// each time; the others waited 9 x 30 ms over 10 steps = 27 ms per step, 27% of the 100 ms
// median step (critical, >= 20%). Ranks 0, 1, 3 are never last at a delayed one.
TEST(StragglersTest, SlowRankIsTheStraggler) {
  CollectiveTrace trace("straggler");
  write_run(trace, 30 * kMs);
  auto report = analyze_stragglers(trace.finish(), window({0, 1, 2, 3}, 0, int64_t{1} << 60, 0, 9));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_DOUBLE_EQ(report->median_step_ms, 100.0);
  EXPECT_EQ(report->steps, 10);
  ASSERT_EQ(report->ranks.size(), 4u);
  const RankLateness& r2 = report->ranks[2];
  EXPECT_EQ(r2.matched, 10);
  EXPECT_EQ(r2.delayed, 9);
  EXPECT_EQ(r2.last, 9);
  EXPECT_DOUBLE_EQ(r2.last_share, 1.0);
  EXPECT_DOUBLE_EQ(r2.late_p50_ms, 30.0);
  EXPECT_DOUBLE_EQ(r2.late_p90_ms, 30.0);
  EXPECT_DOUBLE_EQ(r2.wait_per_step_ms, 27.0);
  EXPECT_DOUBLE_EQ(r2.step_share, 0.27);
  EXPECT_EQ(r2.last_op, "all_reduce");
  EXPECT_DOUBLE_EQ(r2.wait_share, 1.0);
  for (int rank : {0, 1, 3}) {
    EXPECT_EQ(report->ranks[rank].delayed, 9);
    EXPECT_EQ(report->ranks[rank].last, 0);
    EXPECT_DOUBLE_EQ(report->ranks[rank].wait_per_step_ms, 0.0);
  }
  ASSERT_EQ(report->straggler, 2);
  std::vector<Finding> findings = straggler_findings(*report);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, "straggler");
  EXPECT_EQ(findings[0].rank, 2);
  EXPECT_EQ(findings[0].severity, Severity::kCritical);
  EXPECT_DOUBLE_EQ(findings[0].impact, 0.27);
  EXPECT_EQ(findings[0].evidence,
            "rank 2 arrives last at 100% of delayed all-reduces (skew >= 1 ms), 30.0 ms late at "
            "the median, 27% of the step (100% of all waiting at collectives)");
  EXPECT_NE(findings[0].advice.find("rank 2's host"), std::string::npos);
  EXPECT_NE(findings[0].advice.find("a slower GPU"), std::string::npos);
  // A PyTorch CPU job's compute is not in the trace: no GPU to suspect, its cores and host work.
  const Finding cpu = straggler_findings(*report, /*compute_recorded=*/false)[0];
  EXPECT_EQ(cpu.advice.find("GPU"), std::string::npos) << cpu.advice;
  EXPECT_NE(cpu.advice.find("--cpu-bind core"), std::string::npos) << cpu.advice;
  EXPECT_NE(cpu.advice.find("compute_unrecorded"), std::string::npos) << cpu.advice;
  EXPECT_NE(format_stragglers(*report).find("<- straggler"), std::string::npos);
  EXPECT_NE(format_stragglers(*report).find(
                "median step 100.000 ms, mean 100.000 ms (of step: of the mean) over 10 steps"),
            std::string::npos);
  EXPECT_EQ(stragglers_json(*report)["straggler"], 2);
  EXPECT_EQ(stragglers_json(*report)["ranks"][2]["last_op"], "all_reduce");
  EXPECT_TRUE(stragglers_json(*report)["ranks"][0]["last_op"].is_null());  // never last
  EXPECT_EQ(stragglers_json(*report)["stepless"], false);

  // Without steps the window stands for the step, and the text says so rather than "over 1
  // steps".
  CollectiveTrace unstepped("stepless");
  write_run(unstepped, 30 * kMs);
  auto stepless = analyze_stragglers(unstepped.finish(), window({0, 1, 2, 3}, 0, 1000 * kMs));
  ASSERT_TRUE(stepless.is_ok()) << stepless.status().message();
  const std::string text = format_stragglers(*stepless);
  EXPECT_NE(text.find("no steps: the window (1000.000 ms) stands for the step"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("over 1 steps"), std::string::npos) << text;
  EXPECT_EQ(stragglers_json(*stepless)["stepless"], true);
}

// Rank 2 is 30 ms late at a TP all-reduce and, 1 ms after it, at a DP one, in 9 of 10 steps: the
// others wait [0, 30] ms on one and [1, 31] ms on the other, 31 ms of the timeline, not 60. Summed
// over communicators the score doubled (and a rank late at enough groups passed 100% of the step).
TEST(StragglersTest, LatenessAtCollectivesInFlightTogetherCountsOnce) {
  CollectiveTrace trace("two_comms");
  const int64_t offsets[4] = {0, kMs / 10, 0, kMs / 5};
  for (int64_t k = 0; k < 10; ++k) {
    for (int rank = 0; rank < 4; ++rank) {
      const int64_t offset = rank == 2 ? (k < 9 ? 30 * kMs : kMs / 20) : offsets[rank];
      const int64_t start = k * 100 * kMs + offset;
      trace.add({.rank = rank,
                 .comm = "tp0",
                 .seq = static_cast<uint64_t>(k),
                 .start_ns = start,
                 .step = k});
      trace.add({.rank = rank,
                 .comm = "dp0",
                 .seq = static_cast<uint64_t>(k),
                 .start_ns = start + kMs,
                 .step = k});
      trace.step(rank, k, k * 100 * kMs, 100 * kMs);
    }
  }
  auto report = analyze_stragglers(trace.finish(), window({0, 1, 2, 3}, 0, int64_t{1} << 60, 0, 9));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  const RankLateness& r2 = report->ranks[2];
  EXPECT_EQ(r2.delayed, 18);
  EXPECT_EQ(r2.last, 18);
  EXPECT_DOUBLE_EQ(r2.late_p50_ms, 30.0);
  EXPECT_DOUBLE_EQ(r2.wait_per_step_ms, 27.9);  // 9 x 31 ms over 10 steps
  EXPECT_DOUBLE_EQ(r2.step_share, 0.279);
  EXPECT_EQ(report->straggler, 2);
}

// Eight ranks, TP groups {0-3} and {4-7}, DP groups {r, r + 4}, 100 ms steps: rank 5 computes
// 5 ms longer before its TP all-reduce (at +35 ms, its group's others at +30), so TP group 1
// starts its backward 5 ms behind and ranks 4-7 all arrive 5 ms late at their DP all-reduces
// (+85 against +80), which the other node waits for; the world all-reduce after them starts in
// sync. Every rank of TP group 1 is last there, but
// only rank 5's lateness is its own: 5 ms of waiting per step, all of it rank 5's. Charged to
// whoever arrived last, ranks 4, 6 and 7 took 5 ms each and rank 5 10 ms: no rank caused half,
// and "4 ranks take turns" keeping the others waiting 25 ms per step (25%), five times the truth.
void write_tp_dp_run(CollectiveTrace& trace, int slow_rank) {
  for (int64_t k = 0; k < 10; ++k) {
    const int64_t t = k * 100 * kMs;
    const uint64_t seq = static_cast<uint64_t>(k);
    for (int rank = 0; rank < 8; ++rank) {
      const int node = rank / 4;
      const int64_t behind = node == slow_rank / 4 ? 5 * kMs : 0;
      const int64_t jitter = (rank % 4) * kMs / 20;  // in sync: 0.15 ms apart at most
      std::vector<int> tp = {node * 4, node * 4 + 1, node * 4 + 2, node * 4 + 3};
      trace.add({.rank = rank,
                 .comm = node == 0 ? "tp0" : "tp1",
                 .seq = seq,
                 .start_ns = t + (rank == slow_rank ? 35 * kMs : 30 * kMs + jitter),
                 .group = tp,
                 .step = k});
      trace.add({.rank = rank,
                 .comm = "dp" + std::to_string(rank % 4),
                 .seq = seq,
                 .start_ns = t + 80 * kMs + jitter + behind,
                 .group = {rank % 4, rank % 4 + 4},
                 .step = k});
      trace.add({.rank = rank,
                 .comm = "world",
                 .seq = seq,
                 .start_ns = t + 90 * kMs + jitter,
                 .group = {0, 1, 2, 3, 4, 5, 6, 7},
                 .step = k});
      trace.step(rank, k, t, 100 * kMs);
    }
  }
}

TEST(StragglersTest, LatenessInheritedFromAnEarlierWaitIsTheOriginsNotThePeers) {
  CollectiveTrace trace("tp_dp");
  write_tp_dp_run(trace, 5);
  auto report = analyze_stragglers(trace.finish(),
                                   window({0, 1, 2, 3, 4, 5, 6, 7}, 0, int64_t{1} << 60, 0, 9));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->straggler, 5) << format_stragglers(*report);
  const RankLateness& r5 = report->ranks[5];
  EXPECT_EQ(r5.last, 20);  // its TP all-reduces and its DP ones: where it did arrive last
  EXPECT_DOUBLE_EQ(r5.late_p50_ms, 5.0);
  EXPECT_DOUBLE_EQ(r5.wait_per_step_ms, 5.0);
  EXPECT_DOUBLE_EQ(r5.wait_share, 1.0);
  for (int rank : {4, 6, 7}) {
    EXPECT_EQ(report->ranks[rank].last, 10) << rank;  // last at the DP all-reduces, as seen
    EXPECT_DOUBLE_EQ(report->ranks[rank].wait_per_step_ms, 0.0) << rank;
  }
  EXPECT_DOUBLE_EQ(report->wait_per_step_ms, 5.0);
  const std::vector<Finding> findings = straggler_findings(*report);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, "straggler");
  EXPECT_EQ(findings[0].severity, Severity::kWarning);  // 5% of the step
  EXPECT_DOUBLE_EQ(findings[0].impact, 0.05);
}

// Four DP groups {r, r + 4} held up at the same moment, each by its own late member (ranks 0-3
// in even steps, 4-7 in odd ones, 20 ms late): each rank waits 10 ms per step, and summed they
// read 80 ms of a 100 ms step, though the job only ever waited 20 ms of each step.
TEST(StragglersTest, TurnsTakenInGroupsHeldUpTogetherCountOnce) {
  CollectiveTrace trace("concurrent_turns");
  for (int64_t k = 0; k < 10; ++k) {
    for (int rank = 0; rank < 8; ++rank) {
      const bool late = (rank < 4) == (k % 2 == 0);
      trace.add({.rank = rank,
                 .comm = "dp" + std::to_string(rank % 4),
                 .seq = static_cast<uint64_t>(k),
                 .start_ns = k * 100 * kMs + 70 * kMs + (late ? 20 * kMs : 0),
                 .group = {rank % 4, rank % 4 + 4},
                 .step = k});
      trace.step(rank, k, k * 100 * kMs, 100 * kMs);
    }
  }
  auto report = analyze_stragglers(trace.finish(),
                                   window({0, 1, 2, 3, 4, 5, 6, 7}, 0, int64_t{1} << 60, 0, 9));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_FALSE(report->straggler) << format_stragglers(*report);
  EXPECT_DOUBLE_EQ(report->ranks[0].wait_per_step_ms, 10.0);
  EXPECT_DOUBLE_EQ(report->wait_per_step_ms, 20.0);
  const std::vector<Finding> findings = straggler_findings(*report);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, "rotating_lateness");
  EXPECT_DOUBLE_EQ(findings[0].impact, 0.2);
  EXPECT_NE(findings[0].evidence.find("20.0 ms per step, 20% of the step"), std::string::npos)
      << findings[0].evidence;
}

// A pipeline of three stages (ranks 0, 1, 2), rank 1 sleeping 40 ms before its forward in each
// of 10 steps of 100 ms: rank 2 posts its recv from rank 1 at +1 ms and rank 1 sends at +41 ms,
// so rank 1 is late by 40 ms; rank 0 sends in time. Then the loss all-reduce (ranks 0, 1 and 2
// at +5, +42 and +50 ms): rank 2, held up by rank 1, arrives 45 ms after rank 0, which is rank
// 1's doing but for 5 ms.
// Transfers were not counted: there was no straggler; with the held-up time charged to rank 2,
// rank 2 would take nearly half the blame.
TEST(StragglersTest, ASlowPipelineStageIsFoundByTheStagesWaitingOnItsSends) {
  CollectiveTrace trace("pipeline");
  for (int64_t k = 0; k < 10; ++k) {
    const int64_t t = k * 100 * kMs;
    const uint64_t seq = static_cast<uint64_t>(k);
    trace.add({.rank = 0, .comm = "pp01", .seq = seq, .op = "send", .start_ns = t,
               .group = {0, 1}, .peer = 1, .step = k});
    trace.add({.rank = 1, .comm = "pp01", .seq = seq, .op = "recv", .start_ns = t + kMs / 2,
               .group = {0, 1}, .peer = 0, .step = k});
    trace.add({.rank = 2, .comm = "pp12", .seq = seq, .op = "recv", .start_ns = t + kMs,
               .dur_ns = 40 * kMs, .group = {1, 2}, .peer = 1, .step = k});
    trace.add({.rank = 1, .comm = "pp12", .seq = seq, .op = "send", .start_ns = t + 41 * kMs,
               .group = {1, 2}, .peer = 2, .step = k});
    for (int rank = 0; rank < 3; ++rank) {
      trace.add({.rank = rank, .comm = "world", .seq = seq,
                 .start_ns = t + (rank == 0 ? 5 : rank == 1 ? 42 : 50) * kMs,
                 .group = {0, 1, 2}, .step = k});
      trace.step(rank, k, t, 100 * kMs);
    }
  }
  auto report = analyze_stragglers(trace.finish(), window({0, 1, 2}, 0, int64_t{1} << 60, 0, 9));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->straggler, 1) << format_stragglers(*report);
  const RankLateness& r1 = report->ranks[1];
  EXPECT_EQ(r1.last_op, "send");
  EXPECT_DOUBLE_EQ(r1.late_p50_ms, 40.0);
  EXPECT_DOUBLE_EQ(r1.wait_per_step_ms, 40.0);
  // Rank 2 held the loss all-reduce up 45 ms, 40 of them rank 1's (the skew of its send, which
  // rank 2's recv waited out): 5 ms are rank 2's own. Charged from the end of its recv (+41 ms)
  // it was 9, and the waiting charged for that all-reduce came to 49 ms of its 45 ms skew.
  EXPECT_DOUBLE_EQ(report->ranks[2].wait_per_step_ms, 5.0);
  EXPECT_DOUBLE_EQ(report->ranks[0].wait_per_step_ms, 0.0);
  // Late at transfers, a stage with more work looks the same as a slow host: a warning that
  // says so, and the advice starts from the stages' balance.
  const std::vector<Finding> findings = straggler_findings(*report);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  // Said of point-to-point transfers, a ring's as well as a pipeline's (it spoke of pipeline
  // stages only, to a 4-rank ring's straggler).
  EXPECT_NE(findings[0].evidence.find("at point-to-point transfers (a pipeline's stages, a ring's "
                                      "neighbours)"),
            std::string::npos)
      << findings[0].evidence;
  EXPECT_EQ(findings[0].advice.rfind("compare rank 1's compute with its peers': in a pipeline, per "
                                     "micro-batch with the other stages'",
                                     0),
            0u)
      << findings[0].advice;
}

// Ranks 0 and 1 train in a group of their own at 10 ms a step, ranks 2 and 3 in another at 100 ms
// a step, rank 3 arriving 80 ms late each time: rank 3's waits are 80% of its own group's step,
// not 145% of the run's mean step (55 ms).
TEST(StragglersTest, OfStepIsOfTheRanksOwnStep) {
  CollectiveTrace trace("groups");
  for (int64_t k = 0; k < 10; ++k) {
    for (int rank : {0, 1}) {
      trace.add({.rank = rank,
                 .comm = "fast",
                 .seq = static_cast<uint64_t>(k),
                 .start_ns = k * 10 * kMs,
                 .group = {0, 1},
                 .step = k});
      trace.step(rank, k, k * 10 * kMs, 10 * kMs);
    }
    for (int rank : {2, 3}) {
      trace.add({.rank = rank,
                 .comm = "slow",
                 .seq = static_cast<uint64_t>(k),
                 .start_ns = k * 100 * kMs + (rank == 3 ? 80 * kMs : 0),
                 .group = {2, 3},
                 .step = k});
      trace.step(rank, k, k * 100 * kMs, 100 * kMs);
    }
  }
  auto report = analyze_stragglers(trace.finish(), window({0, 1, 2, 3}, 0, int64_t{1} << 60, 0, 9));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  const RankLateness& r3 = report->ranks[3];
  EXPECT_DOUBLE_EQ(r3.wait_per_step_ms, 80.0);
  EXPECT_DOUBLE_EQ(r3.step_share, 0.8);
}

// Last at two delayed all-reduces only, 30 ms late each in 3 steps of 100 ms (20% of the step):
// a warning that says on how few, not a critical finding (a hung rank's victim looked like one).
TEST(StragglersTest, FewDelayedCollectivesMakeAWarningAtMost) {
  CollectiveTrace trace("few");
  for (int64_t k = 0; k < 3; ++k) {
    for (int rank = 0; rank < 2; ++rank) {
      const int64_t late = rank == 1 && k < 2 ? 30 * kMs : 0;
      trace.add({.rank = rank,
                 .seq = static_cast<uint64_t>(k),
                 .start_ns = k * 100 * kMs + late,
                 .group = {0, 1},
                 .step = k});
      trace.step(rank, k, k * 100 * kMs, 100 * kMs);
    }
  }
  auto report = analyze_stragglers(trace.finish(), window({0, 1}, 0, int64_t{1} << 60, 0, 2));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->straggler, 1) << format_stragglers(*report);
  EXPECT_DOUBLE_EQ(report->ranks[1].step_share, 0.2);
  std::vector<Finding> findings = straggler_findings(*report);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  EXPECT_NE(findings[0].evidence.find("on only 2 delayed collectives, which may be chance"),
            std::string::npos)
      << findings[0].evidence;
}

// Rank 1 is 600 ms late in two of ten steps only (those steps last 700 ms, the others 100 ms):
// 120 ms of waiting per step, which over the 100 ms median step read 120% of the step. The
// wait is a mean over the steps, and so is the step it is a share of: 1,200 ms of 2,200 ms.
TEST(StragglersTest, ARankSlowInSomeStepsOnlyIsAShareOfTheMeanStep) {
  CollectiveTrace trace("window");
  int64_t start = 0;
  for (int64_t k = 0; k < 10; ++k) {
    const int64_t late = k < 2 ? 600 * kMs : 0;
    for (int rank = 0; rank < 2; ++rank) {
      trace.add({.rank = rank,
                 .seq = static_cast<uint64_t>(k),
                 .start_ns = start + (rank == 1 ? late : 0),
                 .group = {0, 1},
                 .step = k});
      trace.step(rank, k, start, 100 * kMs + late);
    }
    start += 100 * kMs + late;
  }
  auto report = analyze_stragglers(trace.finish(), window({0, 1}, 0, int64_t{1} << 60, 0, 9));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_DOUBLE_EQ(report->median_step_ms, 100.0);
  EXPECT_DOUBLE_EQ(report->mean_step_ms, 220.0);
  ASSERT_EQ(report->straggler, 1) << format_stragglers(*report);
  EXPECT_DOUBLE_EQ(report->ranks[1].wait_per_step_ms, 120.0);
  EXPECT_NEAR(report->ranks[1].step_share, 1200.0 / 2200.0, 1e-12);
  EXPECT_NEAR(stragglers_json(*report)["ranks"][1]["step_share"].get<double>(), 1200.0 / 2200.0,
              1e-12);
  EXPECT_NE(straggler_findings(*report)[0].evidence.find("55% of the step"), std::string::npos)
      << straggler_findings(*report)[0].evidence;
}

// Each step another rank is 50 ms late (rank k % 4 in step k): nobody causes most of the
// waiting, so nobody is the straggler, but the job waits 50 ms of every 150 ms step. One finding
// says so; it was silent.
TEST(StragglersTest, LatenessThatTakesTurnsIsAFindingOfItsOwn) {
  CollectiveTrace trace("rotating");
  int64_t start = 0;
  for (int64_t k = 0; k < 40; ++k) {
    for (int rank = 0; rank < 4; ++rank) {
      const int64_t late = rank == k % 4 ? 50 * kMs : 0;
      trace.add({.rank = rank,
                 .seq = static_cast<uint64_t>(k),
                 .start_ns = start + 100 * kMs + late,
                 .step = k});
      trace.step(rank, k, start, 150 * kMs);
    }
    start += 150 * kMs;
  }
  auto report =
      analyze_stragglers(trace.finish(), window({0, 1, 2, 3}, 0, int64_t{1} << 60, 0, 39));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_FALSE(report->straggler) << format_stragglers(*report);
  std::vector<Finding> findings = straggler_findings(*report);
  ASSERT_EQ(findings.size(), 1u) << format_stragglers(*report);
  EXPECT_EQ(findings[0].kind, "rotating_lateness");
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  EXPECT_NEAR(findings[0].impact, 50.0 / 150.0, 0.01);
  EXPECT_NE(findings[0].evidence.find("4 ranks take turns arriving last"), std::string::npos)
      << findings[0].evidence;
  EXPECT_NE(findings[0].evidence.find("50.0 ms per step, 33% of the step"), std::string::npos)
      << findings[0].evidence;
}

// Exposed communication caused by a straggler is the others' waiting: the finding says how much,
// advises the straggler first, and its impact (and so its severity) is what remains. The helper's
// case: a 5 ms all-reduce behind a rank sleeping 50 ms, 56 ms of a 58 ms step exposed.
TEST(StragglersTest, ExposedCommunicationAStragglerCausesIsSaidToBeItsWaiting) {
  StragglerReport stragglers;
  stragglers.straggler = 2;
  RankLateness late;
  late.rank = 2;
  late.wait_per_step_ms = 50.0;
  late.step_share = 50.0 / 58.0;
  stragglers.ranks = {RankLateness{}, late};
  Finding exposed{"exposed_communication",
                  Severity::kCritical,
                  0,
                  56.0 / 58.0,
                  "communication takes ...",
                  "start gradient all-reduces during backward"};
  std::vector<Finding> findings = {exposed};
  account_for_the_straggler(stragglers, findings);
  EXPECT_NE(findings[0].evidence.find("up to 50.0 ms per step of it (86% of the step) is the "
                                      "other ranks waiting for rank 2, the straggler"),
            std::string::npos)
      << findings[0].evidence;
  EXPECT_EQ(findings[0].advice.rfind("first make rank 2 keep up", 0), 0u) << findings[0].advice;
  EXPECT_NEAR(findings[0].impact, 6.0 / 58.0, 1e-9);
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  // Ranks taking turns (rotating_lateness): their waiting, summed, is said and taken out too.
  StragglerReport turns;
  for (int rank = 0; rank < 4; ++rank) {
    RankLateness r;
    r.rank = rank;
    r.wait_per_step_ms = 8.0;
    r.step_share = 8.0 / 58.0;
    turns.ranks.push_back(r);
  }
  turns.wait_per_step_ms = 32.0;  // the union of their waits
  turns.mean_step_ms = 58.0;
  std::vector<Finding> rotating = {exposed, Finding{"rotating_lateness"}};
  account_for_the_straggler(turns, rotating);
  EXPECT_NE(rotating[0].evidence.find("up to 32.0 ms per step of it (55% of the step) is the "
                                      "other ranks waiting for one another"),
            std::string::npos)
      << rotating[0].evidence;
  EXPECT_NEAR(rotating[0].impact, 24.0 / 58.0, 1e-9);
  // Exposed communication smaller than the waiting: the part said is no more than the whole, in
  // ms as in share (it read 50.0 ms beside 17%).
  std::vector<Finding> small = {exposed};
  small[0].impact = 10.0 / 58.0;
  account_for_the_straggler(stragglers, small);
  EXPECT_NE(small[0].evidence.find("up to 10.0 ms per step of it (17% of the step)"),
            std::string::npos)
      << small[0].evidence;
  EXPECT_DOUBLE_EQ(small[0].impact, 0.0);
  // Without either nothing changes.
  std::vector<Finding> alone = {exposed};
  account_for_the_straggler(StragglerReport{}, alone);
  EXPECT_EQ(alone[0].evidence, exposed.evidence);
  EXPECT_EQ(alone[0].impact, exposed.impact);
}

// 8 ms late at 9 of 10 steps of 100 ms: 7.2 ms of waiting per step, 7.2%: a warning.
TEST(StragglersTest, SeverityFollowsShareOfStep) {
  CollectiveTrace trace("warning");
  write_run(trace, 8 * kMs);
  auto report = analyze_stragglers(trace.finish(), window({0, 1, 2, 3}, 0, int64_t{1} << 60, 0, 9));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  std::vector<Finding> findings = straggler_findings(*report);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
}

// Four ranks on two cores: each is last at about a quarter of the delayed collectives. Rank 1's
// 4 of 10, 21% of the step, is what chance gives one of 4 ranks 22% of the time: a warning that
// says so, not a critical straggler; 9 of 10 is no chance.
TEST(StragglersTest, LastNoMoreOftenThanChanceIsNoCriticalStraggler) {
  StragglerReport report;
  for (int rank = 0; rank < 4; ++rank) {
    RankLateness r;
    r.rank = rank;
    r.matched = 12;
    r.delayed = 10;
    r.last = rank == 1 ? 4 : 2;
    r.step_share = rank == 1 ? 0.21 : 0.05;
    r.last_op = "all_reduce";
    r.last_op_share = r.last / 10.0;
    report.ranks.push_back(r);
  }
  report.straggler = 1;
  std::vector<Finding> findings = straggler_findings(report);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  EXPECT_NE(findings[0].evidence.find("last at 4 of 10 delayed collectives, which chance alone "
                                      "gives one of 4 ranks 22% of the time"),
            std::string::npos)
      << findings[0].evidence;
  report.ranks[1].last = 9;
  findings = straggler_findings(report);
  EXPECT_EQ(findings[0].severity, Severity::kCritical);
  EXPECT_EQ(findings[0].evidence.find("chance"), std::string::npos) << findings[0].evidence;
}

// A window that is the warm-up step only (a hang after the first step): the lateness there may
// be start-up costs, so the straggler is named at info severity with that caveat.
TEST(StragglersTest, AWarmUpOnlyWindowNamesTheStragglerWithACaveat) {
  CollectiveTrace trace("warm_up_only");
  write_run(trace, 30 * kMs);
  AnalysisWindow w = window({0, 1, 2, 3}, 0, int64_t{1} << 60, 0, 9);
  w.warm_up_only = true;
  auto report = analyze_stragglers(trace.finish(), w);
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  std::vector<Finding> findings = straggler_findings(*report);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].rank, 2);
  EXPECT_EQ(findings[0].severity, Severity::kInfo);
  EXPECT_NE(findings[0].evidence.find("in the warm-up step only (the trace has one step)"),
            std::string::npos)
      << findings[0].evidence;
  EXPECT_EQ(findings[0].advice.rfind("record more steps to tell; then check rank 2's host", 0), 0u)
      << findings[0].advice;
}

// 0.5 ms late is in sync (skew under 1 ms); 9 x 5 ms over 10 steps of 1 s is 0.45% of the
// step, under the 2% floor: no straggler either way, though rank 2 is last most often.
TEST(StragglersTest, LatenessWithinNoiseIsNoStraggler) {
  {
    CollectiveTrace trace("noise_ms");
    write_run(trace, kMs / 2);
    auto report =
        analyze_stragglers(trace.finish(), window({0, 1, 2, 3}, 0, int64_t{1} << 60, 0, 9));
    ASSERT_TRUE(report.is_ok()) << report.status().message();
    EXPECT_EQ(report->ranks[2].delayed, 0);
    EXPECT_FALSE(report->straggler.has_value());
    EXPECT_TRUE(straggler_findings(*report).empty());
  }
  {
    CollectiveTrace trace("noise_share");
    write_run(trace, 5 * kMs, 1000 * kMs);
    auto report =
        analyze_stragglers(trace.finish(), window({0, 1, 2, 3}, 0, int64_t{1} << 60, 0, 9));
    ASSERT_TRUE(report.is_ok()) << report.status().message();
    EXPECT_EQ(report->ranks[2].last, 9);
    EXPECT_DOUBLE_EQ(report->ranks[2].step_share, 0.0045);
    EXPECT_FALSE(report->straggler.has_value());
  }
}

// Two ranks, 30 steps of 5 ms, one all-reduce at +3 ms: rank 1 arrives `late` after rank 0 at
// 27 of them, rank 0 `noise` after rank 1 at the other 3. A healthy 2-rank gloo job measured
// 1.7-2.0 ms this way (rank 1 last at 80-95%), and rank 0 about as late when it was last.
void write_two_rank_run(CollectiveTrace& trace, int64_t late, int64_t noise) {
  for (int64_t k = 0; k < 30; ++k) {
    const bool rank_0_late = k % 10 == 0;
    for (int rank = 0; rank < 2; ++rank) {
      const int64_t offset = rank == 1 ? (rank_0_late ? 0 : late) : (rank_0_late ? noise : 0);
      trace.add({.rank = rank,
                 .seq = static_cast<uint64_t>(k),
                 .start_ns = k * 5 * kMs + 3 * kMs / 2 + offset,
                 .group = {0, 1},
                 .step = k});
      trace.step(rank, k, k * 5 * kMs, 5 * kMs);
    }
  }
}

// 1.8 ms late, with rank 0 1.7 ms late when it is last: consistent, but no later than the run's
// own noise. It read "[critical] straggler (rank 1): ... 33% of the step"; now it is named at
// info only and says why. A 5 ms straggler over the same noise stays critical.
TEST(StragglersTest, LatenessWithinTheRunsOwnNoiseIsInfoOnly) {
  CollectiveTrace noisy("noise_two_ranks");
  write_two_rank_run(noisy, 18 * kMs / 10, 17 * kMs / 10);
  auto report = analyze_stragglers(noisy.finish(), window({0, 1}, 0, int64_t{1} << 60, 0, 29));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->straggler, 1) << format_stragglers(*report);
  EXPECT_TRUE(report->ranks[1].within_noise);
  EXPECT_FALSE(report->ranks[1].hold_up.has_value());  // 1.8 ms every time: no one hold-up
  EXPECT_DOUBLE_EQ(report->others_late_ms, 1.7);
  std::vector<Finding> findings = straggler_findings(*report);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kInfo);
  EXPECT_NE(findings[0].evidence.find("within this run's noise: 1.8 ms is under 2.7 ms, the "
                                      "other ranks' own lateness when last (1.7 ms) plus 1 ms"),
            std::string::npos)
      << findings[0].evidence;

  CollectiveTrace slow("slow_two_ranks");
  write_two_rank_run(slow, 5 * kMs, 35 * kMs / 10);
  report = analyze_stragglers(slow.finish(), window({0, 1}, 0, int64_t{1} << 60, 0, 29));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->straggler, 1) << format_stragglers(*report);
  EXPECT_FALSE(report->ranks[1].within_noise);
  findings = straggler_findings(*report);
  EXPECT_EQ(findings[0].severity, Severity::kCritical) << findings[0].evidence;
  EXPECT_EQ(findings[0].evidence.find("noise"), std::string::npos) << findings[0].evidence;
}

// Two ranks taking turns 1.5 ms late in 5 ms steps (a healthy gloo job, rotating_lateness at
// 30% of the step): each is late by no more than host scheduling makes, so the finding is info,
// and says so; it was a warning.
TEST(StragglersTest, TurnsTakenWithinNoiseAreInfoOnly) {
  CollectiveTrace trace("noise_turns");
  for (int64_t k = 0; k < 30; ++k) {
    for (int rank = 0; rank < 2; ++rank) {
      trace.add({.rank = rank,
                 .seq = static_cast<uint64_t>(k),
                 .start_ns = k * 5 * kMs + kMs + (rank == k % 2 ? 3 * kMs / 2 : 0),
                 .group = {0, 1},
                 .step = k});
      trace.step(rank, k, k * 5 * kMs, 5 * kMs);
    }
  }
  auto report = analyze_stragglers(trace.finish(), window({0, 1}, 0, int64_t{1} << 60, 0, 29));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_FALSE(report->straggler) << format_stragglers(*report);
  const std::vector<Finding> findings = straggler_findings(*report);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, "rotating_lateness");
  EXPECT_DOUBLE_EQ(findings[0].impact, 0.3);
  EXPECT_EQ(findings[0].severity, Severity::kInfo);
  EXPECT_NE(findings[0].evidence.find("each late by under 2 ms at the median"), std::string::npos)
      << findings[0].evidence;
}

// Four ranks, 40 steps of 20 ms: each step rank k % 4 arrives 3 ms late, and rank 2 100 ms late
// in steps 9, 19, 29 and 39. Rank 2 is last at 14 of 40 (chance gives one of 4 ranks that 10%
// of the time), and it read "it may not be slower than the others"; it is late now and then, by
// far more than anyone: named with the times, how late and the steps.
TEST(StragglersTest, LatenessThatRecursNowAndThenIsAnIntermittentStraggler) {
  CollectiveTrace trace("intermittent");
  int64_t start = 0;
  for (int64_t k = 0; k < 40; ++k) {
    const bool spike = k % 10 == 9;
    for (int rank = 0; rank < 4; ++rank) {
      const int64_t late = spike ? (rank == 2 ? 100 * kMs : 0) : (rank == k % 4 ? 3 * kMs : 0);
      trace.add({.rank = rank,
                 .seq = static_cast<uint64_t>(k),
                 .start_ns = start + 15 * kMs + late,
                 .step = k});
      trace.step(rank, k, start, spike ? 120 * kMs : 20 * kMs);
    }
    start += spike ? 120 * kMs : 20 * kMs;
  }
  auto report =
      analyze_stragglers(trace.finish(), window({0, 1, 2, 3}, 0, int64_t{1} << 60, 0, 39));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->straggler, 2) << format_stragglers(*report);
  const RankLateness& r2 = report->ranks[2];
  EXPECT_EQ(r2.last, 14);
  EXPECT_EQ(r2.late_spikes, 4);
  EXPECT_DOUBLE_EQ(r2.spike_p50_ms, 100.0);
  EXPECT_DOUBLE_EQ(r2.late_max_ms, 100.0);
  EXPECT_EQ(r2.spike_steps, (std::vector<int64_t>{9, 19, 29, 39}));
  EXPECT_EQ(report->ranks[0].late_spikes, 0);  // 3 ms every time it is last: its usual
  const std::vector<Finding> findings = straggler_findings(*report);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kCritical) << findings[0].evidence;
  EXPECT_EQ(findings[0].evidence.find("may not be slower"), std::string::npos)
      << findings[0].evidence;
  EXPECT_EQ(findings[0].evidence.rfind("rank 2 is late now and then, not every step: 4 times "
                                       "100.0 ms late at the median (max 100.0 ms, against 3.0 "
                                       "ms the rest of the time) in steps 9, 19, 29 and 39; ",
                                       0),
            0u)
      << findings[0].evidence;
  EXPECT_EQ(stragglers_json(*report)["ranks"][2]["spike_steps"].size(), 4u);
}

// Two ranks, 20 steps of 5 ms with an all-reduce each, rank 1 1.9 ms late at most and rank 0 as
// late at steps 0 and 10; in step 10 rank 0 alone saves a checkpoint, 300 ms, while rank 1 waits
// at a barrier (a gloo DDP job measured 304 ms so). Rank 0's median lateness is the run's noise,
// and the finding read "within this run's noise ... it may not be slower than the others"
// without naming the barrier; now it names the one hold-up, where and when.
TEST(StragglersTest, OneLongHoldUpIsNamedNotHedgedAsNoise) {
  CollectiveTrace trace("hold_up");
  int64_t start = 0;
  uint64_t seq = 0;
  for (int64_t k = 0; k < 20; ++k) {
    const bool rank_0_late = k % 10 == 0;
    const int64_t step_ns = k == 10 ? 305 * kMs : 5 * kMs;
    for (int rank = 0; rank < 2; ++rank) {
      const int64_t late = 19 * kMs / 10;
      const int64_t offset = (rank == 0) == rank_0_late ? late : 0;
      trace.add({.rank = rank,
                 .comm = "default_pg:0",
                 .seq = seq,
                 .start_ns = start + kMs + offset,
                 .group = {0, 1},
                 .step = k});
      if (k == 10) {
        trace.add({.rank = rank,
                   .comm = "default_pg:0",
                   .seq = seq + 1,
                   .op = "barrier",
                   .bytes = 0,
                   .start_ns = start + 4 * kMs + (rank == 0 ? 300 * kMs : 0),
                   .group = {0, 1},
                   .step = k});
      }
      trace.step(rank, k, start, step_ns);
    }
    seq += k == 10 ? 2 : 1;
    start += step_ns;
  }
  auto report = analyze_stragglers(trace.finish(), window({0, 1}, 0, int64_t{1} << 60, 0, 19));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->straggler, 0) << format_stragglers(*report);
  const RankLateness& r0 = report->ranks[0];
  EXPECT_DOUBLE_EQ(r0.late_p50_ms, 1.9);  // its usual: the noise
  EXPECT_EQ(r0.late_spikes, 0);           // once is no pattern
  EXPECT_FALSE(r0.within_noise);
  ASSERT_TRUE(r0.hold_up.has_value());
  EXPECT_DOUBLE_EQ(r0.hold_up->late_ms, 300.0);
  EXPECT_EQ(r0.hold_up->op, "barrier");
  EXPECT_EQ(r0.hold_up->comm_id, "default_pg:0");
  EXPECT_EQ(r0.hold_up->seq, 11u);
  EXPECT_EQ(r0.hold_up->step, 10);
  EXPECT_FALSE(report->ranks[1].hold_up.has_value());
  const std::vector<Finding> findings = straggler_findings(*report, false);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kCritical) << findings[0].evidence;
  EXPECT_EQ(findings[0].evidence.find("may not be slower"), std::string::npos)
      << findings[0].evidence;
  EXPECT_EQ(findings[0].evidence.rfind("rank 0 held the others up once: 300.0 ms late at the "
                                       "barrier of default_pg:0 seq 11 in step 10 (against 1.9 "
                                       "ms late at the median otherwise), ",
                                       0),
            0u)
      << findings[0].evidence;
  EXPECT_NE(findings[0].advice.find("before that barrier in step 10"), std::string::npos)
      << findings[0].advice;
  const nlohmann::json json = stragglers_json(*report);
  EXPECT_EQ(json["ranks"][0]["hold_up"]["seq"], 11);
  EXPECT_EQ(json["ranks"][0]["hold_up"]["step"], 10);
  EXPECT_DOUBLE_EQ(json["ranks"][0]["hold_up"]["usual_late_ms"].get<double>(), 1.9);
  EXPECT_TRUE(json["ranks"][1]["hold_up"].is_null());
}

// Rank 1 is last only once, 297 ms late at a barrier (monitored_barrier after a sleep): the
// finding compared the hold-up with itself, "297.0 ms late ... (against 297.0 ms late at the
// median)", the median of its latenesses being that one.
TEST(StragglersTest, AHoldUpThatIsTheRanksOnlyLatenessIsNotComparedWithItself) {
  CollectiveTrace trace("only_once");
  int64_t start = 0;
  for (int64_t k = 0; k < 10; ++k) {
    const int64_t step_ns = k == 5 ? 305 * kMs : 5 * kMs;
    for (int rank = 0; rank < 3; ++rank) {
      // Rank 2 is last at every all-reduce, 1.9 ms late; rank 1 only at the barrier.
      trace.add({.rank = rank,
                 .comm = "default_pg:0",
                 .seq = static_cast<uint64_t>(2 * k),
                 .start_ns = start + kMs + (rank == 2 ? 19 * kMs / 10 : 0),
                 .group = {0, 1, 2},
                 .step = k});
      if (k == 5) {
        trace.add({.rank = rank,
                   .comm = "default_pg:0",
                   .seq = static_cast<uint64_t>(2 * k + 1),
                   .op = "barrier",
                   .bytes = 0,
                   .start_ns = start + 4 * kMs + (rank == 1 ? 297 * kMs : 0),
                   .group = {0, 1, 2},
                   .step = k});
      }
      trace.step(rank, k, start, step_ns);
    }
    start += step_ns;
  }
  auto report = analyze_stragglers(trace.finish(), window({0, 1, 2}, 0, int64_t{1} << 60, 0, 9));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->straggler, 1) << format_stragglers(*report);
  const RankLateness& r1 = report->ranks[1];
  ASSERT_TRUE(r1.hold_up.has_value()) << format_stragglers(*report);
  EXPECT_DOUBLE_EQ(r1.hold_up->late_ms, 297.0);
  EXPECT_FALSE(r1.hold_up->usual_late_ms.has_value());
  const std::vector<Finding> findings = straggler_findings(*report, false);
  ASSERT_FALSE(findings.empty());
  EXPECT_NE(findings[0].evidence.find("297.0 ms late at the barrier of default_pg:0 seq 11 in "
                                      "step 5 (the only time it arrived last), "),
            std::string::npos)
      << findings[0].evidence;
  EXPECT_EQ(findings[0].evidence.find("against 297.0"), std::string::npos) << findings[0].evidence;
  EXPECT_TRUE(stragglers_json(*report)["ranks"][1]["hold_up"]["usual_late_ms"].is_null());
}

// dp groups {0, 2} and {1, 3}, then a world all-reduce, each step. In step 5 rank 2 is stopped
// (SIGSTOP) inside its dp all-reduce: both members sit in it 44.87 s with every member in, then
// reach the world all-reduce together, rank 0 2 ms after rank 2. Their lateness is the stalled
// transfer's, not rank 0's: it was named the critical straggler ("check rank 0's host").
TEST(StragglersTest, LatenessFromATransferThatStalledWithEveryMemberInIsNoRanks) {
  CollectiveTrace trace("stalled");
  int64_t start = 0;
  for (int64_t k = 0; k < 10; ++k) {
    const uint64_t seq = static_cast<uint64_t>(k);
    const int64_t stall = k == 5 ? 44'870 * kMs : 0;
    for (int rank = 0; rank < 4; ++rank) {
      const bool first_pair = rank % 2 == 0;
      trace.add({.rank = rank,
                 .comm = first_pair ? "dp02" : "dp13",
                 .seq = seq,
                 .start_ns = start + kMs + (rank == 3 ? kMs / 5 : 0),
                 .dur_ns = 2 * kMs + (first_pair ? stall : 0),
                 .group = first_pair ? std::vector<int>{0, 2} : std::vector<int>{1, 3},
                 .step = k});
      const int64_t arrive =
          start + 4 * kMs + (first_pair ? stall : 0) + (rank == 0 && k == 5 ? 2 * kMs : 0);
      trace.add({.rank = rank,
                 .comm = "world",
                 .seq = seq,
                 .start_ns = arrive,
                 .group = {0, 1, 2, 3},
                 .step = k});
      trace.step(rank, k, start, 10 * kMs + stall);
    }
    start += 10 * kMs + stall;
  }
  auto report = analyze_stragglers(trace.finish(), window({0, 1, 2, 3}, 0, int64_t{1} << 60, 0, 9));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_LT(report->ranks[0].wait_per_step_ms, 1.0) << format_stragglers(*report);
  EXPECT_FALSE(report->ranks[0].hold_up.has_value()) << format_stragglers(*report);
  for (const Finding& f : straggler_findings(*report)) {
    EXPECT_NE(f.severity, Severity::kCritical) << f.evidence;
    EXPECT_EQ(f.evidence.find("rank 0"), std::string::npos) << f.evidence;
  }
}

// Only analysed ranks get a row; their lateness is still measured against every member.
TEST(StragglersTest, RankSelectionKeepsLatenessAgainstAllMembers) {
  CollectiveTrace trace("selection");
  write_run(trace, 30 * kMs);
  auto report = analyze_stragglers(trace.finish(), window({2}, 0, int64_t{1} << 60, 0, 9));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->ranks.size(), 1u);
  EXPECT_EQ(report->ranks[0].rank, 2);
  EXPECT_DOUBLE_EQ(report->ranks[0].late_p50_ms, 30.0);
  EXPECT_EQ(report->straggler, 2);
}

Finding rank_0_failed() {
  Finding failed;
  failed.kind = "rank_failed";
  failed.rank = 0;
  failed.advice = "start from rank 0";
  return failed;
}

// Rank 0 aborted on the size mismatch rank 1 caused: rank_failed points at rank 1. Without a
// desync of another rank, its advice stays.
TEST(FollowTheDesync, RankFailedPointsAtTheDesyncsRank) {
  const Finding failed = rank_0_failed();
  Finding desync;
  desync.kind = "desync";
  desync.rank = 1;
  std::vector<Finding> findings = {failed, desync};
  follow_the_desync(findings);
  EXPECT_NE(findings[0].advice.find("which rank 1 caused"), std::string::npos)
      << findings[0].advice;
  EXPECT_NE(findings[0].advice.find("start from rank 1"), std::string::npos);
  std::vector<Finding> own = {failed, desync};
  own[1].rank = 0;
  follow_the_desync(own);
  EXPECT_EQ(own[0].advice, "start from rank 0");
}

// Two ranks (gloo's "Received data size doesn't match" abort): the desync names no rank, and the
// failed rank is not told to start from itself.
TEST(FollowTheDesync, RankFailedPointsAtADesyncOfNoMajority) {
  const Finding failed = rank_0_failed();
  Finding desync;
  desync.kind = "desync";
  std::vector<Finding> findings = {failed, desync};
  follow_the_desync(findings);
  EXPECT_NE(findings[0].advice.find("followed from the desync below"), std::string::npos)
      << findings[0].advice;
  EXPECT_EQ(findings[0].advice.find("start from rank 0"), std::string::npos);
}

}  // namespace
}  // namespace partrain::analyzers
