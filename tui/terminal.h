// The screen the dashboard draws on and the keys it reads, behind an interface: the ncurses
// implementation (ncurses_terminal.h) for users, a scripted fake for tests. Only whole grids go
// out; the terminal maps styles to colours (or, with colour off, to attributes only).
#pragma once

#include <memory>

#include "core/status.h"
#include "tui/screen_grid.h"

namespace partrain::tui {

struct TerminalSize {
  int width = 0;
  int height = 0;
};

class Terminal {
 public:
  virtual ~Terminal() = default;
  virtual TerminalSize size() = 0;
  virtual void draw(const ScreenGrid& grid) = 0;
  // The next key (ui_state.h's Key codes), waiting at most timeout_ms; kKeyNone when none came
  // or a signal interrupted the wait.
  virtual int read_key(int timeout_ms) = 0;
};

// Takes over the controlling terminal (alternate screen, no echo, keypad) until destroyed, which
// restores it exactly. kInvalidArgument (exit 2) when stdin/stdout is not a terminal ncurses can
// drive.
StatusOr<std::unique_ptr<Terminal>> open_ncurses_terminal(bool color);

}  // namespace partrain::tui
