// Calibration from traces: the line fit, busbw and latency recovered from collectives of known
// durations, and the compute scale from compute slices of a built-in workload's run.
#include "analyzers/calibration.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string_view>

#include "analyzers/arrival_wait.h"
#include "analyzers/layout_search.h"
#include "profiler/special_function_rate_stat.h"
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

// A built-in gpt run's config (4 layers, hidden 256, seq 128): `extra` fields before the model
// (`"cpu_bind":"core",`), then the layout's JSON object.
std::string gpt_run_config(std::string_view layout, std::string_view extra = "") {
  return fmt::format(
      R"({{"workload":"gpt","precision":"fp32","recompute":"none",{})"
      R"("model":{{"layers":4,"hidden":256,"heads":8,"seq":128,"vocab":512,"ffn":1024}},)"
      R"("layout":{}}})",
      extra, layout);
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

// A foreign trace without steps: 4 all-reduces over ranks 0 and 1 alternating `first` and
// `second` bytes, each taking `seconds(bytes)` on both ranks; calibrated from.
StatusOr<Calibration> two_rank_all_reduces(const std::filesystem::path& dir, double first,
                                           double second,
                                           const std::function<double(double)>& seconds) {
  std::vector<profiler::TraceEvent> events;
  for (uint64_t seq = 0; seq < 4; ++seq) {
    const double bytes = seq % 2 == 0 ? first : second;
    for (int rank = 0; rank < 2; ++rank) {
      auto r = partrain::testing::completed_all_reduce(
          "world", rank, {0, 1}, seq, static_cast<uint64_t>(bytes),
          static_cast<int64_t>(seq) * 100'000'000, static_cast<int64_t>(seconds(bytes) * 1e9));
      r.step = -1;
      events.push_back(r);
    }
  }
  auto trace = partrain::testing::write_completed_trace(dir / "t.db", "{}", 2, events);
  return measure_calibration(trace.db, "t.db", uncalibrated(), 1);
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
        // Rank r arrived r ms before the last one, rank 0, and waited for it: all end together.
        const int64_t early = rank * 1'000'000;
        const auto dur = static_cast<int64_t>(seconds * 1e9) + early;
        events.push_back(partrain::testing::completed_all_reduce(
            "dp", rank, {0, 1, 2, 3}, seq, static_cast<uint64_t>(bytes),
            static_cast<int64_t>(seq + 1) * 100'000'000 - early, dur));
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

// Steps whose stored length cannot be true (a damaged or edited trace) are left out of the
// calibration, and the calibration says so instead of fitting from them in silence.
TEST(Calibration, SaysWhichRowsOfADamagedTraceItLeftOut) {
  partrain::testing::ScratchDir dir;
  std::vector<profiler::TraceEvent> events;
  for (uint64_t seq = 0; seq < 4; ++seq) {
    for (int rank = 0; rank < 2; ++rank) {
      const auto start = static_cast<int64_t>(seq + 1) * 100'000'000;
      events.push_back(partrain::testing::completed_all_reduce("dp", rank, {0, 1}, seq, 1 << 20,
                                                               start, 1'000'000));
      // Every step of rank 1 stored as ending before it starts.
      events.push_back(profiler::StepEvent{rank, static_cast<int64_t>(seq), start - 10'000'000,
                                           rank == 1 ? -50'000'000 : 50'000'000, 1.0, 64});
    }
  }
  auto trace = partrain::testing::write_completed_trace(dir.path() / "t.db", "{}", 2, events);
  auto c = measure_calibration(trace.db, "t.db", uncalibrated(), 1);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  const bool said = std::any_of(c->notes.begin(), c->notes.end(), [](const std::string& note) {
    return note.find("step_duration_unusable = 4") != std::string::npos;
  });
  EXPECT_TRUE(said) << fmt::format("{}", fmt::join(c->notes, "\n"));
}

// A dp4 run of the built-in gpt whose compute took 3x what the preset predicts.
TEST(Calibration, ComputeScaleIsMeasuredOverPredictedForTheRunsOwnLayout) {
  const std::string config = gpt_run_config(R"({"world":4,"dp":4,"tp":1,"pp":1,"micro_batch":1})");
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

// Issue 35 item 6: one compute scale for every layout could not follow a tp run, whose GEMMs are
// sharded and norms replicated (another mix of the two kinds of work). Runs measured at 3x the
// preset's GEMM time plus 0.5x its memory-bound time, in two mixes, give back both rates.
TEST(Calibration, ComputeIsFittedByKindOfWork) {
  auto run = [](double gemm_s, double memory_s, double measured_s) {
    Calibration c;
    c.predicted_gemm_s = gemm_s;
    c.predicted_memory_s = memory_s;
    c.predicted_compute_s = gemm_s + memory_s;
    c.measured_compute_s = measured_s;
    c.compute_scale = measured_s / (gemm_s + memory_s);
    return c;
  };
  const Calibration even = run(1, 1, 3 * 1 + 0.5 * 1), norms = run(1, 4, 3 * 1 + 0.5 * 4);
  const auto both = fit_compute_kinds({even, norms});
  ASSERT_TRUE(both);
  EXPECT_TRUE(both->gemm_fitted);
  EXPECT_EQ(both->runs, 2);
  EXPECT_NEAR(both->gemm_scale, 3, 1e-9);
  EXPECT_NEAR(both->memory_scale, 0.5, 1e-9);
  EXPECT_LT(both->rms_error, 1e-9);
  // No GEMM runs above the peak: a preset at 1/4 of it bounds the GEMM scale at 4 (x3 would be
  // 1.33x the peak), and the memory-bound rate is fitted alone with the GEMMs held there.
  const auto bounded = fit_compute_kinds({even, norms}, 4);
  ASSERT_TRUE(bounded);
  EXPECT_TRUE(bounded->at_peak);
  EXPECT_EQ(bounded->gemm_scale, 4);
  EXPECT_GT(bounded->memory_scale, 0);
  EXPECT_LT(bounded->memory_scale, 0.5);

  // One mix (one run, or two alike) cannot tell the kinds apart: the GEMMs keep the preset's
  // rate, the memory-bound work takes the rest.
  for (const auto& runs : {std::vector<Calibration>{even}, std::vector<Calibration>{even, even}}) {
    const auto one = fit_compute_kinds(runs);
    ASSERT_TRUE(one);
    EXPECT_FALSE(one->gemm_fitted);
    EXPECT_EQ(one->gemm_scale, 1);
    EXPECT_NEAR(one->memory_scale, 2.5, 1e-9);
  }
  // The preset's GEMMs alone outlast the measurement: one scale for both kinds.
  const auto slower = fit_compute_kinds({run(2, 1, 1.5)});
  ASSERT_TRUE(slower);
  EXPECT_NEAR(slower->gemm_scale, 0.5, 1e-9);
  EXPECT_NEAR(slower->memory_scale, 0.5, 1e-9);
  EXPECT_FALSE(fit_compute_kinds({Calibration{}}));  // no compute measured

  // Installed, a layout of another mix (tp 2) is predicted at 3x its GEMMs + 0.5x the rest.
  CostModel model = uncalibrated();
  memory::EstimateInput in;
  in.model = model.model;
  in.recipe = model.recipe;
  in.reserve_bytes = 0;
  in.layout.tp = 2;
  const memory::MemoryEstimate estimate = *memory::estimate_memory(in);
  CostModel gemms = model, memory_bound = model;
  gemms.speed.memory_scale = 0;
  memory_bound.speed.gemm_scale = 0;
  const double gemm_s = step_cost(gemms, estimate).compute_s;
  const double memory_s = step_cost(memory_bound, estimate).compute_s;
  ASSERT_GT(gemm_s, 0);
  ASSERT_GT(memory_s, 0);
  EXPECT_NEAR(step_cost(model, estimate).compute_s, gemm_s + memory_s, 1e-9 * gemm_s);
  std::vector<Calibration> calibrations{even, norms};
  apply_calibrations(calibrations, model);
  EXPECT_NEAR(step_cost(model, estimate).compute_s, 3 * gemm_s + 0.5 * memory_s, 1e-9 * gemm_s);
  EXPECT_NE(calibrations[1].notes.back().find("GEMMs x3, memory-bound work x0.5"),
            std::string::npos)
      << calibrations[1].notes.back();
}

// One mix cannot tell the GEMMs' rate from the memory-bound work's; where the runs recorded what
// their own GEMMs achieved (the gemm_rate stat), the GEMMs take that rate instead of the
// preset's and the memory-bound work the rest. A run at 3x its predicted GEMMs (1.5 s measured
// at the run's rate for 0.5 s predicted) and 0.5x its memory-bound work: 3 and 0.5, where the
// preset's rate would have left 4.5 to the memory-bound work, which a tp layout has more of.
TEST(Calibration, OneMixTakesTheRateItsOwnGemmsAchieved) {
  Calibration run;
  run.predicted_gemm_s = 0.5;
  run.predicted_memory_s = 1;
  run.predicted_compute_s = 1.5;
  run.measured_compute_s = 3 * 0.5 + 0.5 * 1;
  run.compute_scale = run.measured_compute_s / run.predicted_compute_s;
  const auto preset = fit_compute_kinds({run});
  ASSERT_TRUE(preset);
  EXPECT_FALSE(preset->gemm_measured);
  EXPECT_EQ(preset->gemm_scale, 1);
  EXPECT_NEAR(preset->memory_scale, 1.5, 1e-9);
  run.measured_gemm_s = 1.5;
  const auto measured = fit_compute_kinds({run, run});
  ASSERT_TRUE(measured);
  EXPECT_FALSE(measured->gemm_fitted);
  EXPECT_TRUE(measured->gemm_measured);
  EXPECT_NEAR(measured->gemm_scale, 3, 1e-9);
  EXPECT_NEAR(measured->memory_scale, 0.5, 1e-9);
  EXPECT_LT(measured->rms_error, 1e-9);
  // Every run must have measured it: one without leaves the preset's rate.
  Calibration unmeasured = run;
  unmeasured.measured_gemm_s = 0;
  EXPECT_FALSE(fit_compute_kinds({run, unmeasured})->gemm_measured);
  // GEMMs measured faster than the peak are held at it (here a preset at 1/4 of the peak).
  const auto held = fit_compute_kinds({run}, 4);
  ASSERT_TRUE(held);
  EXPECT_TRUE(held->at_peak);
  EXPECT_EQ(held->gemm_scale, 4);
  // GEMMs measured slower than the whole compute: one scale for both kinds.
  run.measured_gemm_s = 10;
  const auto slower = fit_compute_kinds({run});
  ASSERT_TRUE(slower);
  EXPECT_FALSE(slower->gemm_measured);
  EXPECT_EQ(slower->gemm_scale, slower->memory_scale);
}

// Where a special function paces the activation (the cpu preset's measured tanh), that part is
// held at the preset's rate and the two scaled kinds fit what it leaves: runs measured at 3x
// their GEMMs + 0.5x their memory-bound work + their special-function part exactly, in two
// mixes, give back 3 and 0.5 (fitted without it, the memory-bound rate would absorb the tanh).
TEST(Calibration, TheSpecialFunctionPartIsHeldAndTheKindsFitTheRest) {
  auto run = [](double gemm_s, double memory_s, double special_s, double measured_s) {
    Calibration c;
    c.predicted_gemm_s = gemm_s;
    c.predicted_memory_s = memory_s;
    c.predicted_special_s = special_s;
    c.predicted_compute_s = gemm_s + memory_s + special_s;
    c.measured_compute_s = measured_s;
    c.compute_scale = measured_s / c.predicted_compute_s;
    return c;
  };
  const Calibration dp = run(1, 1, 2, 3 + 0.5 + 2), tp = run(1, 4, 1, 3 + 2 + 1);
  const auto fit = fit_compute_kinds({dp, tp});
  ASSERT_TRUE(fit);
  EXPECT_TRUE(fit->gemm_fitted);
  EXPECT_NEAR(fit->gemm_scale, 3, 1e-9);
  EXPECT_NEAR(fit->memory_scale, 0.5, 1e-9);
  EXPECT_LT(fit->rms_error, 1e-9);
  // One run: the GEMMs at the preset's rate, the memory-bound work takes what the GEMMs and the
  // special function leave: (5.5 - 1 - 2) / 1.
  const auto one = fit_compute_kinds({dp});
  ASSERT_TRUE(one);
  EXPECT_NEAR(one->memory_scale, 2.5, 1e-9);
  EXPECT_TRUE(one->special_held);
  // A rate under which the special part alone outlasts the run's measured compute (a hostile or
  // disturbed probe: 8 s of tanh in a 5.5 s compute) cannot be held: every kind takes one scale,
  // (1 + 1 + 8) x 0.55 = 5.5, never a negative one.
  const auto wrong = fit_compute_kinds({run(1, 1, 8, 5.5)});
  ASSERT_TRUE(wrong);
  EXPECT_FALSE(wrong->special_held);
  EXPECT_NEAR(wrong->special_scale, 0.55, 1e-9);
  EXPECT_EQ(wrong->gemm_scale, wrong->special_scale);
  EXPECT_EQ(wrong->memory_scale, wrong->special_scale);
  EXPECT_LT(wrong->rms_error, 1e-9);

  // A step's compute is the sum of the three predictions by kind, and the special function's
  // part follows the preset's rate, not the memory-bound scale.
  CostModel model = uncalibrated();
  model.speed.special_function_rate = 1e6;
  memory::EstimateInput in;
  in.model = model.model;
  in.recipe = model.recipe;
  in.reserve_bytes = 0;
  const memory::MemoryEstimate estimate = *memory::estimate_memory(in);
  CostModel gemms = model, memory_bound = model, special = model;
  gemms.speed.memory_scale = gemms.speed.special_scale = 0;
  memory_bound.speed.gemm_scale = memory_bound.speed.special_scale = 0;
  special.speed.gemm_scale = special.speed.memory_scale = 0;
  const double special_s = step_cost(special, estimate).compute_s;
  ASSERT_GT(special_s, 0);
  EXPECT_NEAR(step_cost(model, estimate).compute_s,
              step_cost(gemms, estimate).compute_s + step_cost(memory_bound, estimate).compute_s +
                  special_s,
              1e-9 * special_s);
  const double memory_s = step_cost(memory_bound, estimate).compute_s;
  model.speed.memory_scale = 7;
  EXPECT_NEAR(step_cost(model, estimate).compute_s,
              step_cost(gemms, estimate).compute_s + 7 * memory_s + special_s, 1e-9 * special_s);
}

// Two ranks of a built-in run all-reduce 1 MB and 8 MB; rank 0 arrives 99 ms after their
// previous all-reduce ended, rank 1 1 ms later (99.5 ms of work on average). The link is the
// transfer from the last arrival (100 us + S / 2 GB/s) within a pipeline stage (tp 2) and across
// stages (pp 2) alike: the wait before it is no latency (issue 35 item 6; the average member's 600
// us read as latency charged every tp all-reduce the dp ranks' once-a-step wait). Within a stage
// the ranks did equal work, so the wait is their drift: 0.5 ms a member on average = e(2) x jitter
// x sqrt(99.5 ms). Across stages it is the pipeline's: no jitter.
TEST(Calibration, TheWaitForTheLastArrivalIsTheRanksDriftNotTheLink) {
  for (const bool across_stages : {false, true}) {
    const std::string config =
        std::string(R"({"workload":"gpt","precision":"fp32","recompute":"none",)"
                    R"("model":{"layers":4,"hidden":256,"heads":8,"seq":128,"vocab":512,)"
                    R"("ffn":1024},"layout":{"world":2,"dp":1,"micro_batch":1,)") +
        (across_stages ? R"("tp":1,"pp":2}})" : R"("tp":2,"pp":1}})");
    partrain::testing::ScratchDir dir;
    std::vector<profiler::TraceEvent> events;
    std::vector<int64_t> ends;
    for (uint64_t seq = 0; seq < 4; ++seq) {
      const double bytes = seq % 2 == 0 ? 1e6 : 8e6;
      const auto transfer_ns = static_cast<int64_t>((1e-4 + bytes / 2e9) * 1e9);
      const int64_t t0 = ends.empty() ? 0 : ends.back() + 99'000'000;
      for (int rank = 0; rank < 2; ++rank) {
        const int64_t late = rank == 1 ? 1'000'000 : 0;
        auto r = partrain::testing::completed_all_reduce("g", rank, {0, 1}, seq,
                                                         static_cast<uint64_t>(bytes), t0 + late,
                                                         transfer_ns + 1'000'000 - late);
        r.step = -1;
        events.push_back(r);
      }
      ends.push_back(t0 + 1'000'000 + transfer_ns);
    }
    auto trace = partrain::testing::write_completed_trace(dir.path() / "t.db", config, 2, events);
    auto c = measure_calibration(trace.db, "t.db", uncalibrated(), 1);
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    ASSERT_EQ(c->collectives.size(), 1u);
    const CollectiveFit& fit = c->collectives[0];
    EXPECT_TRUE(fit.bandwidth_measured);
    EXPECT_NEAR(fit.link.bandwidth, 2e9, 2e9 * 1e-3) << across_stages;
    EXPECT_NEAR(fit.link.latency_s, 1e-4 / 2, 1e-7) << across_stages;  // 2 latency steps
    CostModel model = uncalibrated();
    std::vector<Calibration> calibrations{*c};
    apply_calibrations(calibrations, model);
    if (across_stages) {
      EXPECT_FALSE(c->arrival_drift);
      EXPECT_EQ(model.arrival_drift.jitter, 0);
      EXPECT_EQ(model.arrival_drift.rate_spread, 0);
      EXPECT_TRUE(std::any_of(c->notes.begin(), c->notes.end(), [](const std::string& note) {
        return note.find("arrival drift is not calibrated") != std::string::npos;
      }));
      continue;
    }
    ASSERT_TRUE(c->arrival_drift);
    EXPECT_EQ(c->arrival_drift->samples, 3);  // the first has no earlier sync
    const double jitter = 0.5e-3 / (expected_max_of_normals(2) * std::sqrt(0.0995));
    EXPECT_NEAR(c->arrival_drift->drift.jitter, jitter, jitter * 1e-6);
    EXPECT_EQ(c->arrival_drift->drift.rate_spread, 0);  // unbound CPU ranks: a random walk
    EXPECT_LT(c->arrival_drift->rms_error, 1e-6);
    EXPECT_NEAR(model.arrival_drift.jitter, jitter, jitter * 1e-6);
  }
}

// A CPU run's ranks measured their cores' GeLU tanh rate at start (the special_function_rate
// stat, 50 M and 70 M evaluations/s): the calibration costs the activation at the best of them
// (a short probe is only ever slowed by what else runs), for its own run and for every layout it
// predicts, instead of the preset's.
TEST(Calibration, TheRunsMeasuredSpecialFunctionRateReplacesThePresets) {
  const std::string config = gpt_run_config(R"({"world":2,"dp":2,"micro_batch":1,"tp":1,"pp":1})");
  partrain::testing::ScratchDir dir;
  std::vector<profiler::TraceEvent> events;
  for (int rank = 0; rank < 2; ++rank) {
    auto r = partrain::testing::completed_all_reduce("g", rank, {0, 1}, 0, 1'000'000, 0, 2'000'000);
    r.step = -1;
    events.push_back(r);
    events.push_back(profiler::StatEvent{std::string(profiler::kSpecialFunctionRateStat), rank,
                                         rank == 0 ? 50'000'000 : 70'000'000});
  }
  auto trace = partrain::testing::write_completed_trace(dir.path() / "t.db", config, 2, events);
  auto c = measure_calibration(trace.db, "t.db", uncalibrated(), 1);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_TRUE(c->special_function_rate);
  EXPECT_EQ(*c->special_function_rate, 70e6);
  CostModel model = uncalibrated();
  model.speed.special_function_rate = 1e9;  // the preset's
  std::vector<Calibration> calibrations{*c};
  apply_calibrations(calibrations, model);
  EXPECT_EQ(model.speed.special_function_rate, 70e6);
  // Without the stat (a GPU run, an older trace) the preset's stands.
  CostModel kept = uncalibrated();
  kept.speed.special_function_rate = 1e9;
  Calibration none = *c;
  none.special_function_rate.reset();
  std::vector<Calibration> without{none};
  apply_calibrations(without, kept);
  EXPECT_EQ(kept.speed.special_function_rate, 1e9);
}

// Each sample is fitted by its ranks' law: waits of ranks sharing cores against e(n) sqrt(W) (the
// jitter), of ranks on devices of their own against e(n) W (the rate spread). Two bound samples
// waiting 2% and 4% of their work give a spread of 3% over their summed drift, weighted by W.
TEST(Calibration, ArrivalDriftIsFittedByTheRanksLaw) {
  const double e2 = expected_max_of_normals(2);
  auto sample = [&](double since_sync_s, double share, bool own_devices) {
    return ArrivalSample{CostedOp::kAllReduce,      1024,         2,
                         e2 * share * since_sync_s, since_sync_s, own_devices};
  };
  const auto rates = fit_arrival_drift({sample(0.1, 0.02, true), sample(0.1, 0.04, true)});
  ASSERT_TRUE(rates);
  EXPECT_NEAR(rates->drift.rate_spread, 0.03, 1e-12);
  EXPECT_EQ(rates->drift.jitter, 0);
  // Ranks sharing cores, 1 ms of wait a member after 0.25 s: e(2) x jitter x 0.5.
  ArrivalSample shared = sample(0.25, 0, false);
  shared.wait_s = 1e-3;
  const auto walk = fit_arrival_drift({shared});
  ASSERT_TRUE(walk);
  EXPECT_NEAR(walk->drift.jitter, 1e-3 / (e2 * 0.5), 1e-12);
  EXPECT_EQ(walk->drift.rate_spread, 0);
  EXPECT_LT(walk->rms_error, 1e-12);
  // Pooled, each law keeps its own samples.
  const auto pooled = fit_arrival_drift({sample(0.1, 0.03, true), shared});
  ASSERT_TRUE(pooled);
  EXPECT_NEAR(pooled->drift.rate_spread, 0.03, 1e-12);
  EXPECT_NEAR(pooled->drift.jitter, walk->drift.jitter, 1e-12);
  EXPECT_FALSE(fit_arrival_drift({sample(0.1, 0, true)}));  // nobody waited
}

// Ranks sharing cores: a dp trace's loss all-reduce after the optimizer's 10 ms and its
// gradient all-reduce after the step's 300 ms tell how long the interruptions are. Waits made by
// interruptions of 30 ms at 4.6/s give those back (not the walk, which would make every 5 ms
// sync wait 3.5x too long); waits made by a walk keep the walk; one stretch cannot tell.
TEST(Calibration, StretchesOfTwoLengthsTellHowLongTheInterruptionsAre) {
  auto samples = [](const ArrivalDrift& law, std::vector<double> stretches) {
    std::vector<ArrivalSample> out;
    for (size_t i = 0; i < stretches.size(); ++i) {
      const double bytes = stretches[i] < 0.1 ? 4 : 13e6;  // a kind per stretch
      for (int repeat = 0; repeat < 7; ++repeat) {
        out.push_back({CostedOp::kAllReduce, bytes, 2, arrival_wait_s(law, 2, stretches[i]),
                       stretches[i], false});
      }
    }
    return out;
  };
  const ArrivalDrift interrupted{.jitter = 0.03 * std::sqrt(4.6), .interruption_s = 0.03};
  const auto fit = fit_arrival_drift(samples(interrupted, {0.01, 0.3}));
  ASSERT_TRUE(fit);
  EXPECT_NEAR(fit->drift.interruption_s, 0.03, 0.03 * 1e-3);
  EXPECT_NEAR(fit->drift.jitter, interrupted.jitter, interrupted.jitter * 1e-3);
  EXPECT_LT(fit->rms_error, 1e-6);
  EXPECT_EQ(fit->kinds, 2);
  // Two values fitted to two kinds: the report says the 0% rms is no test of the law.
  EXPECT_EQ(fit->rms_text(),
            "within 0.0% rms (2 fitted values for 2 kinds: exact by construction, not a test of "
            "the law)");
  const ArrivalDrift walk{.jitter = 0.02};
  const auto walked = fit_arrival_drift(samples(walk, {0.01, 0.3}));
  ASSERT_TRUE(walked);
  EXPECT_EQ(walked->drift.interruption_s, 0);
  EXPECT_NEAR(walked->drift.jitter, 0.02, 1e-12);
  EXPECT_EQ(walked->rms_text(), "within 0.0% rms");  // one value, two kinds: a test of the walk
  const auto one = fit_arrival_drift(samples(interrupted, {0.3}));
  ASSERT_TRUE(one);
  EXPECT_EQ(one->drift.interruption_s, 0);  // every law fits one mean wait: the walk's kept
  EXPECT_NEAR(arrival_wait_s(one->drift, 2, 0.3), arrival_wait_s(interrupted, 2, 0.3), 1e-12);
}

// Ranks on devices of their own drift by their rates: a run launched with --cpu-bind core (its
// config says so), or GPU ranks no two on one GPU. The same trace as
// TheWaitForTheLastArrivalIsTheRanksDriftNotTheLink's tp 2 then fits a rate spread, 0.5 ms a
// member = e(2) x spread x 99.5 ms, and no jitter; two ranks sharing a GPU fit a jitter.
TEST(Calibration, RanksOnDevicesOfTheirOwnDriftByTheirRates) {
  struct Case {
    const char* name;
    const char* extra;              // config fields
    const char *device0, *device1;  // the ranks' devices, "" not recorded
    bool rates;
  };
  const Case cases[] = {{"bound to cores", R"("cpu_bind":"core",)", "", "", true},
                        {"a GPU each", "", "cuda:0", "cuda:1", true},
                        {"one GPU shared", "", "cuda:0", "cuda:0", false}};
  for (const Case& test : cases) {
    const std::string config =
        gpt_run_config(R"({"world":2,"dp":1,"micro_batch":1,"tp":2,"pp":1})", test.extra);
    partrain::testing::ScratchDir dir;
    std::vector<profiler::TraceEvent> events;
    if (*test.device0 != 0) {
      for (int rank = 0; rank < 2; ++rank) {
        profiler::RankInfo info;
        info.rank = rank;
        info.host = "h";
        info.device = rank == 0 ? test.device0 : test.device1;
        events.push_back(info);
      }
    }
    int64_t end = 0;
    for (uint64_t seq = 0; seq < 4; ++seq) {
      const int64_t t0 = seq == 0 ? 0 : end + 99'000'000;
      for (int rank = 0; rank < 2; ++rank) {
        const int64_t late = rank == 1 ? 1'000'000 : 0;
        auto r = partrain::testing::completed_all_reduce("g", rank, {0, 1}, seq, 1'000'000,
                                                         t0 + late, 2'000'000 - late);
        r.step = -1;
        events.push_back(r);
      }
      end = t0 + 2'000'000;
    }
    auto trace = partrain::testing::write_completed_trace(dir.path() / "t.db", config, 2, events);
    auto c = measure_calibration(trace.db, "t.db", uncalibrated(), 1);
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    ASSERT_TRUE(c->arrival_drift) << test.name;
    const double e2 = expected_max_of_normals(2);
    if (test.rates) {
      EXPECT_EQ(c->arrival_drift->drift.jitter, 0) << test.name;
      const double spread = 0.5e-3 / (e2 * 0.0995);
      EXPECT_NEAR(c->arrival_drift->drift.rate_spread, spread, spread * 1e-6) << test.name;
    } else {
      EXPECT_EQ(c->arrival_drift->drift.rate_spread, 0) << test.name;
      const double jitter = 0.5e-3 / (e2 * std::sqrt(0.0995));
      EXPECT_NEAR(c->arrival_drift->drift.jitter, jitter, jitter * 1e-6) << test.name;
    }
  }
}

// Once the last member is in, the collective costs each member its time to its own end: rank 0
// arrives first, rank 1 2 ms later; rank 0 returns 300 us + S / 2 GB/s after rank 1's arrival,
// rank 1 1 ms after that (held up as it returned; the next collective would find it late). The
// transfer runs from the last arrival to the members' mean end: 300 us + 0.5 ms + S / 2 GB/s (the
// shortest member, rank 0, took 2 ms more: its wait).
TEST(Calibration, TheTransferRunsFromTheLastArrivalToTheMembersMeanEnd) {
  partrain::testing::ScratchDir dir;
  std::vector<profiler::TraceEvent> events;
  for (uint64_t seq = 0; seq < 4; ++seq) {
    const double bytes = seq % 2 == 0 ? 1e6 : 8e6;
    const auto transfer_ns = static_cast<int64_t>((3e-4 + bytes / 2e9) * 1e9);
    const auto t0 = static_cast<int64_t>(seq) * 100'000'000;
    auto first = partrain::testing::completed_all_reduce(
        "world", 0, {0, 1}, seq, static_cast<uint64_t>(bytes), t0, 2'000'000 + transfer_ns);
    auto last = partrain::testing::completed_all_reduce("world", 1, {0, 1}, seq,
                                                        static_cast<uint64_t>(bytes),
                                                        t0 + 2'000'000, transfer_ns + 1'000'000);
    first.step = last.step = -1;
    events.push_back(first);
    events.push_back(last);
  }
  auto trace = partrain::testing::write_completed_trace(dir.path() / "t.db", "{}", 2, events);
  auto c = measure_calibration(trace.db, "t.db", uncalibrated(), 1);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_EQ(c->collectives.size(), 1u);
  EXPECT_NEAR(c->collectives[0].link.bandwidth, 2e9, 2e9 * 1e-3);
  EXPECT_NEAR(c->collectives[0].link.latency_s, (3e-4 + 0.5e-3) / 2, 1e-7);
}

// On a loaded CPU a member descheduled during the transfer adds milliseconds to it, more often
// than not after a long wait (the partner's core went to another process): of 8 transfers of
// 1 MB, 5 took 4 ms longer. Delays only add: the fastest quarter shows the link, 2 GB/s beside
// the 4 B messages' 200 us (the median, a delayed one, read 0.22 GB/s). The latency is the
// small messages' mean, 200 us: the large ones' delays grew with their length and are no cost
// of every collective (as latency they would have priced each 4 B all-reduce at 1.45 ms).
TEST(Calibration, BusbwComesFromTheUndisturbedTransfersAndLatencyFromTheSmallMessages) {
  partrain::testing::ScratchDir dir;
  std::vector<profiler::TraceEvent> events;
  uint64_t seq = 0;
  for (double bytes : {4.0, 1e6}) {
    for (int repeat = 0; repeat < 8; ++repeat, ++seq) {
      const bool delayed = bytes > 4 && repeat % 8 >= 3;
      const double seconds = 2e-4 + bytes / 2e9 + (delayed ? 4e-3 : 0);
      for (int rank = 0; rank < 2; ++rank) {
        auto r = partrain::testing::completed_all_reduce(
            "world", rank, {0, 1}, seq, static_cast<uint64_t>(bytes),
            static_cast<int64_t>(seq) * 100'000'000, static_cast<int64_t>(seconds * 1e9));
        r.step = -1;
        events.push_back(r);
      }
    }
  }
  auto trace = partrain::testing::write_completed_trace(dir.path() / "t.db", "{}", 2, events);
  auto c = measure_calibration(trace.db, "t.db", uncalibrated(), 1);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_EQ(c->collectives.size(), 1u);
  const CollectiveFit& fit = c->collectives[0];
  ASSERT_TRUE(fit.bandwidth_measured);
  // One bandwidth-sized size: its undisturbed transfer less the small messages' 200 us.
  EXPECT_NEAR(fit.link.bandwidth, 2e9, 2e9 * 1e-3);
  // The 8 small messages' 200 us, a step of the 2-rank ring's 2.
  EXPECT_NEAR(fit.link.latency_s, 2e-4 / 2, 1e-7);
}

// A 128 KiB all-reduce taking 1.1 ms beside 4 B ones taking 1 ms is latency, not a 1.3 GB/s
// link: the busbw stays the preset's, the latency is calibrated, and a note says so.
TEST(Calibration, LatencyDominatedMessagesLeaveTheBusbw) {
  partrain::testing::ScratchDir dir;
  auto c = two_rank_all_reduces(dir.path(), 4, 128 * 1024,
                                [](double bytes) { return bytes > 4 ? 1.1e-3 : 1e-3; });
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_EQ(c->collectives.size(), 1u);
  EXPECT_FALSE(c->collectives[0].bandwidth_measured);
  EXPECT_NEAR(c->collectives[0].link.latency_s, 1.05e-3 / 2, 1e-7);
  EXPECT_NE(c->notes.back().find("their time mostly latency"), std::string::npos)
      << c->notes.back();
  CostModel model = uncalibrated();
  std::vector<Calibration> calibrations{*c};
  apply_calibrations(calibrations, model);
  // 16 MB at the preset's 20 GB/s plus the measured 1.05 ms.
  EXPECT_NEAR(model.comm.seconds(CostedOp::kAllReduce, 16e6, 2, LinkLevel::kIntraNode),
              1.05e-3 + 16e6 / 20e9, 1e-6);
}

// A foreign job under `partrain trace` records no steps: every collective is the window.
TEST(Calibration, CollectivesOfATraceWithoutStepsAreAllUsed) {
  partrain::testing::ScratchDir dir;
  auto c = two_rank_all_reduces(dir.path(), 1e6, 8e6, [](double bytes) { return bytes / 2e9; });
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_EQ(c->collectives.size(), 1u);
  EXPECT_EQ(c->collectives[0].samples, 4);
  EXPECT_NEAR(c->collectives[0].link.bandwidth, 2e9, 2e9 * 1e-3);  // 2 ranks: busbw = algbw
}

// The 4-byte loss all-reduce over the world, at one size only, is all latency: read as
// bandwidth it would be 1e-6 GB/s and make every 4-rank all-reduce take minutes, so only its
// latency is calibrated, with a note, while the 2-rank all-reduce at two sizes is fitted whole.
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
  ASSERT_EQ(c->collectives.size(), 2u);  // ordered by op, then group size
  EXPECT_EQ(c->collectives[0].group_size, 2);
  EXPECT_NEAR(c->collectives[0].link.bandwidth, 2e9, 2e9 * 1e-3);
  EXPECT_EQ(c->collectives[1].group_size, 4);  // its latency only
  EXPECT_FALSE(c->collectives[1].bandwidth_measured);
  ASSERT_EQ(c->notes.size(), 2u);  // not a built-in workload; the tiny all-reduce
  EXPECT_NE(c->notes[1].find("all_reduce over 4 ranks: messages up to 4 B, their time mostly "
                             "latency: latency calibrated, busbw left as it was"),
            std::string::npos)
      << c->notes[1];

  CostModel model = uncalibrated();
  std::vector<Calibration> calibrations{*c};
  apply_calibrations(calibrations, model);
  // A 4-rank all-reduce of 1 MB: the measured 3 ms of latency plus the preset's busbw
  // (1 MB x 1.5 / 20 GB/s), not the minutes the tiny message's "bandwidth" would give.
  EXPECT_NEAR(model.comm.seconds(CostedOp::kAllReduce, 1e6, 4, LinkLevel::kIntraNode),
              3e-3 + 1e6 * 1.5 / 20e9, 1e-6);
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

// A built-in workload's run that failed before its first step (rank 1 exited at step 0) holds
// only start-up's collectives: calibrating from its one 4-byte all-reduce made the latency
// 13.6 ms a step and predicted a step 60% shorter, with no word of the failure.
TEST(Calibration, ABuiltInRunWithoutAStepIsNothingToCalibrateFrom) {
  const std::string config = gpt_run_config(R"({"world":2,"dp":2,"tp":1,"pp":1,"micro_batch":1})");
  partrain::testing::ScratchDir dir;
  std::vector<profiler::TraceEvent> events;
  for (int rank = 0; rank < 2; ++rank) {
    auto r =
        partrain::testing::completed_all_reduce("world", rank, {0, 1}, 0, 4, 1'000'000, 13'600'000);
    r.step = -1;
    events.push_back(r);
  }
  auto trace = partrain::testing::write_ended_trace(dir.path() / "t.db", config, 2, events,
                                                    profiler::RunStatus::kFailed);
  auto c = measure_calibration(trace.db, "t.db", uncalibrated(), 1);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnreadable);
  EXPECT_NE(c.status().message().find("t.db: nothing to calibrate from (the failed run recorded "
                                      "no step: its collectives are start-up's"),
            std::string::npos)
      << c.status().message();
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
