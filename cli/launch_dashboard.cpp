#include "cli/launch_dashboard.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/env.h"
#include "core/log.h"
#include "core/own_file.h"
#include "profiler/rank_tracer.h"
#include "runner/launch/launcher.h"
#include "runner/launch/output_relay.h"
#include "runner/launch/run_identity.h"
#include "runner/launch/signal_channel.h"
#include "runner/launch/trace_path.h"
#include "tui/dashboard.h"

namespace partrain::cli {
namespace {
namespace fs = std::filesystem;

constexpr int kMinColumns = 80;  // the dashboard's smallest screen (docs/top.md)
constexpr int kMinRows = 24;

Status check_terminal() {
  if (::isatty(STDOUT_FILENO) == 0 || ::isatty(STDIN_FILENO) == 0) {
    return invalid_argument("--tui needs a terminal on stdin and stdout; without one, trace the "
                            "run and watch it with `partrain top FILE` from a terminal");
  }
  winsize size{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0 &&
      (size.ws_col < kMinColumns || size.ws_row < kMinRows)) {
    return invalid_argument("--tui needs a terminal of at least {}x{}, this one is {}x{}: "
                            "enlarge it, or run without --tui and use `partrain top` later",
                            kMinColumns, kMinRows, size.ws_col, size.ws_row);
  }
  return Status::ok();
}

// The launcher's stderr sent to a file while the dashboard owns the terminal, and back after.
class StderrToFile {
 public:
  static StatusOr<StderrToFile> open(const fs::path& path) {
    // Beside the trace by default, in a directory others may write to: never through a link.
    ASSIGN_OR_RETURN(const int file, open_own_file(path, "the launcher's log"));
    if (::ftruncate(file, 0) != 0) {
      ::close(file);
      return failed("cannot empty {}: {}", path.string(), std::strerror(errno));
    }
    const int saved = ::dup(STDERR_FILENO);
    std::fflush(stderr);
    ::dup2(file, STDERR_FILENO);
    ::close(file);
    return StderrToFile(saved, path);
  }
  StderrToFile(StderrToFile&& other) noexcept : saved_(other.saved_), path_(other.path_) {
    other.saved_ = -1;
  }
  ~StderrToFile() { restore(); }

  // Restores the terminal's stderr and replays what the launcher said meanwhile.
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    saved_ = -1;
    std::ifstream said(path_);
    const std::string text((std::istreambuf_iterator<char>(said)), std::istreambuf_iterator<char>());
    std::fwrite(text.data(), 1, text.size(), stderr);
  }

 private:
  StderrToFile(int saved, fs::path path) : saved_(saved), path_(std::move(path)) {}
  int saved_;
  fs::path path_;
};

// The launcher reads its signals (launch/signal_channel.h) from a signalfd on its own thread;
// blocked here too, they reach it whichever thread the kernel picks (SIGWINCH stays the
// dashboard's).
void block_launcher_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : launch::kLauncherSignals) sigaddset(&set, signal);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// What the node's lowest rank printed, once the dashboard has given the terminal back: a
// built-in workload's rank 0 prints the run's summary, which `partrain launch` without --tui
// shows on stdout; a user's program gets its last lines, with where the rest is.
void print_rank_output(const fs::path& log_dir, bool built_in_workload) {
  std::error_code error;
  std::optional<std::pair<int, fs::path>> lowest;
  for (const fs::directory_entry& entry : fs::directory_iterator(log_dir, error)) {
    const std::string name = entry.path().filename().string();
    int rank = 0;
    if (std::sscanf(name.c_str(), "rank_%d.log", &rank) != 1) continue;
    if (!lowest || rank < lowest->first) lowest = std::pair(rank, entry.path());
  }
  if (!lowest) return;
  std::ifstream file(lowest->second);
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);) lines.push_back(std::move(line));
  if (lines.empty()) return;
  constexpr size_t kTailLines = 20;
  size_t first = 0;
  if (!built_in_workload && lines.size() > kTailLines) {
    first = lines.size() - kTailLines;
    std::printf("rank %d's last %zu lines (all %zu in %s):\n", lowest->first, kTailLines,
                lines.size(), lowest->second.c_str());
  }
  for (size_t i = first; i < lines.size(); ++i) std::printf("%s\n", lines[i].c_str());
  std::fflush(stdout);
}

