// The one file that includes curses (STYLE.md, after htop): a Terminal over ncursesw. Cells go
// out as wide characters with a colour pair per Style; ncurses sends only what changed.
#include <curses.h>
#include <term.h>
#include <unistd.h>

#include <clocale>
#include <cstdio>
#include <cstdlib>

#include "tui/terminal.h"
#include "tui/ui_state.h"

namespace partrain::tui {
namespace {

constexpr int kStyleCount = static_cast<int>(Style::kGood) + 1;

class NcursesTerminal final : public Terminal {
 public:
  NcursesTerminal(SCREEN* screen, bool color) : screen_(screen), color_(color) {
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    set_escdelay(25);
    curs_set(0);
    if (color_ && has_colors()) {
      start_color();
      use_default_colors();
      for (int s = 0; s < kStyleCount; ++s) {
        const StyleLook look = style_look(static_cast<Style>(s), true);
        init_pair(static_cast<short>(s + 1), static_cast<short>(look.foreground),
                  static_cast<short>(look.background));
      }
    } else {
      color_ = false;
    }
  }

  ~NcursesTerminal() override {
    endwin();  // leaves the alternate screen and restores the tty modes
    delscreen(screen_);
  }

  TerminalSize size() override {
    int height = 0, width = 0;
    getmaxyx(stdscr, height, width);
    return {width, height};
  }

  void draw(const ScreenGrid& grid) override {
    const TerminalSize screen = size();
    for (int y = 0; y < grid.height() && y < screen.height; ++y) {
      for (int x = 0; x < grid.width() && x < screen.width; ++x) {
        const Cell& cell = grid.at(x, y);
        const StyleLook look = style_look(cell.style, color_);
        attr_t attrs = A_NORMAL;
        if (look.bold) attrs |= A_BOLD;
        if (look.reverse) attrs |= A_REVERSE;
        if (look.dim) attrs |= A_DIM;
        const short pair = color_ ? static_cast<short>(static_cast<int>(cell.style) + 1) : 0;
        const wchar_t text[2] = {static_cast<wchar_t>(cell.ch), L'\0'};
        cchar_t wide;
        setcchar(&wide, text, attrs, pair, nullptr);
        // The bottom-right cell "fails" (the cursor cannot move past it); the cell is drawn.
        mvadd_wch(y, x, &wide);
      }
    }
    wnoutrefresh(stdscr);
    doupdate();
  }

  int read_key(int timeout_ms) override {
    timeout(timeout_ms);
    wint_t ch = 0;
    const int kind = get_wch(&ch);
    if (kind == ERR) return kKeyNone;
    if (kind == KEY_CODE_YES) {
      switch (ch) {
        case KEY_UP: return kKeyUp;
        case KEY_DOWN: return kKeyDown;
        case KEY_LEFT: return kKeyLeft;
        case KEY_RIGHT: return kKeyRight;
        case KEY_BTAB: return kKeyBackTab;
        case KEY_RESIZE: return kKeyResize;
        case KEY_BACKSPACE: return kKeyBackspace;
        case KEY_ENTER: return kKeyEnter;
        default: return kKeyNone;
      }
    }
    if (ch == '\r') return kKeyEnter;
    return static_cast<int>(ch);
  }

 private:
  SCREEN* screen_;
  bool color_;
};

}  // namespace

StatusOr<std::unique_ptr<Terminal>> open_ncurses_terminal(bool color) {
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
    return invalid_argument(
        "partrain top needs a terminal on stdin and stdout (for a snapshot use --once, or "
        "--json)");
  }
  // ncursesw writes wide characters in the locale's encoding: take the environment's (the C
  // library starts in "C", where block characters cannot be written).
  std::setlocale(LC_CTYPE, "");
  const char* term = std::getenv("TERM");
  SCREEN* screen = newterm(term, stdout, stdin);
  if (screen == nullptr) {
    return invalid_argument("cannot drive the terminal (TERM={}): set TERM to your terminal's type",
                            term == nullptr ? "unset" : term);
  }
  set_term(screen);
  // A terminal that cannot place the cursor (TERM=dumb: an editor's shell buffer) would get the
  // status line and a screen of blanks.
  const char* cup = tigetstr(const_cast<char*>("cup"));
  if (cup == nullptr || cup == reinterpret_cast<char*>(-1)) {
    endwin();
    delscreen(screen);
    return invalid_argument(
        "the terminal cannot move its cursor (TERM={}): run partrain top in a full terminal, "
        "set TERM to its type (e.g. xterm-256color), or print a snapshot with --once or --json",
        term == nullptr ? "unset" : term);
  }
  return std::unique_ptr<Terminal>(new NcursesTerminal(screen, color));
}

}  // namespace partrain::tui
