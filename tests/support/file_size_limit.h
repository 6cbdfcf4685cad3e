// A full disk without root: code run under RLIMIT_FSIZE (`ulimit -f`), SIGXFSZ ignored as
// partrain's own processes do, gets EFBIG past the limit where a full disk gives ENOSPC, and
// takes the same paths. The limit binds every file the process writes, so the code runs in a
// child whose stderr comes back through a pipe, which the limit does not bind.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace partrain::testing {

struct LimitedRun {
  int exit_code = -1;  // 128 + N for a signal
  std::string err;
};

// `body()` in a forked child whose files cannot grow past `bytes`; the child exits with what
// body returns.
template <typename Body>
LimitedRun run_with_file_size_limit(rlim_t bytes, Body body) {
  LimitedRun run;
  int err[2];
  if (::pipe(err) != 0) return run;
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(err[0]);
    ::dup2(err[1], STDERR_FILENO);
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{bytes, bytes};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(125);
    ::_exit(body());
  }
  ::close(err[1]);
  char buffer[4096];
  for (ssize_t n; (n = ::read(err[0], buffer, sizeof buffer)) != 0;) {
    if (n > 0) run.err.append(buffer, static_cast<size_t>(n));
    if (n < 0 && errno != EINTR) break;
  }
  ::close(err[0]);
  int status = 0;
  if (child > 0 && ::waitpid(child, &status, 0) == child) {
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return run;
}

}  // namespace partrain::testing
