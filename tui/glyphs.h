// The characters the dashboard draws with: UTF-8 block elements where the terminal's locale can
// show them, plain ASCII otherwise (DESIGN.md "Terminal UI": ASCII fallback when the locale is not
// UTF-8). Views ask for a role ("compute", "params"), never for a literal character, so both sets
// stay complete and a test can render either.
#pragma once

#include <array>
#include <cstddef>

#include "memory/category.h"

namespace partrain::tui {

enum class Charset { kUtf8, kAscii };

struct Glyphs {
  char32_t compute;   // time bar segments
  char32_t comm;
  char32_t memcpy;
  char32_t idle;
  char32_t unrecorded;  // a step's time that is neither communication nor recorded compute
  // One per memory::Category, distinct without colour (NO_COLOR terminals still tell them apart).
  std::array<char32_t, memory::kAllCategories.size()> memory;
  char32_t step_marker;  // timeline step boundary
  char32_t estimate;     // the memory estimate's line
  char32_t horizontal;   // separators and the help box
  char32_t vertical;
  char32_t straggler;
  // The help box's corners: top left, top right, bottom left, bottom right.
  std::array<char32_t, 4> corners;
  // Sparkline heights, lowest first (step time and loss over steps).
  std::array<char32_t, 8> levels;
};

const Glyphs& glyphs_for(Charset charset);

// UTF-8 when the environment's locale (LC_ALL, LC_CTYPE, LANG) has a UTF-8 codeset.
Charset charset_from_locale();

}  // namespace partrain::tui
