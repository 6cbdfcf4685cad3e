#include "core/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <utility>

#include "core/process_start.h"

extern char** environ;

namespace partrain {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int UniqueFd::release() { return std::exchange(fd_, -1); }

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

namespace {

struct Pipe {
  UniqueFd read_end;
  UniqueFd write_end;
};

StatusOr<Pipe> make_pipe() {
  int fds[2];
  // Both ends close-on-exec so no other child inherits them; dup2 in the child clears the flag on
  // the copy that becomes its stdout/stderr.
  if (::pipe2(fds, O_CLOEXEC) != 0) return failed("cannot create a pipe: {}", strerror(errno));
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// Everything the child needs, built before fork: after fork only async-signal-safe calls are
// allowed (the launcher may already run threads), so no allocation happens in the child.
struct ExecImage {
  std::vector<std::string> storage;
  std::vector<char*> argv;
  std::vector<char*> envp;

  explicit ExecImage(const SpawnOptions& options) {
    storage.reserve(options.argv.size() + options.env.size());
    for (const auto& arg : options.argv) storage.push_back(arg);
    for (const auto& var : options.env) storage.push_back(var);
    for (size_t i = 0; i < options.argv.size(); ++i) argv.push_back(storage[i].data());
    argv.push_back(nullptr);
    for (size_t i = options.argv.size(); i < storage.size(); ++i) envp.push_back(storage[i].data());
    envp.push_back(nullptr);
  }
};

void write_errno_and_exit(int fd, int error) {
  ssize_t ignored = ::write(fd, &error, sizeof error);
  (void)ignored;
  ::_exit(127);
}

// Runs in the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void become_worker(ExecImage& image, pid_t parent, int out_fd, int err_fd,
                                int exec_error_fd) {
  ::setpgid(0, 0);  // own group: the launcher signals it as a whole, the terminal's ^C does not
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) write_errno_and_exit(exec_error_fd, errno);
  // The parent may have died before prctl took effect; then nobody would ever kill us.
  if (::getppid() != parent) ::_exit(127);

  // The launcher blocks SIGINT/SIGTERM/SIGCHLD for its signalfd, and masks are inherited across
  // exec: give the worker the ordinary defaults (SIGXFSZ too, which partrain ignores:
  // core/process_start.h).
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD, SIGQUIT, SIGUSR1, SIGUSR2, SIGXFSZ})
    ::signal(sig, SIG_DFL);
  restore_open_files_limit();  // the soft limit partrain was started with (core/process_start.h)
  close_standard_fds_closed_at_start();  // as it would have them without partrain

  if (out_fd >= 0 && ::dup2(out_fd, STDOUT_FILENO) < 0) write_errno_and_exit(exec_error_fd, errno);
  if (err_fd >= 0 && ::dup2(err_fd, STDERR_FILENO) < 0) write_errno_and_exit(exec_error_fd, errno);

  // execvp searches the PATH of the current environment: make that the worker's environment.
  environ = image.envp.data();
  ::execvp(image.argv[0], image.argv.data());
  write_errno_and_exit(exec_error_fd, errno);
  ::_exit(127);
}

std::optional<std::string> path_variable(const std::vector<std::string>& env) {
  for (const auto& var : env) {
    if (var.rfind("PATH=", 0) == 0) return var.substr(5);
  }
  return std::nullopt;
}

// PATH as a message shows it.
std::string path_of(const std::vector<std::string>& env) {
  return path_variable(env).value_or("(unset)");
}

// The PATH execvp searches: the environment's, or glibc's default when it has none.
std::string search_path(const std::vector<std::string>& env) {
  return path_variable(env).value_or("/bin:/usr/bin");
}

// Why `program` could not be exec'd, as a user reads it: not found (naming PATH when it was
// searched), a directory, or not executable.
Status exec_failure(const std::string& program, int error, const std::vector<std::string>& env) {
  const bool has_slash = program.find('/') != std::string::npos;
  if (error == ENOENT) {
    return make_status(
        StatusCode::kNotFound,
        "command not found: '{}' ({}); pass a program that exists, e.g. "
        "`-- python3 train.py`",
        program,
        has_slash ? std::string("no such file") : fmt::format("searched PATH={}", path_of(env)));
  }
  std::error_code ec;
  if (error == EACCES && has_slash && std::filesystem::is_directory(program, ec)) {
    return make_status(StatusCode::kNotExecutable,
                       "cannot run '{}': it is a directory; name the program in it, e.g. "
                       "`-- {}/train.sh`",
                       program, program);
  }
  if (error == EACCES) {
    // The interpreter the file's name suggests: a Python script is not a shell script.
    const std::string_view name(program);
    const char* interpreter = name.ends_with(".py") ? "python3" : "sh";
    return make_status(StatusCode::kNotExecutable,
                       "cannot run '{}': permission denied; make it executable (chmod +x) or "
                       "name its interpreter, e.g. `-- {} {}`",
                       program, interpreter, program);
  }
  return failed("cannot run '{}': {}", program, strerror(error));
}

}  // namespace

