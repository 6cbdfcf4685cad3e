// The views drawn from hand-built view models at 80x24: numbers with units, bar widths, the
// truncation at 80 columns, the ASCII set, and the message on a terminal that is too small.
#include "tui/views.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tui/bars.h"
#include "tui/view_model.h"

namespace partrain::tui {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kMiB = 1 << 20;

// A step of `step_ns`: compute, then exposed communication, then idle.
RankBreakdown step_split(int64_t step_ns, int64_t compute_ns, int64_t comm_ns) {
  analyzers::BusyTime busy(0, step_ns);
  busy.add(0, compute_ns, Activity::kCompute);
  busy.add(compute_ns, compute_ns + comm_ns, Activity::kComm);
  RankBreakdown split;
  busy.fill(split);
  return split;
}

ViewModel two_ranks() {
  ViewModel model;
  model.run_id = "run-tui";
  model.status = "running";
  model.world_size = 2;
  model.step = 3;
  model.elapsed_ns = 63 * 1000 * kMs;
  model.tokens_per_s = 4200;
  model.throughput_steps = 10;
  for (int rank : {0, 1}) {
    RankStatus row;
    row.rank = rank;
    row.step = 3;
    row.step_ns = 100 * kMs;
    row.tokens_per_s = 2100;
    // Rank 0: 50% compute, 30% exposed comm, 20% idle; rank 1: all compute.
    row.breakdown = rank == 0 ? step_split(100 * kMs, 50 * kMs, 30 * kMs)
                              : step_split(100 * kMs, 100 * kMs, 0);
    row.memory_bytes[static_cast<size_t>(memory::Category::kParams)] = (rank == 0 ? 4 : 2) * kMiB;
    row.collective = RankCollective{"all_reduce", "dp", 3, 0, 20 * kMs, true};
    model.ranks.push_back(row);
    model.memory[rank].peak_total = 4 * kMiB;
  }
  model.analysis.report.emplace();
  model.analysis.report->stragglers.straggler = 1;
  return model;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

std::string screen_text(const ScreenGrid& grid) { return grid.to_text(false, false); }

TEST(StackedBar, SegmentsTakeTheirRoundedShareOfTheWidth) {
  const auto cells = stacked_bar({{50, U'#'}, {30, U'='}, {20, U'.'}}, 100, 10);
  std::string text;
  for (const Cell& c : cells) append_utf8(text, c.ch);
  EXPECT_EQ(text, "#####===..");
  // Cumulative rounding: thirds of 10 cells are 3, 4, 3 and always fill the bar.
  const auto thirds = stacked_bar({{1, U'a'}, {1, U'b'}, {1, U'c'}}, 3, 10);
  text.clear();
  for (const Cell& c : thirds) append_utf8(text, c.ch);
  EXPECT_EQ(text, "aaabbbbccc");
  // Values under the scale leave the rest blank.
  const auto half = stacked_bar({{1, U'#'}}, 2, 8);
  EXPECT_EQ(std::count_if(half.begin(), half.end(), [](const Cell& c) { return c.ch == U'#'; }), 4);
}

TEST(ScreenGrid, TextCutAtTheWidthEndsInTheEllipsis) {
  ScreenGrid grid(80, 1);
  const std::string long_text(100, 'x');
  EXPECT_EQ(grid.text(0, 0, long_text, Style::kNormal, -1, U'~'), 80);
  const std::string row = grid.row_text(0);
  EXPECT_EQ(row.size(), 80u);
  EXPECT_EQ(row.back(), '~');
  EXPECT_EQ(grid.text(70, 0, "abc", Style::kNormal, 2, U'~'), 2);
  EXPECT_EQ(grid.row_text(0).substr(70, 2), "a~");
}

TEST(ScreenGrid, DecodesUtf8AndReplacesBadBytes) {
  EXPECT_EQ(decode_utf8("a█b"), U"a█b");
  EXPECT_EQ(decode_utf8("a\xff" "b"), U"a?b");
  std::string out;
  append_utf8(out, U'█');
  EXPECT_EQ(out, "█");
}

TEST(Overview, ARowPerRankWithStepTimeBarsMemoryAndWait) {
  const ViewModel model = two_ranks();
  UiState state;
  ScreenGrid grid(80, 24);
  render_screen(model, state, glyphs_for(Charset::kAscii), grid);
  const std::string status = grid.row_text(0);
  EXPECT_NE(status.find("run run-tui | running | step 3 | 1:03 | 4.2k tok/s (10 steps)"),
            std::string::npos)
      << status;
  EXPECT_NE(grid.row_text(2).find("Overview: 2 of 2 ranks, straggler: rank 1"), std::string::npos);
  const std::string header = grid.row_text(3);
  EXPECT_NE(header.find("rank   step step time  tok/s"), std::string::npos) << header;
  const std::string rank0 = grid.row_text(4);
  const std::string rank1 = grid.row_text(5);
  // Each rank's tokens/s per GPU beside its step time.
  EXPECT_EQ(rank0.substr(0, 29), "   0      3    100 ms   2.1k ") << rank0;
  // At 80 columns the time bar has 9 cells from column 29: 50% compute -> 5 (4.5 rounds up),
  // compute + comm 80% -> 7 (so 2 of comm), then 2 idle.
  EXPECT_EQ(rank0.substr(29, 9), "#####==..") << rank0;
  // The memory bar, 7 cells from column 39, shares one scale (4 MiB) across ranks.
  EXPECT_EQ(rank0.substr(39, 7), "PPPPPPP") << rank0;
  EXPECT_EQ(rank1.substr(39, 7), "PPPP   ") << rank1;
  EXPECT_NE(rank0.find("4.00 MiB"), std::string::npos) << rank0;
  EXPECT_NE(rank0.find("all_reduce"), std::string::npos);
  EXPECT_NE(rank0.find("20.0 ms"), std::string::npos);
  EXPECT_EQ(rank1.back(), '*');  // the straggler's mark
  EXPECT_NE(rank0.back(), '*');
  for (int y = 0; y < 24; ++y) EXPECT_LE(grid.row_text(y).size(), 80u) << y;
}

// A job whose compute no rank recorded (a PyTorch job on the CPU): the bar shows its
// communication and the rest as not recorded ('?'), not as idle, the legend says so, and --json
// has null shares, as analyze's table has '-'.
// At 80 columns with a long run id, the pause and lost events stay on the status line.
TEST(StatusLine, PausedAndEventsLostComeBeforeWhatMayBeCut) {
  ViewModel model = two_ranks();
  model.run_id = "20261129-141955-llama-70b-sweep-dp8-tp8-pp4-a1b2c3d4";
  model.data_loss_events = 7;
  UiState state;
  state.paused = true;
  ScreenGrid grid(80, 24);
  render_screen(model, state, glyphs_for(Charset::kAscii), grid);
  const std::string status = grid.row_text(0);
  EXPECT_EQ(status.rfind(" PAUSED (p resumes) | run 2026", 0), 0u) << status;
  EXPECT_NE(status.find("| 7 events lost"), std::string::npos) << status;
}

// A rank SIGSTOPped 38 s ago in a live run: the overview showed it "quiet 38 s" while --json
// had no quiet field and neither said the run looks hung (the endpoint had partrain_hang 1). Now
// --json has each rank's quiet_ms and the hang verdict, the status line says it too, by the
// endpoint's rule: every rank quiet past 30 s, the one that stopped a step first blamed.
TEST(StatusLine, ALiveRunWhoseRanksAreAllQuietLooksHungInTextAndJson) {
  ViewModel model = two_ranks();
  model.live = true;
  model.start_ns = 1'000 * kMs;
  model.elapsed_ns = 60'000 * kMs;
  const int64_t now = model.start_ns + model.elapsed_ns;
  model.ranks[0].last_event_ns = now - 38'450 * kMs;  // stopped first
  model.ranks[1].last_event_ns = now - 36'000 * kMs;
  UiState state;
  ScreenGrid grid(100, 24);
  render_screen(model, state, glyphs_for(Charset::kAscii), grid);
  const std::string status = grid.row_text(0);
  EXPECT_NE(status.find("| looks hung (rank 0)"), std::string::npos) << status;
  EXPECT_NE(grid.row_text(4).find("quiet"), std::string::npos) << grid.row_text(4);
  EXPECT_NE(grid.row_text(4).find("38.45 s"), std::string::npos) << grid.row_text(4);
  const nlohmann::json j = view_model_json(model);
  EXPECT_DOUBLE_EQ(j["ranks"][0]["quiet_ms"].get<double>(), 38'450.0) << j["ranks"][0];
  EXPECT_DOUBLE_EQ(j["ranks"][1]["quiet_ms"].get<double>(), 36'000.0);
  EXPECT_EQ(j["hang"]["hung"], true) << j["hang"];
  EXPECT_EQ(j["hang"]["culprit"], 0);
  EXPECT_EQ(j["hang"]["diagnosed"], false);
  EXPECT_DOUBLE_EQ(j["hang"]["threshold_ms"].get<double>(), 30'000.0);
  // Rank 1 recorded 2 s ago: quiet, not hung; a finished run has no quiet at all.
  model.ranks[1].last_event_ns = now - 2'000 * kMs;
  EXPECT_EQ(view_model_json(model)["hang"]["hung"], false);
  ScreenGrid alive(100, 24);
  render_screen(model, state, glyphs_for(Charset::kAscii), alive);
  EXPECT_EQ(alive.row_text(0).find("hung"), std::string::npos) << alive.row_text(0);
  model.live = false;
  model.status = "completed";
  EXPECT_TRUE(view_model_json(model)["ranks"][0]["quiet_ms"].is_null());
}

TEST(Overview, AStepWithoutRecordedComputeIsNotIdle) {
  ViewModel model = two_ranks();
  for (RankStatus& row : model.ranks) {
    analyzers::BusyTime busy(0, 100 * kMs);
    busy.add(70 * kMs, 90 * kMs, Activity::kComm);
    RankBreakdown split;
    busy.fill(split);
    row.breakdown = split;
  }
  UiState state;
  ScreenGrid grid(120, 24);
  render_screen(model, state, glyphs_for(Charset::kAscii), grid);
  const std::string text = screen_text(grid);
  EXPECT_NE(text.find("==????????"), std::string::npos) << text;
  EXPECT_EQ(text.find("..."), std::string::npos) << text;
  EXPECT_NE(text.find("not recorded (no compute seen)"), std::string::npos) << text;
  const nlohmann::json j = view_model_json(model);
  EXPECT_TRUE(j["ranks"][0]["last_step"]["compute_pct"].is_null()) << j["ranks"][0];
  EXPECT_TRUE(j["ranks"][0]["last_step"]["idle_pct"].is_null()) << j["ranks"][0];
  EXPECT_EQ(j["ranks"][0]["last_step"]["compute_recorded"], false);
  // The two_ranks() job, with compute, keeps its shares.
  EXPECT_EQ(view_model_json(two_ranks())["ranks"][0]["last_step"]["compute_pct"], 50.0);
}

// What was not recorded is null in --json, as '-' in the text: a rank's memory (a CPU PyTorch
// job's) and a step's tokens; it read 0.
TEST(Overview, JsonGivesNullForMemoryAndTokensNotRecorded) {
  ViewModel model = two_ranks();
  model.memory.erase(1);
  model.ranks[1].memory_bytes = {};
  analyzers::StepPoint point;
  point.step = 3;
  point.slowest_ns = 100 * kMs;
  model.history.push_back(point);
  const nlohmann::json j = view_model_json(model);
  EXPECT_TRUE(j["ranks"][1]["memory_bytes"].is_null()) << j["ranks"][1];
  EXPECT_TRUE(j["ranks"][1]["memory_by_category_bytes"].is_null()) << j["ranks"][1];
  EXPECT_EQ(j["ranks"][0]["memory_bytes"], 4 * kMiB);
  EXPECT_TRUE(j["steps"][0]["tokens"].is_null()) << j["steps"];
}

TEST(Overview, UsesBlockCharactersInUtf8) {
  const ViewModel model = two_ranks();
  ScreenGrid grid(80, 24);
  render_screen(model, UiState{}, glyphs_for(Charset::kUtf8), grid);
  EXPECT_EQ(count(grid.row_text(4), "▒"), 2);
  EXPECT_EQ(count(grid.row_text(5), "◆"), 1);
}

TEST(Overview, LongNamesAreCutToTheirColumn) {
  ViewModel model = two_ranks();
  model.ranks[0].collective->op = "a_very_long_collective_name";
  ScreenGrid grid(80, 24);
  render_screen(model, UiState{}, glyphs_for(Charset::kAscii), grid);
  const std::string row = grid.row_text(4);
  EXPECT_NE(row.find("a_very_long~"), std::string::npos) << row;
  EXPECT_NE(row.find("20.0 ms"), std::string::npos) << row;  // the next column is intact
}

// A wait of a few microseconds keeps its unit in the 8-character column: "0.0035 ms" did not fit
// and was cut to "0.0035 ~", a number without a unit.
TEST(Overview, MicrosecondWaitsKeepTheirUnit) {
  ViewModel model = two_ranks();
  model.ranks[0].collective->waited_ns = 3'500;
  model.ranks[1].collective->waited_ns = 420;
  ScreenGrid grid(80, 24);
  render_screen(model, UiState{}, glyphs_for(Charset::kAscii), grid);
  EXPECT_NE(grid.row_text(4).find(" 3.5 us"), std::string::npos) << grid.row_text(4);
  EXPECT_NE(grid.row_text(5).find(" 420 ns"), std::string::npos) << grid.row_text(5);
  EXPECT_EQ(grid.row_text(4).find('~'), std::string::npos) << grid.row_text(4);
}

TEST(Overview, WiderTerminalsGetWiderBars) {
  const ViewModel model = two_ranks();
  ScreenGrid grid(120, 30);
  render_screen(model, UiState{}, glyphs_for(Charset::kAscii), grid);
  // 56 cells for the bars: 31 for time, all compute on rank 1.
  EXPECT_EQ(count(grid.row_text(5), "#"), 31);
}

TEST(Overview, TheRankFilterHidesOtherRanks) {
  const ViewModel model = two_ranks();
  UiState state;
  state.rank_filter = {1};
  ScreenGrid grid(80, 24);
  render_screen(model, state, glyphs_for(Charset::kAscii), grid);
  EXPECT_NE(grid.row_text(2).find("Overview: 1 of 2 ranks"), std::string::npos);
  EXPECT_EQ(grid.row_text(4).substr(0, 4), "   1");
  EXPECT_NE(grid.row_text(1).find("ranks 1"), std::string::npos);
}

// Below the rank rows: the slowest rank's step time and the loss over the steps every rank
// finished, as sparklines with the latest value and the range.
TEST(Overview, StepTimeAndLossOverStepsAsSparklines) {
  ViewModel model = two_ranks();
  for (int64_t step = 0; step < 5; ++step) {
    StepPoint point;
    point.step = step;
    point.slowest_ns = (step + 1) * 10 * kMs;  // 10, 20, ..., 50 ms
    point.loss = 3.0 - 0.5 * static_cast<double>(step);  // 3.0 down to 1.0
    point.ranks = 2;
    model.history.push_back(point);
  }
  ScreenGrid grid(80, 24);
  render_screen(model, UiState{}, glyphs_for(Charset::kAscii), grid);
  const std::string text = screen_text(grid);
  // Levels _ . , : - = + # from the smallest to the largest value.
  EXPECT_NE(text.find("step time _,-=# 50.0 ms (10.0 ms - 50.0 ms, last 5 steps)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("loss      #=-,_ 1 (step 0: 3)"), std::string::npos) << text;

  ScreenGrid utf8(80, 24);
  render_screen(model, UiState{}, glyphs_for(Charset::kUtf8), utf8);
  EXPECT_NE(screen_text(utf8).find("▁▃▅▆█"), std::string::npos) << screen_text(utf8);

  model.history.clear();
  model.live = true;
  ScreenGrid empty(80, 24);
  render_screen(model, UiState{}, glyphs_for(Charset::kAscii), empty);
  EXPECT_NE(screen_text(empty).find("step time - (no step finished by every rank yet)"),
            std::string::npos)
      << screen_text(empty);
  // A run that is over will finish none: "yet" would promise one.
  model.live = false;
  ScreenGrid over(80, 24);
  render_screen(model, UiState{}, glyphs_for(Charset::kAscii), over);
  EXPECT_NE(screen_text(over).find("step time - (the run recorded no step every rank finished)"),
            std::string::npos)
      << screen_text(over);
}

TEST(Screen, TooSmallTerminalsGetAClearMessage) {
  ScreenGrid grid(79, 24);
  render_screen(two_ranks(), UiState{}, glyphs_for(Charset::kAscii), grid);
  const std::string text = screen_text(grid);
  EXPECT_NE(text.find("Terminal too small: 79x24"), std::string::npos) << text;
  EXPECT_NE(text.find("needs at least 80x24"), std::string::npos);
  ScreenGrid short_grid(80, 23);
  render_screen(two_ranks(), UiState{}, glyphs_for(Charset::kAscii), short_grid);
  EXPECT_NE(screen_text(short_grid).find("Terminal too small: 80x23"), std::string::npos);
}

TEST(Screen, EveryViewDrawsItsHeader) {
  ViewModel model = two_ranks();
  model.slices[0].push_back({0, 50 * kMs, Activity::kCompute});
  model.steps[0].push_back({3, 0, 100 * kMs, 1000});
  model.end_ns = 100 * kMs;
  const std::pair<View, const char*> expected[] = {{View::kOverview, "Overview:"},
                                                    {View::kTimeline, "Timeline:"},
                                                    {View::kCollectives, "Collectives:"},
                                                    {View::kMemory, "Memory: rank 0"},
                                                    {View::kFindings, "Findings:"}};
  for (auto [view, header] : expected) {
    UiState state;
    state.view = view;
    ScreenGrid grid(80, 24);
    render_screen(model, state, glyphs_for(Charset::kUtf8), grid);
    EXPECT_EQ(grid.row_text(2).rfind(header, 0), 0u) << header << "\n" << screen_text(grid);
  }
}

TEST(Timeline, CellsShowTheKindThatCoveredThemAndStepMarks) {
  ViewModel model = two_ranks();
  // 74 cells over 740 ms: 10 ms each. Rank 0 computes for the first half of the step.
  model.steps[0].push_back({3, 0, 740 * kMs, 0});
  model.slices[0].push_back({0, 370 * kMs, Activity::kCompute});
  model.slices[0].push_back({370 * kMs, 400 * kMs, Activity::kComm});
  model.end_ns = 740 * kMs;
  UiState state;
  state.view = View::kTimeline;
  state.timeline.span_ns = 740 * kMs;
  ScreenGrid grid(80, 24);
  render_screen(model, state, glyphs_for(Charset::kAscii), grid);
  const std::string ruler = grid.row_text(3);
  EXPECT_EQ(ruler.substr(0, 8), "step  |3") << ruler;
  const std::string row = grid.row_text(4);
  EXPECT_EQ(row.substr(0, 6), "r0    ");
  EXPECT_EQ(count(row, "#"), 37);
  EXPECT_EQ(count(row, "="), 3);
  EXPECT_EQ(count(row, "."), 34);
}

// Following the newest data means the latest slice, not the run's end row written a teardown
// later; a step number that does not fit before the next marker is left out, not cut.
TEST(Timeline, FollowsTheLatestSliceAndLabelsOnlyWholeStepNumbers) {
  ViewModel model = two_ranks();
  const int64_t base = 1000 * kMs;
  for (int step = 8; step < 20; ++step) {
    model.steps[0].push_back({step, base + (step - 8) * 20 * kMs, 20 * kMs, 0});
  }
  model.slices[0].push_back({0, base + 240 * kMs, Activity::kCompute});
  model.data_end_ns = base + 240 * kMs;
  model.end_ns = base + 600 * kMs;  // the launcher's end, 360 ms after the last slice
  UiState state;
  state.view = View::kTimeline;
  state.timeline.span_ns = 74 * 10 * kMs / 2;  // 5 ms a cell: a marker every 4 columns
  ScreenGrid grid(80, 24);
  render_screen(model, state, glyphs_for(Charset::kAscii), grid);
  const std::string row = grid.row_text(4);
  EXPECT_EQ(count(row, "#"), 74) << screen_text(grid);
  const std::string ruler = grid.row_text(3);
  EXPECT_NE(ruler.find("|8  |9  |10 |11 |12 |13 |14 |15 |16 |17 |18 |19"), std::string::npos)
      << ruler;
  state.timeline.span_ns = 74 * 10 * kMs / 4;  // 2.5 ms a cell: two-digit numbers do not fit
  render_screen(model, state, glyphs_for(Charset::kAscii), grid);
  EXPECT_EQ(grid.row_text(3).find("|1|"), std::string::npos) << grid.row_text(3);
  EXPECT_NE(grid.row_text(3).find("|19"), std::string::npos) << grid.row_text(3);
  // Panned to before the first slice, with nothing dropped: no claim that older slices were not
  // loaded; only when the follower did drop some.
  state.timeline.span_ns = 2000 * kMs;
  render_screen(model, state, glyphs_for(Charset::kAscii), grid);
  EXPECT_EQ(screen_text(grid).find("not loaded"), std::string::npos) << screen_text(grid);
  model.older_slices_dropped = true;
  render_screen(model, state, glyphs_for(Charset::kAscii), grid);
  EXPECT_NE(screen_text(grid).find("older slices not loaded"), std::string::npos);
  // Following the newest data rank 0's slices cover the span, but rank 1 has none loaded at all
  // (a first read that kept other ranks' rows): it is not known idle, and the notice says so.
  state.timeline.span_ns = 100 * kMs;
  render_screen(model, state, glyphs_for(Charset::kAscii), grid);
  EXPECT_NE(screen_text(grid).find("older slices not loaded"), std::string::npos)
      << screen_text(grid);
  model.older_slices_dropped = false;
  render_screen(model, state, glyphs_for(Charset::kAscii), grid);
  EXPECT_EQ(screen_text(grid).find("not loaded"), std::string::npos) << screen_text(grid);
}

TEST(Memory, ChartsCategoriesAndTheEstimate) {
  ViewModel model = two_ranks();
  MemoryChart& mem = model.memory[0];
  mem.points.push_back({0, model.ranks[0].memory_bytes});
  mem.points.push_back({1000 * kMs, model.ranks[0].memory_bytes});
  mem.peak[0] = 4 * kMiB;
  mem.estimate[0] = 5 * kMiB;
  mem.estimate_total = 5 * kMiB;
  UiState state;
  state.view = View::kMemory;
  ScreenGrid grid(80, 24);
  render_screen(model, state, glyphs_for(Charset::kAscii), grid);
  const std::string text = screen_text(grid);
  EXPECT_NE(grid.row_text(2).find("in use 4.00 MiB, peak 4.00 MiB, estimate 5.00 MiB"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("P params         4.00 MiB   4.00 MiB   5.00 MiB   -20.0%"), std::string::npos)
      << text;
  EXPECT_GT(count(text, "-----"), 0);  // the estimate's line across the chart
}

// A rank with no memory samples (a CPU PyTorch job) is "not recorded" with analyze's reason, not
// an empty chart of "in use 0 B, peak 0 B ... no memory samples yet".
TEST(Memory, ARankWithoutSamplesIsNotRecordedNotZero) {
  ViewModel model = two_ranks();
  model.memory.clear();
  for (auto& row : model.ranks) row.memory_bytes = {};
  UiState state;
  state.view = View::kMemory;
  ScreenGrid grid(80, 24);
  render_screen(model, state, glyphs_for(Charset::kAscii), grid);
  std::string text = screen_text(grid);
  EXPECT_NE(text.find("Memory: rank 0 (h/l), not recorded"), std::string::npos) << text;
  EXPECT_NE(text.find("a CPU job has none"), std::string::npos) << text;  // wrapped, whole
  EXPECT_EQ(text.find("0 B"), std::string::npos) << text;
  EXPECT_EQ(text.find("samples yet"), std::string::npos) << text;

  model.imported = true;  // an imported profile: the profiler's option to turn on
  render_screen(model, state, glyphs_for(Charset::kAscii), grid);
  text = screen_text(grid);
  EXPECT_NE(text.find("profile_memory=True"), std::string::npos) << text;
}

// Under the chart, the run's elapsed time at its first column, its middle and its last.
TEST(Memory, TheChartHasATimeAxis) {
  ViewModel model = two_ranks();
  model.start_ns = 5'000 * kMs;
  MemoryChart& mem = model.memory[0];
  mem.points.push_back({7'000 * kMs, model.ranks[0].memory_bytes});    // 0:02 into the run
  mem.points.push_back({125'000 * kMs, model.ranks[0].memory_bytes});  // 2:00
  mem.peak_total = 4 * kMiB;
  UiState state;
  state.view = View::kMemory;
  ScreenGrid grid(80, 24);
  render_screen(model, state, glyphs_for(Charset::kAscii), grid);
  int axis = -1;
  for (int y = 0; y < 24; ++y) {
    if (grid.row_text(y).starts_with("elapsed")) axis = y;
  }
  ASSERT_GT(axis, 0) << screen_text(grid);
  const std::string row = grid.row_text(axis);
  // 70 chart columns from column 10: "0:02" at the left, "1:01" centred, "2:00" at the right.
  EXPECT_EQ(row.substr(9, 5), "+0:02") << row;
  EXPECT_EQ(row.substr(43, 4), "1:01") << row;
  EXPECT_EQ(row.substr(76), "2:00") << row;
  EXPECT_EQ(row.substr(14, 4), "----") << row;
  // The chart's bottom row is right above the axis, the table right below it.
  EXPECT_EQ(grid.row_text(axis - 1).substr(0, 3), "0 B") << screen_text(grid);
  EXPECT_NE(grid.row_text(axis + 1).find("category"), std::string::npos) << screen_text(grid);
}

// The first l moves to the next rank (it used to step from "none chosen" to the first rank,
// which was already shown), and h from the first wraps to the last.
TEST(Memory, HAndLChooseTheRankFromTheFirstPress) {
  const ViewModel model = two_ranks();
  UiState state;
  state.view = View::kMemory;
  auto shown_rank = [&] {
    ScreenGrid grid(80, 24);
    render_screen(model, state, glyphs_for(Charset::kAscii), grid);
    return grid.row_text(2).substr(0, 15);
  };
  EXPECT_EQ(shown_rank(), "Memory: rank 0 ");
  EXPECT_EQ(handle_key(state, 'l', model), KeyResult::kRedraw);
  EXPECT_EQ(shown_rank(), "Memory: rank 1 ");
  handle_key(state, 'l', model);
  EXPECT_EQ(shown_rank(), "Memory: rank 0 ");  // wraps
  handle_key(state, 'h', model);
  EXPECT_EQ(shown_rank(), "Memory: rank 1 ");  // and back
}

TEST(Findings, ListsFindingsBySeverityWithEvidenceAndAdvice) {
  ViewModel model = two_ranks();
  analyzers::Finding f;
  f.kind = "straggler";
  f.severity = analyzers::Severity::kWarning;
  f.rank = 1;
  f.impact = 0.12;
  f.evidence = "rank 1 arrives last at 94% of all-reduces";
  f.advice = "look at rank 1's host";
  model.analysis.report->findings.push_back(f);
  model.analysis.note = "steps 1..3 (warm-up 1 skipped)";
  UiState state;
  state.view = View::kFindings;
  ScreenGrid grid(80, 24);
  render_screen(model, state, glyphs_for(Charset::kAscii), grid);
  EXPECT_EQ(grid.row_text(3), "1. [warning] straggler (rank 1) (impact 12%)");
  EXPECT_EQ(grid.row_text(4), "   rank 1 arrives last at 94% of all-reduces");
  EXPECT_EQ(grid.row_text(5), "   try: look at rank 1's host");
}

// A mixture-of-experts run's collectives view ends with its worst layers' expert load, as
// `partrain analyze` measured it; a dense run's has no such block.
TEST(Collectives, TheWorstExpertLayersAtTheBottom) {
  ViewModel model = two_ranks();
  UiState state;
  state.view = View::kCollectives;
  ScreenGrid dense(80, 24);
  render_screen(model, state, glyphs_for(Charset::kAscii), dense);
  EXPECT_EQ(screen_text(dense).find("Experts:"), std::string::npos);

  analyzers::ExpertLoadReport& experts = model.analysis.report->experts;
  experts.applicable = true;
  experts.ep = 2;
  for (int layer = 0; layer < 6; ++layer) {
    analyzers::ExpertLayerBalance l;
    l.layer = layer;
    l.experts = 8;
    l.expert_ratio = 1.5 + 0.1 * layer;
    l.ep_ratio = 1.0 + 0.1 * layer;  // layer 5 is the worst: 1.5x
    l.hottest_expert = layer;
    l.hottest_share = 0.25;
    l.dropped_share = layer == 5 ? 0.02 : 0;
    experts.layers.push_back(l);
  }
  // A recent dispatch all_to_all shows its label in the op column.
  MatchedCollective dispatch;
  dispatch.comm_id = "ep";
  dispatch.op = "all_to_all";
  dispatch.label = "moe_dispatch";
  dispatch.bytes = 4096;
  dispatch.group_size = 2;
  model.collectives.push_back(dispatch);
  ScreenGrid grid(80, 24);
  render_screen(model, state, glyphs_for(Charset::kAscii), grid);
  const std::string text = screen_text(grid);
  EXPECT_NE(text.find(" moe_dispatch "), std::string::npos) << text;
  EXPECT_EQ(view_model_json(model)["recent_collectives"][0]["label"], "moe_dispatch");
  EXPECT_NE(text.find("Experts: 6 MoE layers, ep 2"), std::string::npos) << text;
  // The four worst layers, the worst first: layer 5 at 1.50x over ep ranks, 2.0% dropped.
  EXPECT_NE(text.find("    5            2.00x        1.50x     2.0%        5 (25.0%)"),
            std::string::npos)
      << text;
  EXPECT_LT(text.find("    5     "), text.find("    4     "));
  EXPECT_NE(text.find("    2     "), std::string::npos);
  EXPECT_EQ(text.find("    1            1.60x"), std::string::npos) << text;  // only four fit
}

TEST(Help, OverlaysTheKeys) {
  UiState state;
  state.help = true;
  ScreenGrid grid(80, 24);
  render_screen(two_ranks(), state, glyphs_for(Charset::kAscii), grid);
  const std::string text = screen_text(grid);
  EXPECT_NE(text.find("q                    quit (the terminal is restored)"), std::string::npos);
}

// The box has corners, not a side over a line (`│────│`).
TEST(Help, TheBoxHasCorners) {
  UiState state;
  state.help = true;
  for (Charset charset : {Charset::kUtf8, Charset::kAscii}) {
    const Glyphs& g = glyphs_for(charset);
    ScreenGrid grid(80, 24);
    render_screen(two_ranks(), state, g, grid);
    // The title row: "| Keys ...|"; the box's left edge is two columns before "Keys".
    int title = -1;
    for (int y = 0; y < 24 && title < 0; ++y) {
      if (grid.row_text(y).find(" Keys ") != std::string::npos) title = y;
    }
    ASSERT_GT(title, 0) << screen_text(grid);
    const std::u32string title_row = decode_utf8(grid.row_text(title));
    const size_t left = title_row.find(U"Keys") - 2;
    const size_t right = title_row.find_last_of(g.vertical);
    int bottom = title;
    while (bottom + 1 < 24 && decode_utf8(grid.row_text(bottom + 1))[left] == g.vertical) ++bottom;
    ++bottom;
    const std::u32string top_row = decode_utf8(grid.row_text(title - 1));
    const std::u32string bottom_row = decode_utf8(grid.row_text(bottom));
    EXPECT_EQ(top_row[left], g.corners[0]) << grid.row_text(title - 1);
    EXPECT_EQ(top_row[right], g.corners[1]) << grid.row_text(title - 1);
    EXPECT_EQ(bottom_row[left], g.corners[2]) << grid.row_text(bottom);
    EXPECT_EQ(bottom_row[right], g.corners[3]) << grid.row_text(bottom);
    EXPECT_EQ(top_row[left + 1], g.horizontal);
  }
  EXPECT_EQ(glyphs_for(Charset::kUtf8).corners[0], U'┌');
}

}  // namespace
}  // namespace partrain::tui
