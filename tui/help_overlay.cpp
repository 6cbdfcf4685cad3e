// The `?` overlay: every key in one box over the current view (any key closes it).
#include <algorithm>
#include <string>

#include "tui/views.h"

namespace partrain::tui {

void render_help(const Glyphs& glyphs, ScreenGrid& grid) {
  static constexpr const char* kLines[] = {
      "Keys",
      "1-5, Tab, Shift-Tab  overview, timeline, collectives, memory, findings",
      "Up/Down, j/k         scroll the list (memory: h/l choose the rank)",
      "Left/Right, h/l      timeline: pan back and forward",
      "[ ] or - +           timeline: zoom out, zoom in",
      "f                    timeline: follow the newest data again",
      "p or Space           pause / resume refreshing",
      "/                    show only some ranks: 0,2,4-7 (empty: all)",
      "?                    this help (any key closes it)",
      "q                    quit (the terminal is restored)",
      "",
      "Overview bars: compute, exposed comm, exposed memcpy and idle of",
      "each rank's last step; memory in use stacked by category; below,",
      "step time and loss over the latest steps; tok/s: per GPU.",
      "Details: docs/top.md"};
  const int rows = static_cast<int>(std::size(kLines));
  int width = 0;
  for (const char* line : kLines) width = std::max(width, static_cast<int>(std::string(line).size()));
  width = std::min(width + 4, grid.width());
  const int height = std::min(rows + 2, grid.height());
  const int x0 = (grid.width() - width) / 2;
  const int y0 = (grid.height() - height) / 2;
  for (int y = y0; y < y0 + height; ++y) {
    for (int x = x0; x < x0 + width; ++x) grid.put(x, y, U' ', Style::kNormal);
  }
  for (int x = x0; x < x0 + width; ++x) {
    grid.put(x, y0, glyphs.horizontal, Style::kBold);
    grid.put(x, y0 + height - 1, glyphs.horizontal, Style::kBold);
  }
  for (int y = y0 + 1; y < y0 + height - 1; ++y) {
    grid.put(x0, y, glyphs.vertical, Style::kBold);
    grid.put(x0 + width - 1, y, glyphs.vertical, Style::kBold);
  }
  grid.put(x0, y0, glyphs.corners[0], Style::kBold);
  grid.put(x0 + width - 1, y0, glyphs.corners[1], Style::kBold);
  grid.put(x0, y0 + height - 1, glyphs.corners[2], Style::kBold);
  grid.put(x0 + width - 1, y0 + height - 1, glyphs.corners[3], Style::kBold);
  for (int i = 0; i < rows && i + 1 < height - 1; ++i) {
    grid.text(x0 + 2, y0 + 1 + i, kLines[i], i == 0 ? Style::kHeader : Style::kNormal, width - 4);
  }
}

}  // namespace partrain::tui
