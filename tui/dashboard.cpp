#include "tui/dashboard.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include "analyzers/analysis_cadence.h"
#include "analyzers/live_run_follower.h"
#include "core/clock.h"
#include "core/env.h"
#include "core/log.h"
#include "profiler/trace_open.h"
#include "tui/views.h"

namespace partrain::tui {
namespace {

using analyzers::AnalysisCadence;
using analyzers::LiveRunFollower;

// Set by the signal handler, read by the loop: a signal handler can only reach a global, and
// only a sig_atomic_t is safe to write there.
volatile std::sig_atomic_t g_signal = 0;

void on_signal(int signal) { g_signal = signal; }

// Installed before ncurses starts, so it keeps ours instead of installing its own (which would
// exit the process from inside the handler).
class SignalGuard {
 public:
  explicit SignalGuard(bool enabled) : enabled_(enabled) {
    g_signal = 0;
    if (!enabled_) return;
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaction(s, &action, &old_[index(s)]);
  }
  ~SignalGuard() {
    if (!enabled_) return;
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaction(s, &old_[index(s)], nullptr);
  }

 private:
  static size_t index(int s) { return s == SIGINT ? 0 : s == SIGTERM ? 1 : 2; }
  bool enabled_;
  struct sigaction old_[3] {};
};

StatusOr<std::unique_ptr<LiveRunFollower>> open_follower(const DashboardOptions& options) {
  const int64_t start = monotonic_ns();
  const int64_t deadline = start + options.wait_for_trace.count() * 1'000'000;
  const int64_t starting_deadline =
      std::max(deadline, start + options.wait_for_starting_trace.count() * 1'000'000);
  const auto stopped = [&] {
    return g_signal != 0 || (options.stop_requested && options.stop_requested());
  };
  std::error_code ec;
  while (!std::filesystem::exists(options.trace, ec) && monotonic_ns() < deadline && !stopped()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // The writer takes its lock, creates the file, then its schema: while waiting, or while the
  // writer is alive and the file not yet a trace, it is one being born, not an unreadable input.
  while (true) {
    auto follower = LiveRunFollower::open(options.trace);
    if (follower.is_ok() || stopped()) return follower;
    const int64_t now = monotonic_ns();
    if (now >= deadline) {
      if (!profiler::trace_being_created(options.trace)) return follower;
      if (now >= starting_deadline) {
        return make_status(StatusCode::kUnavailable,
                           "{} is still being created: its run is starting (its writer holds "
                           "the trace's lock but has not written its tables yet); try again in "
                           "a moment",
                           options.trace.string());
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// The model after the first read and the analyses' first run.
Status prime(LiveRunFollower& follower, ViewModel& model, AnalysisCadence& cadence) {
  ASSIGN_OR_RETURN(const bool changed, follower.refresh(model));
  (void)changed;
  const int64_t started = monotonic_ns();
  RETURN_IF_ERROR(analyzers::refresh_analysis(follower.reader(), model.analysis));
  cadence.ran(started, monotonic_ns());
  return Status::ok();
}

}  // namespace

bool use_color(ColorMode mode, bool is_tty) {
  if (mode == ColorMode::kAlways) return true;
  if (mode == ColorMode::kNever) return false;
  const char* no_color = std::getenv("NO_COLOR");
  return is_tty && env::terminal_takes_escapes() && (no_color == nullptr || no_color[0] == '\0');
}

StatusOr<int> run_dashboard_on(const DashboardOptions& options, Terminal& terminal) {
  const TerminalSize initial = terminal.size();
  if (initial.width < kMinWidth || initial.height < kMinHeight) {
    return invalid_argument("the terminal is {}x{}; partrain top needs at least {}x{} (or use "
                            "--once for a snapshot)",
                            initial.width, initial.height, kMinWidth, kMinHeight);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<LiveRunFollower> follower, open_follower(options));
  const Glyphs& glyphs = glyphs_for(options.charset.value_or(charset_from_locale()));
  ViewModel model;
  AnalysisCadence cadence;
  RETURN_IF_ERROR(prime(*follower, model, cadence));
  UiState state;
  state.view = options.view;
  const int64_t interval_ns = std::max<int64_t>(options.interval.count(), 1) * 1'000'000;
  int64_t next_refresh = monotonic_ns() + interval_ns;
  bool dirty = true;
  for (;;) {
    if (g_signal != 0) return 128 + static_cast<int>(g_signal);
    if (options.stop_requested && options.stop_requested()) return 0;
    int64_t now = monotonic_ns();
    if (now >= next_refresh) {
      if (!state.paused) {
        ASSIGN_OR_RETURN(const bool changed, follower->refresh(model));
        if (changed) cadence.trace_changed();
        if (cadence.due(now)) {
          RETURN_IF_ERROR(analyzers::refresh_analysis(follower->reader(), model.analysis));
          cadence.ran(now, monotonic_ns());
          dirty = true;
        }
        // A live run's elapsed time moves even when no row arrived; a finished one is redrawn
        // only when something changed.
        dirty = dirty || changed || model.status == "running";
      }
      now = monotonic_ns();
      next_refresh = now + interval_ns;
    }
    if (dirty) {
      const TerminalSize size = terminal.size();
      ScreenGrid grid(size.width, size.height);
      render_screen(model, state, glyphs, grid);
      terminal.draw(grid);
      dirty = false;
    }
    const int wait_ms = static_cast<int>(std::max<int64_t>(next_refresh - now, 0) / 1'000'000);
    const int key = terminal.read_key(wait_ms);
    switch (handle_key(state, key, model)) {
      case KeyResult::kQuit: return 0;
      case KeyResult::kRedraw: dirty = true; break;
      case KeyResult::kUnchanged: break;
    }
  }
}

int run_dashboard(const DashboardOptions& options) {
  SignalGuard signals(options.handle_signals);
  StatusOr<int> result = Status::ok();
  {
    const bool tty = isatty(STDOUT_FILENO) != 0;
    StatusOr<std::unique_ptr<Terminal>> terminal = open_ncurses_terminal(use_color(options.color, tty));
    if (!terminal.is_ok()) {
      result = terminal.status();
    } else {
      result = run_dashboard_on(options, **terminal);
    }
  }  // the terminal is restored here, before anything is printed
  if (!result.is_ok()) {
    log::error("{}", result.status().message());
    return result.status().exit_code();
  }
  return *result;
}

StatusOr<std::string> render_view_once(const DashboardOptions& options, int width, int height,
                                       bool ansi) {
  ASSIGN_OR_RETURN(std::unique_ptr<LiveRunFollower> follower, open_follower(options));
  ViewModel model;
  AnalysisCadence cadence;
  RETURN_IF_ERROR(prime(*follower, model, cadence));
  const Glyphs& glyphs = glyphs_for(options.charset.value_or(charset_from_locale()));
  UiState state;
  state.view = options.view;
  width = std::max(width, kMinWidth);
  height = options.view == View::kOverview ? 1 + overview_height(model, state)
                                           : std::max(height, kMinHeight);
  ScreenGrid grid(width, height);
  render_status_line(model, state, grid, 0);
  const Rect area{0, 1, grid.width(), grid.height() - 1};
  render_view(model, state, glyphs, grid, area);
  return grid.to_text(ansi, ansi);
}

StatusOr<nlohmann::json> view_model_once(const DashboardOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<LiveRunFollower> follower, open_follower(options));
  ViewModel model;
  AnalysisCadence cadence;
  RETURN_IF_ERROR(prime(*follower, model, cadence));
  return view_model_json(model);
}

}  // namespace partrain::tui
