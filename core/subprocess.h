// Child processes the launcher can always clean up: each child leads its own process group, dies
// with its parent (PR_SET_PDEATHSIG), gets an explicit environment, and reports exec failures
// ("command not found") back to the parent as a Status instead of a mystery exit code.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace partrain {

// An owned file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// How a child ended, as waitpid reports it.
struct ExitStatus {
  bool signaled = false;  // killed by a signal (then `value` is the signal number)
  int value = 0;          // exit code, or signal number when signaled

  bool success() const { return !signaled && value == 0; }
  // The shell's convention: the exit code, or 128 + signal.
  int exit_code() const { return signaled ? 128 + value : value; }
};

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is looked up in the PATH of `env` (as execvp does)
  std::vector<std::string> env;   // the child's whole environment, "NAME=value"
  bool capture_output = true;     // stdout/stderr as pipes; otherwise inherited
};

// As execvp looks for `program`: itself when it names a path, else the first executable regular
// file of that name along `path` (a PATH value; empty: the current directory). 0 when found,
// ENOENT when nothing is there, EACCES when only what cannot be run was found (a directory named
// as the program, a file without execute permission). `partrain launch`/`trace` check a command
// with it before they start; the injection library's exec wrappers, whether an exec may succeed.
int find_executable(const std::string& program, std::string_view path);

class Subprocess {
 public:
  // Starts the child. Errors: kNotFound when the command does not exist (naming it and PATH),
  // kFailed for other exec failures (permission denied, ...) or when fork fails.
  static StatusOr<Subprocess> spawn(const SpawnOptions& options);
  // Whether `program` would be found and exec'd with `env`'s PATH (find_executable): the same
  // errors as spawn's, before anything (a trace file) is made for a run that cannot start.
  static Status check_runnable(const std::string& program, const std::vector<std::string>& env);

  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  // A child still running is killed (its whole group) and reaped: never a zombie or an orphan.
  ~Subprocess();

  pid_t pid() const { return pid_; }  // also its process group id
  // Non-blocking, close-on-exec read ends; -1 when not captured or after close_*().
  int stdout_fd() const { return stdout_.get(); }
  int stderr_fd() const { return stderr_.get(); }
  void close_stdout() { stdout_.reset(); }
  void close_stderr() { stderr_.reset(); }

  // Sends `signal` to the child's whole process group (grandchildren included). A group that is
  // already gone is not an error.
  Status signal_group(int signal) const;
  // Reaps the child if it has exited; nullopt while it runs. Idempotent once reaped.
  std::optional<ExitStatus> try_reap();
  // Blocks until the child exits.
  ExitStatus wait();
  bool reaped() const { return exit_.has_value(); }
  const std::optional<ExitStatus>& exit_status() const { return exit_; }

 private:
  Subprocess(pid_t pid, UniqueFd out, UniqueFd err) : pid_(pid), stdout_(std::move(out)), stderr_(std::move(err)) {}
  void kill_and_reap();

  pid_t pid_ = -1;
  UniqueFd stdout_;
  UniqueFd stderr_;
  std::optional<ExitStatus> exit_;
};

// "SIGKILL" for 9; "SIG42" for numbers without a name.
std::string signal_name(int signal);
// "signal 9 (SIGKILL)" or "exit code 3": how summaries describe an ExitStatus.
std::string describe_exit(const ExitStatus& status);

}  // namespace partrain
