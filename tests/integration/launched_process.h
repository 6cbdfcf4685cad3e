// One `partrain ...` (or shell) process for the launch tests, with both output streams collected
// while it runs and, on request, its own CPU time read from /proc as it goes.
#pragma once

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/subprocess.h"

extern char** environ;

namespace partrain::testing {

struct Finished {
  int exit_code = -1;
  std::string out;
  std::string err;
  double seconds = 0;
  double cpu_seconds = 0;  // the process's own user + system time, every thread, last seen
};

class LaunchedProcess {
 public:
  using Clock = std::chrono::steady_clock;

  // argv[0] is run as given; the test's environment plus extra_env.
  explicit LaunchedProcess(std::vector<std::string> argv, std::vector<std::string> extra_env = {}) {
    std::vector<std::string> env;
    for (char** var = environ; *var != nullptr; ++var) env.emplace_back(*var);
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    started_ = Clock::now();
    auto spawned = Subprocess::spawn({std::move(argv), env, true});
    if (!spawned.is_ok()) throw std::runtime_error(spawned.status().message());
    process_.emplace(std::move(spawned).value());
  }
  pid_t pid() const { return process_->pid(); }

  // Reads stdout until `text` has come, then closes it: its reader goes away, as `| head` does.
  void close_stdout_after(const std::string& text) {
    std::string out;
    const Clock::time_point give_up = Clock::now() + std::chrono::seconds(20);
    while (process_->stdout_fd() >= 0 && out.find(text) == std::string::npos &&
           Clock::now() < give_up) {
      pollfd fd{process_->stdout_fd(), POLLIN, 0};
      ::poll(&fd, 1, 100);
      read_into(out, process_->stdout_fd(), [&] { process_->close_stdout(); });
    }
    process_->close_stdout();
  }

  // Reads the output until stderr holds `text` (true) or `timeout` passes (false); what was read
  // is kept for finish().
  bool wait_for_stderr(const std::string& text, std::chrono::milliseconds timeout) {
    return wait_for(&Finished::err, text, timeout);
  }
  // The same for stdout (the ranks' own lines, "[rank N] ...").
  bool wait_for_stdout(const std::string& text, std::chrono::milliseconds timeout) {
    return wait_for(&Finished::out, text, timeout);
  }

  // Collects the output until both streams close and reaps the process; one still running after
  // `limit` is killed and the test fails.
  Finished finish(std::chrono::seconds limit = std::chrono::seconds(600)) {
    Finished result = std::move(collected_);
    while (process_->stdout_fd() >= 0 || process_->stderr_fd() >= 0) {
      read_some(result, 100);
      if (Clock::now() - started_ > limit) {
        (void)process_->signal_group(SIGKILL);
        ADD_FAILURE() << "the process did not finish within " << limit.count() << " s";
        break;
      }
    }
    result.exit_code = process_->wait().exit_code();
    result.seconds = std::chrono::duration<double>(Clock::now() - started_).count();
    return result;
  }

 private:
  bool wait_for(std::string Finished::*stream, const std::string& text,
                std::chrono::milliseconds timeout) {
    const Clock::time_point give_up = Clock::now() + timeout;
    while ((collected_.*stream).find(text) == std::string::npos) {
      if (Clock::now() >= give_up || (process_->stdout_fd() < 0 && process_->stderr_fd() < 0)) {
        return false;
      }
      read_some(collected_, 50);
    }
    return true;
  }

  // Waits up to timeout_ms for output and reads what came.
  void read_some(Finished& into, int timeout_ms) {
    std::vector<pollfd> fds;
    for (int fd : {process_->stdout_fd(), process_->stderr_fd()}) {
      if (fd >= 0) fds.push_back({fd, POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), timeout_ms);
    read_into(into.out, process_->stdout_fd(), [&] { process_->close_stdout(); });
    read_into(into.err, process_->stderr_fd(), [&] { process_->close_stderr(); });
    if (double cpu = cpu_seconds(); cpu >= 0) into.cpu_seconds = cpu;
  }

  // utime + stime of the process from /proc, or -1 once it is gone.
  double cpu_seconds() const {
    std::ifstream stat("/proc/" + std::to_string(process_->pid()) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t close = text.rfind(')');
    if (close == std::string::npos || close + 2 > text.size()) return -1;
    std::istringstream fields(text.substr(close + 2));
    std::string field;
    long long utime = 0;
    for (int i = 3; fields >> field; ++i) {
      if (i == 14) utime = std::stoll(field);
      if (i == 15) {
        return static_cast<double>(utime + std::stoll(field)) /
               static_cast<double>(::sysconf(_SC_CLK_TCK));
      }
    }
    return -1;
  }

  template <typename OnEof>
  static void read_into(std::string& text, int fd, OnEof on_eof) {
    if (fd < 0) return;
    char buffer[4096];
    while (true) {
      ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n > 0) {
        text.append(buffer, static_cast<size_t>(n));
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EINTR)) on_eof();
      return;
    }
  }

  Clock::time_point started_;
  std::optional<Subprocess> process_;
  Finished collected_;  // read by wait_for_stderr, not yet handed out
};

}  // namespace partrain::testing