bool runs_built_in_workload(const launch::LaunchConfig& config) {
  return std::any_of(config.extra_env.begin(), config.extra_env.end(), [](const std::string& v) {
    return v.starts_with("PARTRAIN_WORKLOAD_CONFIG=");
  });
}

}  // namespace

StatusOr<int> launch_with_dashboard(launch::LaunchConfig config) {
  // Node N's default trace name takes node 0's run id, which it learns only at the rendezvous:
  // the dashboard could not know the file to follow (a usage error, whatever the terminal).
  const int node_rank = config.node_rank.value_or(0);
  if (node_rank > 0 && config.trace && !config.run_id && !config.trace_file) {
    return invalid_argument("--tui on node {} follows this node's trace file, named after node "
                            "0's run id, which the rendezvous reveals only later: pass the same "
                            "--run-id to every node, or --trace FILE",
                            node_rank);
  }
  RETURN_IF_ERROR(check_terminal());
  if (!config.trace) {
    return invalid_argument("--tui shows the run's trace: drop --no-trace");
  }
  if (env::get(profiler::kCollectorEnv).has_value()) {
    return invalid_argument("under `partrain trace` the run records into the outer trace: watch "
                            "that file with `partrain top FILE` instead of --tui");
  }
  // The file the node's collector will write, decided by the launcher's own call, before the
  // launcher creates it: an existing file is refused here, before the dashboard starts.
  if (!config.run_id) {
    ASSIGN_OR_RETURN(std::string run_id, launch::new_run_id());
    config.run_id = run_id;
  }
  ASSIGN_OR_RETURN(const fs::path trace,
                   launch::decide_trace_path({config.trace_file, *config.run_id, node_rank}));
  fs::path side = trace;
  side.replace_extension();
  // The launcher's own log goes beside the ranks': one directory for the run, the trace's
  // <stem>.logs by default (already the run's own), else a new one under --log-dir.
  if (config.log_dir && config.log_dir_per_run) {
    ASSIGN_OR_RETURN(config.log_dir, launch::new_run_log_dir(*config.log_dir, *config.run_id));
  } else if (!config.log_dir) {
    config.log_dir = side.string() + ".logs";
  }
  config.log_dir_per_run = false;
  config.tee = false;
  std::error_code error;
  fs::create_directories(*config.log_dir, error);
  if (error) {
    return failed("cannot create the log directory {}: {}", *config.log_dir, error.message());
  }
  ASSIGN_OR_RETURN(StderrToFile launcher_log,
                   StderrToFile::open(fs::path(*config.log_dir) / "launcher.log"));

  block_launcher_signals();
  std::atomic<bool> run_over{false};
  std::shared_future<StatusOr<int>> run = std::async(std::launch::async, [&config, &run_over] {
    StatusOr<int> code = launch::launch(config);
    run_over = true;
    return code;
  }).share();
  tui::DashboardOptions dashboard;
  dashboard.trace = trace;
  dashboard.wait_for_trace = std::chrono::seconds(60);  // rendezvous, then the collector
  dashboard.handle_signals = false;
  // A run stopped by Ctrl-C ends the dashboard with it; one that ends by itself stays on screen
  // to be browsed until q.
  dashboard.stop_requested = [run, &run_over] {
    if (!run_over) return false;
    const StatusOr<int>& code = run.get();
    return !code.is_ok() || *code == 130 || *code == 143 || *code == 129;
  };
  const int dashboard_code = tui::run_dashboard(dashboard);
  const bool built_in = runs_built_in_workload(config);
  // As `partrain launch` prints them: the summary rank 0 printed, then the launcher's closing
  // lines (where the trace is). A run still going shows the launcher's lines as they come.
  const bool ended = run_over;
  if (ended) print_rank_output(*config.log_dir, built_in);
  launcher_log.restore();
  if (dashboard_code != 0) {
    log::warn("the dashboard ended with exit code {}; the run goes on", dashboard_code);
  } else if (!ended) {
    log::info("dashboard closed; the run goes on (Ctrl-C stops it)");
  }
  StatusOr<int> code = run.get();
  if (!ended) print_rank_output(*config.log_dir, built_in);
  log::info("rank output: {}/rank_<N>.log", *config.log_dir);
  return code;
}

}  // namespace partrain::cli
