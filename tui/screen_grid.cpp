#include "tui/screen_grid.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace partrain::tui {
namespace {

constexpr int kBlack = 0, kRed = 1, kGreen = 2, kYellow = 3, kBlue = 4, kMagenta = 5, kCyan = 6,
              kWhite = 7;

std::string sgr(const StyleLook& look) {
  std::string codes = "0";
  if (look.bold) codes += ";1";
  if (look.dim) codes += ";2";
  if (look.reverse) codes += ";7";
  if (look.foreground >= 0) codes += fmt::format(";{}", 30 + look.foreground);
  if (look.background >= 0) codes += fmt::format(";{}", 40 + look.background);
  return "\x1b[" + codes + "m";
}

}  // namespace

StyleLook style_look(Style style, bool color) {
  StyleLook look;
  switch (style) {
    case Style::kNormal: break;
    case Style::kDim: look.dim = true; break;
    case Style::kBold: look.bold = true; break;
    case Style::kStatusBar: look.reverse = true; look.bold = true; break;
    case Style::kTabActive: look.reverse = true; look.bold = true; break;
    case Style::kTabInactive: break;
    case Style::kHeader: look.bold = true; break;
    case Style::kSelected: look.reverse = true; break;
    case Style::kCompute: look.foreground = kGreen; break;
    case Style::kComm: look.foreground = kYellow; break;
    case Style::kMemcpy: look.foreground = kMagenta; break;
    case Style::kIdle: look.dim = true; break;
    case Style::kMemParams: look.foreground = kBlue; break;
    case Style::kMemGrads: look.foreground = kCyan; break;
    case Style::kMemOptimizer: look.foreground = kMagenta; break;
    case Style::kMemActivations: look.foreground = kGreen; break;
    case Style::kMemComm: look.foreground = kYellow; break;
    case Style::kMemWorkspace: look.foreground = kRed; break;
    case Style::kMemOther: look.foreground = kWhite; break;
    case Style::kEstimate: look.foreground = kRed; look.bold = true; break;
    case Style::kWarning: look.foreground = kYellow; look.bold = true; break;
    case Style::kCritical: look.foreground = kRed; look.bold = true; break;
    case Style::kGood: look.foreground = kGreen; break;
  }
  if (!color) {
    look.foreground = -1;
    look.background = -1;
  }
  (void)kBlack;
  return look;
}

ScreenGrid::ScreenGrid(int width, int height)
    : width_(std::max(width, 0)), height_(std::max(height, 0)),
      cells_(static_cast<size_t>(width_) * static_cast<size_t>(height_)) {}

const Cell& ScreenGrid::at(int x, int y) const {
  return cells_[static_cast<size_t>(y) * static_cast<size_t>(width_) + static_cast<size_t>(x)];
}

void ScreenGrid::put(int x, int y, char32_t ch, Style style) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
  cells_[static_cast<size_t>(y) * static_cast<size_t>(width_) + static_cast<size_t>(x)] = {ch, style};
}

int ScreenGrid::text(int x, int y, std::string_view utf8, Style style, int max_width,
                     char32_t ellipsis) {
  const std::u32string chars = decode_utf8(utf8);
  int room = width_ - x;
  if (max_width >= 0) room = std::min(room, max_width);
  if (room <= 0) return 0;
  const int n = static_cast<int>(chars.size());
  const bool cut = n > room;
  const int shown = cut ? room - 1 : n;
  for (int i = 0; i < shown; ++i) put(x + i, y, chars[static_cast<size_t>(i)], style);
  if (cut) put(x + shown, y, ellipsis, style);
  return cut ? room : n;
}

void ScreenGrid::fill_row(int y, Style style, char32_t ch) {
  for (int x = 0; x < width_; ++x) put(x, y, ch, style);
}

std::string ScreenGrid::row_text(int y) const {
  std::string out;
  int end = width_;
  while (end > 0 && at(end - 1, y).ch == U' ') --end;
  for (int x = 0; x < end; ++x) append_utf8(out, at(x, y).ch);
  return out;
}

std::string ScreenGrid::to_text(bool ansi, bool color) const {
  if (!ansi) {
    std::string out;
    for (int y = 0; y < height_; ++y) out += row_text(y) + "\n";
    return out;
  }
  std::string out;
  for (int y = 0; y < height_; ++y) {
    std::optional<Style> current;
    for (int x = 0; x < width_; ++x) {
      const Cell& cell = at(x, y);
      if (current != cell.style) {
        out += sgr(style_look(cell.style, color));
        current = cell.style;
      }
      append_utf8(out, cell.ch);
    }
    out += "\x1b[0m\n";
  }
  return out;
}

void append_utf8(std::string& out, char32_t ch) {
  if (ch < 0x80) {
    out += static_cast<char>(ch);
  } else if (ch < 0x800) {
    out += static_cast<char>(0xC0 | (ch >> 6));
    out += static_cast<char>(0x80 | (ch & 0x3F));
  } else if (ch < 0x10000) {
    out += static_cast<char>(0xE0 | (ch >> 12));
    out += static_cast<char>(0x80 | ((ch >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (ch & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (ch >> 18));
    out += static_cast<char>(0x80 | ((ch >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((ch >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (ch & 0x3F));
  }
}

std::u32string decode_utf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    int extra = b < 0x80 ? 0 : (b >> 5) == 0x6 ? 1 : (b >> 4) == 0xE ? 2 : (b >> 3) == 0x1E ? 3 : -1;
    if (extra < 0 || i + static_cast<size_t>(extra) >= text.size()) {
      out += U'?';
      ++i;
      continue;
    }
    char32_t ch = extra == 0 ? b : b & (0x3F >> extra);
    bool ok = true;
    for (int k = 1; k <= extra; ++k) {
      const auto c = static_cast<unsigned char>(text[i + static_cast<size_t>(k)]);
      if ((c & 0xC0) != 0x80) ok = false;
      ch = (ch << 6) | (c & 0x3F);
    }
    out += ok ? ch : U'?';
    i += ok ? static_cast<size_t>(extra) + 1 : 1;
  }
  return out;
}

}  // namespace partrain::tui
