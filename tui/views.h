// The dashboard's screens, each a pure function from the view model and the UI state to cells of
// a grid (DESIGN.md "Terminal UI"). render_screen composes them: the status line, the view tabs,
// the chosen view, the key hints and the help overlay; or the "terminal too small" message.
#pragma once

#include "tui/glyphs.h"
#include "tui/screen_grid.h"
#include "tui/ui_state.h"
#include "tui/view_model.h"

namespace partrain::tui {

inline constexpr int kMinWidth = 80;
inline constexpr int kMinHeight = 24;

struct Rect {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};

void render_screen(const ViewModel& model, const UiState& state, const Glyphs& glyphs,
                   ScreenGrid& grid);

// The view state.view chooses, drawn in `area`.
void render_view(const ViewModel& model, const UiState& state, const Glyphs& glyphs,
                 ScreenGrid& grid, Rect area);
void render_status_line(const ViewModel& model, const UiState& state, ScreenGrid& grid, int y);
void render_overview(const ViewModel& model, const UiState& state, const Glyphs& glyphs,
                     ScreenGrid& grid, Rect area);
void render_timeline(const ViewModel& model, const UiState& state, const Glyphs& glyphs,
                     ScreenGrid& grid, Rect area);
void render_collectives(const ViewModel& model, const UiState& state, ScreenGrid& grid, Rect area);
void render_memory(const ViewModel& model, const UiState& state, const Glyphs& glyphs,
                   ScreenGrid& grid, Rect area);
void render_findings(const ViewModel& model, const UiState& state, ScreenGrid& grid, Rect area);
void render_help(const Glyphs& glyphs, ScreenGrid& grid);

// Rows the overview needs for every shown rank plus its header and legend (for `--once`).
int overview_height(const ViewModel& model, const UiState& state);
// Memory categories' styles, in memory::Category order.
Style memory_style(size_t category);

}  // namespace partrain::tui
