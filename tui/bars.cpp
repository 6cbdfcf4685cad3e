#include "tui/bars.h"

#include <algorithm>
#include <cmath>

namespace partrain::tui {

std::vector<Cell> stacked_bar(const std::vector<BarSegment>& segments, double scale, int width) {
  std::vector<Cell> cells(static_cast<size_t>(std::max(width, 0)));
  if (scale <= 0 || width <= 0) return cells;
  double cumulative = 0;
  int from = 0;
  for (const BarSegment& s : segments) {
    cumulative += std::max(s.value, 0.0);
    const int to = std::clamp(static_cast<int>(std::lround(cumulative / scale * width)), 0, width);
    for (int x = from; x < to; ++x) cells[static_cast<size_t>(x)] = {s.glyph, s.style};
    from = std::max(from, to);
  }
  return cells;
}

void draw_cells(ScreenGrid& grid, int x, int y, const std::vector<Cell>& cells) {
  for (size_t i = 0; i < cells.size(); ++i) {
    grid.put(x + static_cast<int>(i), y, cells[i].ch, cells[i].style);
  }
}

std::vector<Cell> sparkline(std::span<const double> values, std::span<const char32_t> levels,
                            Style style) {
  std::vector<Cell> cells;
  if (levels.empty() || values.empty()) return cells;
  const auto [low, high] = std::minmax_element(values.begin(), values.end());
  const int top = static_cast<int>(levels.size()) - 1;
  for (double v : values) {
    const int level =
        *high > *low ? static_cast<int>(std::lround((v - *low) / (*high - *low) * top)) : top / 2;
    cells.push_back({levels[static_cast<size_t>(std::clamp(level, 0, top))], style});
  }
  return cells;
}

}  // namespace partrain::tui
