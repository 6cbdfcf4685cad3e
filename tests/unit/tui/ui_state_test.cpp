#include "tui/ui_state.h"

#include <gtest/gtest.h>

namespace partrain::tui {
namespace {

constexpr int64_t kMs = 1'000'000;

ViewModel model_ending_at(int64_t end_ns) {
  ViewModel model;
  model.end_ns = end_ns;
  model.steps[0].push_back({1, 0, 100 * kMs, 0});
  return model;
}

TEST(UiState, NumberKeysAndTabChooseTheView) {
  UiState state;
  const ViewModel model;
  EXPECT_EQ(handle_key(state, '4', model), KeyResult::kRedraw);
  EXPECT_EQ(state.view, View::kMemory);
  handle_key(state, kKeyTab, model);
  EXPECT_EQ(state.view, View::kFindings);
  handle_key(state, kKeyTab, model);
  EXPECT_EQ(state.view, View::kOverview);  // wraps
  handle_key(state, kKeyBackTab, model);
  EXPECT_EQ(state.view, View::kFindings);
  EXPECT_EQ(handle_key(state, 'x', model), KeyResult::kUnchanged);
  EXPECT_EQ(handle_key(state, 'q', model), KeyResult::kQuit);
}

TEST(UiState, PauseHelpAndScroll) {
  UiState state;
  const ViewModel model;
  handle_key(state, 'p', model);
  EXPECT_TRUE(state.paused);
  handle_key(state, 'p', model);
  EXPECT_FALSE(state.paused);
  handle_key(state, '?', model);
  EXPECT_TRUE(state.help);
  handle_key(state, '2', model);  // any key closes the help and does nothing else
  EXPECT_FALSE(state.help);
  EXPECT_EQ(state.view, View::kOverview);
  handle_key(state, 'j', model);
  handle_key(state, kKeyDown, model);
  EXPECT_EQ(state.scroll, 2);
  handle_key(state, 'k', model);
  handle_key(state, kKeyUp, model);
  handle_key(state, kKeyUp, model);
  EXPECT_EQ(state.scroll, 0);
}

TEST(UiState, SlashFiltersRanks) {
  UiState state;
  const ViewModel model;
  handle_key(state, '/', model);
  EXPECT_TRUE(state.editing_filter);
  for (char c : std::string("0,2,4-6")) handle_key(state, c, model);
  EXPECT_EQ(handle_key(state, 'q', model), KeyResult::kUnchanged);  // typing, not quitting
  handle_key(state, kKeyEnter, model);
  EXPECT_FALSE(state.editing_filter);
  EXPECT_EQ(state.rank_filter, (std::vector<int>{0, 2, 4, 5, 6}));
  EXPECT_TRUE(rank_shown(state, 5));
  EXPECT_FALSE(rank_shown(state, 1));
  handle_key(state, '/', model);
  handle_key(state, kKeyEnter, model);  // empty: every rank again
  EXPECT_TRUE(state.rank_filter.empty());
  handle_key(state, '/', model);
  for (char c : std::string("3-1")) handle_key(state, c, model);
  handle_key(state, kKeyEnter, model);
  EXPECT_EQ(state.message,
            "rank filter '3-1': write world ranks separated by commas, A-B for ranks A to B, e.g. "
            "0,2 or 0-3,6");
}

TEST(UiState, ZoomAndPanTheTimeline) {
  UiState state;
  const ViewModel model = model_ending_at(1000 * kMs);
  EXPECT_EQ(default_span_ns(model), 400 * kMs);  // four steps of 100 ms
  handle_key(state, '+', model);
  EXPECT_EQ(state.timeline.span_ns, 200 * kMs);
  handle_key(state, '[', model);
  handle_key(state, '[', model);
  EXPECT_EQ(state.timeline.span_ns, 800 * kMs);
  handle_key(state, 'h', model);  // a quarter of the span back
  EXPECT_EQ(state.timeline.end_ns, 800 * kMs);
  handle_key(state, kKeyRight, model);  // back at the newest data: follow it again
  EXPECT_FALSE(state.timeline.end_ns);
  handle_key(state, kKeyLeft, model);
  handle_key(state, 'f', model);
  EXPECT_FALSE(state.timeline.end_ns);
  EXPECT_FALSE(state.timeline.span_ns);
}

// Zooming out stops at twice the run; panning follows the latest slice, not the run's end row.
TEST(UiState, ZoomOutStopsAtTwiceTheRun) {
  UiState state;
  ViewModel model = model_ending_at(5000 * kMs);
  model.start_ns = 100 * kMs;
  model.data_end_ns = 1100 * kMs;  // a run of 1 s
  for (int i = 0; i < 10; ++i) handle_key(state, '[', model);
  EXPECT_EQ(state.timeline.span_ns, 2000 * kMs);
  handle_key(state, 'h', model);
  EXPECT_EQ(state.timeline.end_ns, 600 * kMs);
}

TEST(UiState, ViewNamesRoundTrip) {
  for (int i = 0; i < kViewCount; ++i) {
    const auto view = static_cast<View>(i);
    EXPECT_EQ(parse_view(view_name(view)), view);
  }
  EXPECT_FALSE(parse_view("graphs"));
}

}  // namespace
}  // namespace partrain::tui
