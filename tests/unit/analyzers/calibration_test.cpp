// Calibration from traces: the line fit, busbw and latency recovered from collectives of known
// durations, and the compute scale from compute slices of a built-in workload's run.
#include "analyzers/calibration.h"

#include <gtest/gtest.h>

#include "analyzers/layout_search.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_fixture.h"

namespace partrain::analyzers {
namespace {

TEST(FitLine, RecoversAnExactLineAndRefusesADegenerateOne) {
  auto fit = fit_line({{1, 12}, {2, 14}, {4, 18}});
  ASSERT_TRUE(fit);
  EXPECT_NEAR(fit->intercept, 10, 1e-9);
  EXPECT_NEAR(fit->slope, 2, 1e-9);
  EXPECT_FALSE(fit_line({{3, 1}, {3, 2}}));
  EXPECT_FALSE(fit_line({{1, 5}, {2, 4}}));  // negative slope: not a bandwidth
}

CostModel uncalibrated() {
  Machines m;
  m.gpus = 4;
  m.gpus_per_node = 4;
  m.intra_node = {20e9, 2e-6};
  m.inter_node = {10e9, 8e-6};
  return {memory::gpt_model(4, 256, 8, 512, 128),
          *memory::precision_recipe("fp32", memory::Optimizer::kAdamW),
          CollectiveCost(m),
          {1e12, 0.5, 100e9, 0, 1},
          100e9,
          false,
          25e6};
}

// Four ranks all-reduce 1 MB and 16 MB; the last to arrive takes exactly
// 200 us + S x 1.5 / 5 GB/s, the others waited 1, 2 and 3 ms longer for it (arrival skew, a
// pipeline's or a straggler's): the fit is of the transfer alone, 200 us over 4 latency steps
// (issue 35 item 6: the average member's 1.7 ms read waiting as latency).
TEST(Calibration, FitsBusbwAndLatencyFromTheLastMemberToArrive) {
  partrain::testing::ScratchDir dir;
  std::vector<profiler::TraceEvent> events;
  uint64_t seq = 0;
  for (double bytes : {1e6, 16e6}) {
    const double seconds = 200e-6 + bytes * 1.5 / 5e9;
    for (int repeat = 0; repeat < 3; ++repeat, ++seq) {
      for (int rank = 0; rank < 4; ++rank) {
        const auto dur = static_cast<int64_t>(seconds * 1e9) + rank * 1'000'000;  // late ranks
        events.push_back(partrain::testing::completed_all_reduce(
            "dp", rank, {0, 1, 2, 3}, seq, static_cast<uint64_t>(bytes),
            static_cast<int64_t>(seq) * 100'000'000, dur));
      }
    }
  }
  auto trace = partrain::testing::write_completed_trace(dir.path() / "t.db", "{}", 4, events);
  auto c = measure_calibration(trace.db, "t.db", uncalibrated(), 1);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_FALSE(c->compute_scale);  // no run config: not a built-in workload
  ASSERT_EQ(c->collectives.size(), 1u);
  const CollectiveFit& fit = c->collectives[0];
  EXPECT_EQ(fit.op, CostedOp::kAllReduce);
  EXPECT_EQ(fit.group_size, 4);
  EXPECT_EQ(fit.sizes, 2);
  EXPECT_EQ(fit.samples, 6);
  EXPECT_NEAR(fit.link.bandwidth, 5e9, 5e9 * 1e-3);
  EXPECT_NEAR(fit.link.latency_s, 200e-6 / 4, 1e-7);  // 4 latency steps for 4 ranks
  EXPECT_LT(fit.rms_error, 1e-3);                     // an exact line

  CostModel model = uncalibrated();
  std::vector<Calibration> calibrations{*c};
  apply_calibrations(calibrations, model);
  EXPECT_FALSE(calibrations[0].step_scale);  // no run config: no own step to predict
  EXPECT_EQ(model.step_scale, 1);
  EXPECT_NEAR(model.comm.seconds(CostedOp::kAllReduce, 8e6, 4, LinkLevel::kIntraNode),
              200e-6 + 8e6 * 1.5 / 5e9, 1e-6);
}

// A dp4 run of the built-in gpt whose compute took 3x what the preset predicts.
TEST(Calibration, ComputeScaleIsMeasuredOverPredictedForTheRunsOwnLayout) {
  const std::string config =
      R"({"workload":"gpt","precision":"fp32","recompute":"none",)"
      R"("model":{"layers":4,"hidden":256,"heads":8,"seq":128,"vocab":512,"ffn":1024},)"
      R"("layout":{"world":4,"dp":4,"tp":1,"pp":1,"micro_batch":1}})";
  CostModel model = uncalibrated();
  memory::EstimateInput in;
  in.model = model.model;
  in.recipe = model.recipe;
  in.layout.dp = 4;
  in.reserve_bytes = 0;
  in.bucket_bytes = 0;
  const StepCost predicted = step_cost(model, *memory::estimate_memory(in));
  const auto compute_ns = static_cast<int64_t>(3 * predicted.compute_s * 1e9);
  const auto adamw_ns = static_cast<int64_t>(2 * predicted.optimizer_s * 1e9);

  partrain::testing::ScratchDir dir;
  std::vector<profiler::TraceEvent> events;
  for (int rank = 0; rank < 4; ++rank) {
    for (int64_t step = 0; step < 4; ++step) {
      const int64_t t0 = step * 10'000'000'000;
      const int64_t warm = step == 0 ? 5 : 1;  // the warm-up step is slow and left out
      // Rank 2 is the slowest (9 s a step); the warm-up step, left out, is slower still.
      const int64_t step_ns = step == 0 ? 9'900'000'000 : rank == 2 ? 9'000'000'000 : 8'000'000'000;
      events.push_back(profiler::StepEvent{rank, step, t0, step_ns, 1.0, 128});
      events.push_back(profiler::SliceEvent{rank, profiler::TrackKind::kCpuThread, "main",
                                            "block.forward", profiler::SliceCategory::kCompute, t0,
                                            warm * compute_ns / 3, step, 0, 0});
      events.push_back(profiler::SliceEvent{rank, profiler::TrackKind::kCpuThread, "main",
                                            "block.backward", profiler::SliceCategory::kCompute,
                                            t0 + compute_ns, warm * compute_ns * 2 / 3, step, 0,
                                            0});
      events.push_back(profiler::SliceEvent{rank, profiler::TrackKind::kCpuThread, "main", "adamw",
                                            profiler::SliceCategory::kCompute, t0 + 3 * compute_ns,
                                            adamw_ns, step, -1, -1});
    }
  }
  auto trace = partrain::testing::write_completed_trace(dir.path() / "t.db", config, 4, events);
  auto c = measure_calibration(trace.db, "t.db", model, 1);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_TRUE(c->compute_scale);
  EXPECT_NEAR(*c->compute_scale, 3, 1e-6);
  ASSERT_TRUE(c->optimizer_scale);
  EXPECT_NEAR(*c->optimizer_scale, 2, 1e-6);
  EXPECT_EQ(c->run_layout, "dp4 tp1 pp1 mb1 z0");

  std::vector<Calibration> calibrations{*c};
  apply_calibrations(calibrations, model);
  const StepCost after = step_cost(model, *memory::estimate_memory(in));
  EXPECT_NEAR(after.compute_s, 3 * predicted.compute_s, 1e-6 * predicted.compute_s);
  EXPECT_NEAR(after.optimizer_s, 2 * predicted.optimizer_s, 1e-6 * predicted.optimizer_s);

  // The steps took 9 s (the slowest rank, the median after the warm-up): with compute and the
  // optimizer calibrated the model predicts less, and the step scale makes up the rest, so the
  // run's own layout is predicted at exactly its measured step.
  ASSERT_TRUE(calibrations[0].own_run);
  EXPECT_NEAR(calibrations[0].own_run->measured_step_s, 9.0, 1e-9);
  ASSERT_TRUE(calibrations[0].step_scale);
  const StepCost own = step_cost(model, calibrations[0].own_run->estimate);
  const double modelled = own.step_s - own.overhead_s;
  EXPECT_LT(modelled, 1.0);
  EXPECT_NEAR(calibrations[0].predicted_step_s, modelled, 1e-9 * modelled);
  EXPECT_NEAR(*calibrations[0].step_scale, 9.0 / modelled, 1e-9);
  EXPECT_NEAR(model.step_scale, 9.0 / modelled, 1e-9);
  EXPECT_NEAR(own.step_s, 9.0, 1e-9);
}

// Two runs, one measured 2x and one 8x its prediction: the step scale is their geometric mean.
TEST(Calibration, StepScaleOfSeveralRunsIsTheGeometricMeanOfEach) {
  std::vector<Calibration> calibrations(3);
  calibrations[0].step_scale = 2.0;
  calibrations[1].step_scale = 8.0;  // calibrations[2]: collectives only, no step
  ASSERT_TRUE(combined_step_scale(calibrations));
  EXPECT_NEAR(*combined_step_scale(calibrations), 4.0, 1e-12);
  EXPECT_FALSE(combined_step_scale({Calibration{}}));
}

// A foreign job under `partrain trace` records no steps: every collective is the window.
// Issue 35 item 6: one compute scale for every layout could not capture that the tp ranks ran the
// same FLOPs faster (their GEMMs are narrower). Runs with tp 1 measured 4x and 1x (2x together)
// and a tp 2 run 0.5x: tp 1 layouts take 2x, tp 2 and tp 4 (nearer 2 than 1) 0.5x.
TEST(Calibration, ComputeScalesArePerTensorParallelDegree) {
  std::vector<Calibration> calibrations(3);
  calibrations[0].compute_scale = 4.0;
  calibrations[1].compute_scale = 1.0;
  calibrations[2].compute_scale = 0.5;
  calibrations[2].compute_tp = 2;
  CostModel model = uncalibrated();
  memory::EstimateInput in;
  in.model = model.model;
  in.recipe = model.recipe;
  in.reserve_bytes = 0;
  auto compute = [&](const CostModel& m, int tp) {
    in.layout.tp = tp;
    return step_cost(m, *memory::estimate_memory(in)).compute_s;
  };
  const double tp1 = compute(model, 1), tp2 = compute(model, 2), tp4 = compute(model, 4);
  apply_calibrations(calibrations, model);
  EXPECT_NEAR(compute_scale_for(model, 1), 2.0, 1e-12);
  EXPECT_NEAR(compute(model, 1), 2.0 * tp1, 1e-9 * tp1);
  EXPECT_NEAR(compute(model, 2), 0.5 * tp2, 1e-9 * tp2);
  EXPECT_NEAR(compute(model, 4), 0.5 * tp4, 1e-9 * tp4);
  EXPECT_EQ(compute_scale_for(uncalibrated(), 8), 1.0);
}

TEST(Calibration, CollectivesOfATraceWithoutStepsAreAllUsed) {
  partrain::testing::ScratchDir dir;
  std::vector<profiler::TraceEvent> events;
  for (uint64_t seq = 0; seq < 4; ++seq) {
    const double bytes = seq % 2 == 0 ? 1e6 : 8e6;
    for (int rank = 0; rank < 2; ++rank) {
      auto r = partrain::testing::completed_all_reduce(
          "world", rank, {0, 1}, seq, static_cast<uint64_t>(bytes),
          static_cast<int64_t>(seq) * 100'000'000, static_cast<int64_t>(bytes / 2e9 * 1e9));
      r.step = -1;
      events.push_back(r);
    }
  }
  auto trace = partrain::testing::write_completed_trace(dir.path() / "t.db", "{}", 2, events);
  auto c = measure_calibration(trace.db, "t.db", uncalibrated(), 1);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_EQ(c->collectives.size(), 1u);
  EXPECT_EQ(c->collectives[0].samples, 4);
  EXPECT_NEAR(c->collectives[0].link.bandwidth, 2e9, 2e9 * 1e-3);  // 2 ranks: busbw = algbw
}

// The 4-byte loss all-reduce over the world, at one size only, is all latency: read as
// bandwidth it would be 1e-6 GB/s and make every 4-rank all-reduce take minutes, so it is left
// uncalibrated with a note, while the 2-rank all-reduce at two sizes is fitted.
TEST(Calibration, ASingleTinyMessageSizeIsNotTakenForBandwidth) {
  partrain::testing::ScratchDir dir;
  std::vector<profiler::TraceEvent> events;
  for (uint64_t seq = 0; seq < 4; ++seq) {
    for (int rank = 0; rank < 4; ++rank) {
      events.push_back(partrain::testing::completed_all_reduce(
          "world", rank, {0, 1, 2, 3}, seq, 4, static_cast<int64_t>(seq) * 100'000'000, 3'000'000));
    }
    const double bytes = seq % 2 == 0 ? 1e6 : 8e6;
    for (int rank = 0; rank < 2; ++rank) {
      events.push_back(partrain::testing::completed_all_reduce(
          "tp", rank, {0, 1}, seq, static_cast<uint64_t>(bytes),
          static_cast<int64_t>(seq) * 100'000'000 + 50'000'000,
          static_cast<int64_t>(1e5 + bytes / 2e9 * 1e9)));
    }
  }
  auto trace = partrain::testing::write_completed_trace(dir.path() / "t.db", "{}", 4, events);
  auto c = measure_calibration(trace.db, "t.db", uncalibrated(), 1);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_EQ(c->collectives.size(), 1u);
  EXPECT_EQ(c->collectives[0].group_size, 2);
  EXPECT_NEAR(c->collectives[0].link.bandwidth, 2e9, 2e9 * 1e-3);
  ASSERT_EQ(c->notes.size(), 2u);  // not a built-in workload; the tiny all-reduce
  EXPECT_NE(c->notes[1].find("all_reduce over 4 ranks: only 4 B messages"), std::string::npos)
      << c->notes[1];

  CostModel model = uncalibrated();
  std::vector<Calibration> calibrations{*c};
  apply_calibrations(calibrations, model);
  // A 4-rank all-reduce of 1 MB takes the 2-rank fit (the nearest group measured): about
  // 0.75 ms of bandwidth plus latency, not the minutes the tiny message's "bandwidth" gives.
  EXPECT_LT(model.comm.seconds(CostedOp::kAllReduce, 1e6, 4, LinkLevel::kIntraNode), 2e-3);
}

// A world of one's collectives move nothing: neither fitted nor named as "over 2 ranks" (the note
// said so of a 1-rank trace).
TEST(Calibration, CollectivesOverOneRankAreNotLinks) {
  partrain::testing::ScratchDir dir;
  std::vector<profiler::TraceEvent> events;
  for (uint64_t seq = 0; seq < 4; ++seq) {
    auto alone = partrain::testing::completed_all_reduce(
        "solo", 0, {0}, seq, 4, static_cast<int64_t>(seq) * 100'000'000, 3'000);
    alone.step = -1;
    alone.event.op = "all_gather";  // its own fit, were it taken for a link of 2
    events.push_back(alone);
    const double bytes = seq % 2 == 0 ? 1e6 : 8e6;
    for (int rank = 0; rank < 2; ++rank) {
      auto pair = partrain::testing::completed_all_reduce(
          "world", rank, {0, 1}, seq, static_cast<uint64_t>(bytes),
          static_cast<int64_t>(seq) * 100'000'000 + 50'000'000,
          static_cast<int64_t>(bytes / 2e9 * 1e9));
      pair.step = -1;
      events.push_back(pair);
    }
  }
  auto trace = partrain::testing::write_completed_trace(dir.path() / "t.db", "{}", 2, events);
  auto c = measure_calibration(trace.db, "t.db", uncalibrated(), 1);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_EQ(c->collectives.size(), 1u);
  EXPECT_EQ(c->collectives[0].group_size, 2);
  for (const std::string& note : c->notes) {
    EXPECT_EQ(note.find("only 4 B messages"), std::string::npos) << note;
  }
}

TEST(Calibration, ATraceWithNothingToMeasureIsUnreadable) {
  partrain::testing::ScratchDir dir;
  auto trace = partrain::testing::write_completed_trace(dir.path() / "t.db", "{}", 1, {});
  auto c = measure_calibration(trace.db, "t.db", uncalibrated(), 1);
  EXPECT_EQ(c.status().code(), StatusCode::kUnreadable);
  EXPECT_NE(c.status().message().find("nothing to calibrate"), std::string::npos);
}

}  // namespace
}  // namespace partrain::analyzers
