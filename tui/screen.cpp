// render_view: the chosen view in its area; render_screen: the frame around it, and the message
// that replaces them on a terminal smaller than 80x24.
#include <fmt/format.h>

#include "tui/views.h"

namespace partrain::tui {
namespace {

void render_too_small(ScreenGrid& grid) {
  const std::string lines[] = {
      fmt::format("Terminal too small: {}x{}", grid.width(), grid.height()),
      fmt::format("partrain top needs at least {}x{}.", kMinWidth, kMinHeight),
      "Enlarge the window, or press q to quit."};
  const int top = std::max(0, grid.height() / 2 - 1);
  for (int i = 0; i < 3; ++i) {
    const int length = static_cast<int>(lines[i].size());
    grid.text(std::max(0, (grid.width() - length) / 2), top + i, lines[i],
              i == 0 ? Style::kWarning : Style::kNormal);
  }
}

void render_tabs(const UiState& state, ScreenGrid& grid, int y) {
  int x = 0;
  for (int i = 0; i < kViewCount; ++i) {
    const auto view = static_cast<View>(i);
    const std::string label = fmt::format(" {} {} ", i + 1, view_title(view));
    x += grid.text(x, y, label, state.view == view ? Style::kTabActive : Style::kTabInactive);
    x += 1;
  }
  if (!state.rank_filter.empty()) {
    std::string ranks;
    for (int r : state.rank_filter) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
    const std::string label = " ranks " + ranks;
    const int width = std::min<int>(static_cast<int>(label.size()), grid.width() - x);
    grid.text(grid.width() - width, y, label, Style::kWarning, width);
  }
}

void render_key_hints(const UiState& state, ScreenGrid& grid, int y) {
  if (state.editing_filter) {
    grid.text(0, y, fmt::format("filter ranks: {}_   (e.g. 0,2,4-7; Enter apply, empty: all; Esc cancel)",
                                state.filter_text),
              Style::kBold);
    return;
  }
  if (!state.message.empty()) {
    grid.text(0, y, state.message, Style::kWarning);
    return;
  }
  grid.text(0, y,
            "q quit  ? help  1-5/Tab views  j/k scroll  h/l pan  [ ] zoom  p pause  / ranks",
            Style::kDim);
}

}  // namespace

void render_view(const ViewModel& model, const UiState& state, const Glyphs& glyphs,
                 ScreenGrid& grid, Rect area) {
  switch (state.view) {
    case View::kOverview:
      render_overview(model, state, glyphs, grid, area);
      break;
    case View::kTimeline:
      render_timeline(model, state, glyphs, grid, area);
      break;
    case View::kCollectives:
      render_collectives(model, state, grid, area);
      break;
    case View::kMemory:
      render_memory(model, state, glyphs, grid, area);
      break;
    case View::kFindings:
      render_findings(model, state, grid, area);
      break;
  }
}

void render_screen(const ViewModel& model, const UiState& state, const Glyphs& glyphs,
                   ScreenGrid& grid) {
  if (grid.width() < kMinWidth || grid.height() < kMinHeight) {
    render_too_small(grid);
    return;
  }
  render_status_line(model, state, grid, 0);
  render_tabs(state, grid, 1);
  const Rect area{0, 2, grid.width(), grid.height() - 3};
  render_view(model, state, glyphs, grid, area);
  render_key_hints(state, grid, grid.height() - 1);
  if (state.help) render_help(glyphs, grid);
}

}  // namespace partrain::tui
