// The entry points of the dashboard: the interactive loop (`partrain top`, and `partrain launch
// --tui` following the trace of the run it launched), one overview frame as text (`--once`) and
// the view model as JSON (`--json`). The loop is htop's: refresh the model when due, redraw when
// something changed, wait for a key until the next refresh, dispatch it.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "core/status.h"
#include "tui/glyphs.h"
#include "tui/terminal.h"
#include "tui/ui_state.h"

namespace partrain::tui {

enum class ColorMode { kAuto, kAlways, kNever };

struct DashboardOptions {
  std::filesystem::path trace;
  std::chrono::milliseconds interval{500};
  ColorMode color = ColorMode::kAuto;
  std::optional<Charset> charset;  // nullopt: from the locale (UTF-8 or ASCII)
  View view = View::kOverview;
  // How long to wait for the trace file to appear (launch --tui starts the dashboard before its
  // collector has created the file); 0: it must exist.
  std::chrono::milliseconds wait_for_trace{0};
  // How long to wait, past wait_for_trace, for a trace its live writer is still creating
  // (profiler::trace_being_created: `partrain top` right after a launch); then it says the run
  // is starting (exit 1), not that the file is unreadable (exit 3).
  std::chrono::milliseconds wait_for_starting_trace{3000};
  // Polled every loop: true ends the dashboard (exit 0), e.g. when the launcher must stop.
  std::function<bool()> stop_requested;
  // Catch SIGINT, SIGTERM and SIGHUP (exit 128 + N, terminal restored). A caller with its own
  // handlers (the launcher forwards Ctrl-C to its ranks) sets false, installs them before calling,
  // and ends the dashboard through stop_requested; ncurses then leaves them alone.
  bool handle_signals = true;
};

// Runs until q (0), Ctrl-C or SIGTERM (130 / 143), or stop_requested; the terminal is restored
// before it returns and any error is printed on stderr after that. 2: no terminal, or one smaller
// than 80x24 at start; 3: the trace is unreadable.
int run_dashboard(const DashboardOptions& options);
// The same loop on a given terminal (tests pass a scripted one). Errors are returned, not printed.
StatusOr<int> run_dashboard_on(const DashboardOptions& options, Terminal& terminal);

// One frame of options.view under the status line, as plain text or with ANSI colours: the
// overview with a row per rank whatever `height`; the other views in `width` x `height` cells
// (at least 80x24), as they would fill a terminal of that size.
StatusOr<std::string> render_view_once(const DashboardOptions& options, int width, int height,
                                       bool ansi);
// The view model after one refresh and one run of the analyses.
StatusOr<nlohmann::json> view_model_once(const DashboardOptions& options);

// NO_COLOR (https://no-color.org), TERM=dumb and --color: whether a stream that is (or is not) a
// terminal gets colour.
bool use_color(ColorMode mode, bool is_tty);

}  // namespace partrain::tui
