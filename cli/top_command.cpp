// `partrain top [DB]`: the terminal dashboard of a run, live while it is written and browsable
// afterwards (tui/dashboard.h does the work). Flags, finding the latest run when no trace is
// named, and the one-shot outputs (--once, --json) live here.
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli/command.h"
#include "cli/trace_selection.h"
#include "core/duration.h"
#include "core/env.h"
#include "core/json_dump.h"
#include "core/log.h"
#include "tui/dashboard.h"
#include "tui/views.h"

namespace partrain::cli {
namespace {

namespace fs = std::filesystem;


struct TopFlags {
  std::string trace;
  std::string interval = "500ms";
  bool once = false;
  bool json = false;
  std::string color = "auto";
  std::string view = "overview";
  bool ascii = false;
};

StatusOr<tui::DashboardOptions> dashboard_options(const TopFlags& flags) {
  tui::DashboardOptions options;
  StatusOr<Nanoseconds> parsed = parse_duration(flags.interval);
  if (!parsed.is_ok()) return parsed.status().with_context("--interval");
  const Nanoseconds interval = *parsed;
  if (interval < std::chrono::milliseconds(50)) {
    return invalid_argument("--interval {}: refreshing more often than every 50ms costs the run "
                            "CPU for nothing a person can see",
                            flags.interval);
  }
  options.interval = std::chrono::duration_cast<std::chrono::milliseconds>(interval);
  options.color = flags.color == "always"  ? tui::ColorMode::kAlways
                  : flags.color == "never" ? tui::ColorMode::kNever
                                           : tui::ColorMode::kAuto;
  if (flags.ascii) options.charset = tui::Charset::kAscii;
  const std::optional<tui::View> view = tui::parse_view(flags.view);
  if (!view) {
    return invalid_argument("--view {}: expected overview, timeline, collectives, memory or "
                            "findings",
                            flags.view);
  }
  options.view = *view;
  if (flags.trace.empty()) {
    ASSIGN_OR_RETURN(options.trace,
                     most_recent_trace("name one (partrain top run.db) or start a run first, "
                                       "e.g. partrain launch -n 4 --workload gpt --steps 50"));
    log::info("showing {} (the most recent trace)", options.trace.string());
  } else {
    options.trace = flags.trace;
  }
  return options;
}

// The size of the terminal a `--once` frame is for: stdout's when it is one, else COLUMNS and
// LINES as a shell exports them, else 80x24.
tui::TerminalSize once_frame_size() {
  winsize size{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0 &&
      size.ws_row > 0) {
    return {size.ws_col, size.ws_row};
  }
  const auto from_env = [](std::string_view name, int fallback) {
    const StatusOr<std::optional<long long>> value = env::get_int(name);  // malformed: ignored
    return value.is_ok() && value->has_value() && **value > 0 && **value < 10'000
               ? static_cast<int>(**value)
               : fallback;
  };
  return {from_env("COLUMNS", tui::kMinWidth), from_env("LINES", tui::kMinHeight)};
}

int run_top(const TopFlags& flags) {
  StatusOr<tui::DashboardOptions> options = dashboard_options(flags);
  if (!options.is_ok()) return report_error(options.status());
  if (flags.json) {
    StatusOr<nlohmann::json> model = tui::view_model_once(*options);
    if (!model.is_ok()) return report_error(model.status());
    std::cout << dump_json(*model, 2) << '\n';
    std::cout.flush();
    return std::cout ? 0 : 1;
  }
  if (flags.once) {
    const bool color = tui::use_color(options->color, isatty(STDOUT_FILENO) != 0);
    const tui::TerminalSize size = once_frame_size();
    return print_report(tui::render_view_once(*options, size.width, size.height, color));
  }
  return tui::run_dashboard(*options);
}

constexpr const char* kTopFooter =
    "Shows a run's trace as a dashboard, refreshed every --interval while the run writes it "
    "(read-only: the run is never slowed), browsable once it has ended. The status line's "
    "tokens/s covers the latest 10 steps. Views: 1 overview (a row per rank: step, step time, "
    "tokens/s per GPU, how the last step split into compute, exposed communication and idle, "
    "memory by category, latest collective and how long it waited, the straggler; then step "
    "time and loss over the latest steps), 2 timeline (ranks x time), 3 collectives (recent "
    "matched ops: size, time, busbw, skew; communicators named tp 1, dp 0, ...), 4 memory (by "
    "category over time vs the estimate), 5 findings (as partrain analyze reports them).\n"
    "Keys: 1-5 or Tab/Shift-Tab views; Up/Down or j/k scroll; Left/Right or h/l pan the "
    "timeline (memory view: choose the rank); [ ] or - + zoom; f follow the newest data; p "
    "pause; / show only some ranks (0,2,4-7); ? help; q quit (the terminal is restored).\n"
    "Needs a terminal of at least 80x24; colour follows --color, and NO_COLOR and TERM=dumb when "
    "auto; block characters need a UTF-8 locale (else ASCII, or --ascii). Without DB, the most "
    "recently modified *.db in ./partrain-runs is shown (named on stderr). Details: "
    "docs/top.md.\n"
    "Examples:\n"
    "  partrain top                          # the latest run in ./partrain-runs\n"
    "  partrain top run.db --view timeline\n"
    "  partrain top run.db --once            # one overview frame on stdout\n"
    "  partrain top run.db --once --view findings\n"
    "  partrain top run.db --json | jq '.ranks[] | {rank, step_ms}'\n"
    "Exit codes: 0 quit with q (or --once/--json printed); 1 failure (also a trace its run is "
    "still creating after 3 s: the run is starting); 2 usage (bad flag, no "
    "trace found, no terminal, terminal smaller than 80x24); 3 unreadable trace (not a partrain "
    "trace, newer schema, corrupted); 130 Ctrl-C.";

}  // namespace

Subcommand add_top_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand("top", "Live terminal dashboard of a run (or browse a trace)");
  auto flags = std::make_shared<TopFlags>();
  cmd->add_option("trace", flags->trace,
                  "Trace file (default: the most recent *.db in ./partrain-runs)");
  cmd->add_option("--interval", flags->interval, "Refresh period: 500ms, 2s (bare numbers: seconds)")
      ->capture_default_str();
  cmd->add_flag("--once", flags->once,
                "Print one frame of --view on stdout and exit (the overview lists every rank; the "
                "other views fill the terminal, or COLUMNS x LINES, at least 80x24)");
  cmd->add_flag("--json", flags->json, "Print the view model as JSON on stdout and exit");
  cmd->add_option("--color", flags->color,
                  "Colour: auto (a terminal without NO_COLOR, TERM not dumb), always, never")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "always", "never"}));
  cmd->add_option("--view", flags->view,
                  "View to start in: overview, timeline, collectives, memory, findings")
      ->capture_default_str();
  cmd->add_flag("--ascii", flags->ascii, "Draw with ASCII characters only");
  cmd->footer(kTopFooter);
  return {cmd, [flags] { return run_top(*flags); }};
}

}  // namespace partrain::cli