int find_executable(const std::string& program, std::string_view path) {
  auto runnable = [](const std::string& file) {
    struct stat info {};
    if (::stat(file.c_str(), &info) != 0) return ENOENT;
    return S_ISREG(info.st_mode) && ::access(file.c_str(), X_OK) == 0 ? 0 : EACCES;
  };
  if (program.find('/') != std::string::npos) return runnable(program);
  int error = ENOENT;
  while (true) {
    const size_t colon = path.find(':');
    const std::string_view dir = path.substr(0, colon);
    const std::string candidate =
        (dir.empty() ? std::string(".") : std::string(dir)) + "/" + program;
    struct stat info {};
    const bool is_directory = ::stat(candidate.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
    const int found = runnable(candidate);
    if (found == 0) return 0;
    if (found == EACCES && !is_directory) error = EACCES;  // execvp skips a directory
    if (colon == std::string_view::npos) return error;
    path.remove_prefix(colon + 1);
  }
}

StatusOr<Subprocess> Subprocess::spawn(const SpawnOptions& options) {
  if (options.argv.empty() || options.argv[0].empty()) {
    return invalid_argument("no command to run");
  }
  std::optional<Pipe> out;
  std::optional<Pipe> err;
  if (options.capture_output) {
    ASSIGN_OR_RETURN(out, make_pipe());
    ASSIGN_OR_RETURN(err, make_pipe());
  }
  ASSIGN_OR_RETURN(Pipe exec_error, make_pipe());
  ExecImage image(options);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) return failed("cannot fork to run '{}': {}", options.argv[0], strerror(errno));
  if (pid == 0) {
    become_worker(image, parent, out ? out->write_end.get() : -1, err ? err->write_end.get() : -1,
                  exec_error.write_end.get());
  }
  // Also set the group from the parent: whichever runs first, the group exists before we signal it.
  ::setpgid(pid, pid);
  exec_error.write_end.reset();
  UniqueFd out_read;
  UniqueFd err_read;
  if (out) {
    out->write_end.reset();
    err->write_end.reset();
    set_nonblocking(out->read_end.get());
    set_nonblocking(err->read_end.get());
    out_read = std::move(out->read_end);
    err_read = std::move(err->read_end);
  }
  Subprocess child(pid, std::move(out_read), std::move(err_read));

  // The close-on-exec pipe reads EOF when exec succeeded, or the child's errno when it did not.
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_error.read_end.get(), &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return child;

  child.wait();
  return exec_failure(options.argv[0], child_errno, options.env);
}

Status Subprocess::check_runnable(const std::string& program, const std::vector<std::string>& env) {
  if (program.empty()) return invalid_argument("no command given");
  const int error = find_executable(program, search_path(env));
  return error == 0 ? Status::ok() : exec_failure(program, error, env);
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      stdout_(std::move(other.stdout_)),
      stderr_(std::move(other.stderr_)),
      exit_(std::exchange(other.exit_, std::nullopt)) {}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    kill_and_reap();
    pid_ = std::exchange(other.pid_, -1);
    stdout_ = std::move(other.stdout_);
    stderr_ = std::move(other.stderr_);
    exit_ = std::exchange(other.exit_, std::nullopt);
  }
  return *this;
}

Subprocess::~Subprocess() { kill_and_reap(); }

void Subprocess::kill_and_reap() {
  if (pid_ <= 0) return;
  if (!exit_) {
    (void)signal_group(SIGKILL);
    wait();
  }
  // Grandchildren left in the group would outlive the run.
  (void)signal_group(SIGKILL);
  pid_ = -1;
}

Status Subprocess::signal_group(int signal) const {
  if (pid_ <= 0) return Status::ok();
  if (::kill(-pid_, signal) != 0 && errno != ESRCH) {
    return failed("cannot send {} to process group {}: {}", signal_name(signal), pid_,
                  strerror(errno));
  }
  return Status::ok();
}

namespace {
ExitStatus decode(int raw) {
  if (WIFSIGNALED(raw)) return ExitStatus{true, WTERMSIG(raw)};
  return ExitStatus{false, WEXITSTATUS(raw)};
}
}  // namespace

std::optional<ExitStatus> Subprocess::try_reap() {
  if (exit_ || pid_ <= 0) return exit_;
  int raw = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &raw, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) exit_ = decode(raw);
  return exit_;
}

ExitStatus Subprocess::wait() {
  if (exit_ || pid_ <= 0) return exit_.value_or(ExitStatus{});
  int raw = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &raw, 0);
  } while (r < 0 && errno == EINTR);
  exit_ = (r == pid_) ? decode(raw) : ExitStatus{};
  return *exit_;
}

std::string signal_name(int signal) {
  if (const char* abbrev = ::sigabbrev_np(signal)) return std::string("SIG") + abbrev;
  return fmt::format("SIG{}", signal);
}

std::string describe_exit(const ExitStatus& status) {
  if (status.signaled) return fmt::format("signal {} ({})", status.value, signal_name(status.value));
  return fmt::format("exit code {}", status.value);
}

}  // namespace partrain
