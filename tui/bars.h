// Horizontal stacked bars (the overview's time split and memory by category): each segment gets
// the cells between its rounded cumulative boundaries, so the segments always add up to the
// bar's width and a segment's cells do not depend on rounding the ones before it.
#pragma once

#include <span>
#include <vector>

#include "tui/screen_grid.h"

namespace partrain::tui {

struct BarSegment {
  double value = 0;
  char32_t glyph = U'#';
  Style style = Style::kNormal;
};

// Cells for `segments` on a bar of `width` cells that stands for `scale` (values past the scale
// are cut off); cells past the last segment are blank.
std::vector<Cell> stacked_bar(const std::vector<BarSegment>& segments, double scale, int width);
void draw_cells(ScreenGrid& grid, int x, int y, const std::vector<Cell>& cells);
// A sparkline of `values` (oldest first) in `levels` heights, lowest first: the smallest value
// takes the lowest, the largest the highest; all equal values sit in the middle.
std::vector<Cell> sparkline(std::span<const double> values, std::span<const char32_t> levels,
                            Style style);

}  // namespace partrain::tui
