// The off-screen frame every view draws into: a width x height grid of cells, each a character
// and a style (DESIGN.md "Terminal UI": the screen is a pure function of the view model, rendered
// into a grid first, so it is testable without a terminal). The terminal only copies a finished
// grid out; `--once` prints one as text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace partrain::tui {

// What a cell means, not how it looks: the terminal (or the ANSI printer) maps it to colours and
// attributes, and drops the colours under NO_COLOR.
enum class Style : uint8_t {
  kNormal,
  kDim,
  kBold,
  kStatusBar,    // the run's status line
  kTabActive,
  kTabInactive,
  kHeader,       // a table's column names
  kSelected,
  kCompute,
  kComm,
  kMemcpy,
  kIdle,
  kMemParams,    // memory::Category order from here
  kMemGrads,
  kMemOptimizer,
  kMemActivations,
  kMemComm,
  kMemWorkspace,
  kMemOther,
  kEstimate,
  kWarning,
  kCritical,
  kGood,
};

// A terminal's rendition of a style: ANSI colour numbers 0-7 (-1: the terminal's default).
struct StyleLook {
  int foreground = -1;
  int background = -1;
  bool bold = false;
  bool reverse = false;
  bool dim = false;
};
// With colour off, only the attributes remain (reverse for the bars, bold for headers).
StyleLook style_look(Style style, bool color);

struct Cell {
  char32_t ch = U' ';
  Style style = Style::kNormal;
  bool operator==(const Cell&) const = default;
};

class ScreenGrid {
 public:
  ScreenGrid(int width, int height);

  int width() const { return width_; }
  int height() const { return height_; }
  const Cell& at(int x, int y) const;
  // Writes outside the grid are dropped, so views can draw without bounds checks.
  void put(int x, int y, char32_t ch, Style style = Style::kNormal);
  // UTF-8 text from column x, at most max_width columns (to the right edge when negative); text
  // that does not fit ends in `ellipsis`. Every code point takes one column (the dashboard only
  // draws single-width characters). Returns the columns written.
  int text(int x, int y, std::string_view utf8, Style style = Style::kNormal, int max_width = -1,
           char32_t ellipsis = U'~');
  void fill_row(int y, Style style, char32_t ch = U' ');

  // One row as UTF-8, trailing blanks removed (what tests and tmux's capture-pane compare).
  std::string row_text(int y) const;
  // Every row, newline-terminated; with ansi, SGR escape sequences for the styles' looks.
  std::string to_text(bool ansi, bool color) const;

 private:
  int width_;
  int height_;
  std::vector<Cell> cells_;
};

// A code point as UTF-8 bytes; and UTF-8 text as code points (invalid bytes become '?').
void append_utf8(std::string& out, char32_t ch);
std::u32string decode_utf8(std::string_view text);

}  // namespace partrain::tui
