#include "runner/launch/orphan_guard.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

namespace partrain::launch {
namespace {

// What the launcher writes to the guard: one record per write, under PIPE_BUF, so atomic.
struct GuardRecord {
  int32_t kind;
  int32_t pid;
  uint64_t start_ticks;  // kProcess: the process's start time, which a reused pid does not have
};
constexpr int32_t kDone = 0;
constexpr int32_t kGroup = 1;
constexpr int32_t kProcess = 2;
constexpr size_t kMaxWatched = 4096;  // groups and processes per node; more are not watched

void sleep_ms(int ms) {
  timespec pause{ms / 1000, (ms % 1000) * 1'000'000L};
  while (::nanosleep(&pause, &pause) != 0 && errno == EINTR) {
  }
}

// Whether any process is left in the group.
bool group_alive(pid_t group) { return ::kill(-group, 0) == 0 || errno == EPERM; }

// Whether the watched process is still the one that was watched.
bool same_process(const GuardRecord& watched) {
  const std::optional<uint64_t> start = process_start_ticks(watched.pid);
  return start && *start == watched.start_ticks;
}

// What the guard kills: a group, or a process and (`leads_group`) the group it led when the
// guard took it on (a torchrun worker's: start_new_session, with its DataLoader workers). A pid
// is not reused while a group of that id has members, so the group stays its.
struct Target {
  GuardRecord record;
  bool leads_group = false;
};

void take_on(Target& target) {
  const GuardRecord& watched = target.record;
  target.leads_group =
      watched.kind == kGroup || (same_process(watched) && ::getpgid(watched.pid) == watched.pid);
}

void signal_target(const Target& target, int sig) {
  if (target.leads_group) (void)::kill(-target.record.pid, sig);
  if (target.record.kind == kProcess && same_process(target.record)) {
    (void)::kill(target.record.pid, sig);
  }
}

bool target_alive(const Target& target) {
  if (target.leads_group && group_alive(target.record.pid)) return true;
  return target.record.kind == kProcess && same_process(target.record);
}

// The helper, between fork and _exit: the launcher may have threads, so only async-signal-safe
// calls and no allocation.
[[noreturn]] void guard_main(int read_fd) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT}) ::signal(sig, SIG_IGN);
  // Nothing of the launcher's is held open: a trace's lock, its stdout, sockets.
  for (int fd = 0; fd < 1024; ++fd) {
    if (fd != read_fd) ::close(fd);
  }
  ::syscall(SYS_close_range, 1024u, ~0u, 0u);  // the rest, where the kernel has close_range

  // 96 KiB of the forking thread's stack: no allocation after fork.
  Target watched[kMaxWatched];
  size_t count = 0;
  bool done = false;
  char buffer[16 * sizeof(GuardRecord)];
  size_t have = 0;
  while (true) {
    const ssize_t n = ::read(read_fd, buffer + have, sizeof buffer - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    have += static_cast<size_t>(n);
    size_t used = 0;
    for (; have - used >= sizeof(GuardRecord); used += sizeof(GuardRecord)) {
      GuardRecord record;
      std::memcpy(&record, buffer + used, sizeof record);
      if (record.kind == kDone) {
        done = true;
      } else if (count < kMaxWatched) {
        watched[count++].record = record;
      }
    }
    std::memmove(buffer, buffer + used, have - used);
    have -= used;
  }
  if (done) ::_exit(0);
  for (size_t i = 0; i < count; ++i) take_on(watched[i]);
  for (size_t i = 0; i < count; ++i) signal_target(watched[i], SIGTERM);
  for (int waited = 0; waited < OrphanGuard::kGraceMs; waited += 50) {
    bool any = false;
    for (size_t i = 0; i < count && !any; ++i) any = target_alive(watched[i]);
    if (!any) ::_exit(0);
    sleep_ms(50);
  }
  for (size_t i = 0; i < count; ++i) signal_target(watched[i], SIGKILL);
  ::_exit(0);
}

}  // namespace

StatusOr<OrphanGuard> OrphanGuard::start() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return failed("cannot make the orphan guard's pipe: {}", std::strerror(errno));
  }
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  const pid_t pid = ::fork();
  if (pid < 0) return failed("cannot fork the orphan guard: {}", std::strerror(errno));
  if (pid == 0) guard_main(read_end.get());
  return OrphanGuard(pid, std::move(write_end));
}

OrphanGuard::OrphanGuard(OrphanGuard&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), write_end_(std::move(other.write_end_)) {}

void OrphanGuard::send(int32_t kind, pid_t pid, uint64_t start_ticks) {
  const GuardRecord record{kind, static_cast<int32_t>(pid), start_ticks};
  std::lock_guard lock(*write_mutex_);
  if (!write_end_.valid()) return;
  // A pipe write under PIPE_BUF is atomic; a guard that is gone (EPIPE) protects nothing more.
  (void)!::write(write_end_.get(), &record, sizeof record);
}

void OrphanGuard::watch(pid_t group) {
  if (group > 0) send(kGroup, group, 0);
}

void OrphanGuard::watch_process(pid_t pid) {
  if (pid <= 0 || pid == ::getpid()) return;
  if (const std::optional<uint64_t> start = process_start_ticks(pid)) send(kProcess, pid, *start);
}

void OrphanGuard::dismiss() {
  if (pid_ <= 0) return;
  send(kDone, 0, 0);
  {
    std::lock_guard lock(*write_mutex_);
    write_end_.reset();
  }
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

std::optional<uint64_t> process_start_ticks(pid_t pid) {
  char path[40];
  char* end = path + sizeof path;
  // "/proc/<pid>/stat" without snprintf's locale machinery.
  char digits[16];
  int n = 0;
  for (auto value = static_cast<uint32_t>(pid); n == 0 || value > 0; value /= 10) {
    digits[n++] = static_cast<char>('0' + value % 10);
  }
  char* out = path;
  for (const char* part = "/proc/"; *part != '\0';) *out++ = *part++;
  while (n > 0) *out++ = digits[--n];
  for (const char* part = "/stat"; *part != '\0' && out < end - 1;) *out++ = *part++;
  *out = '\0';
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char stat[1024];
  ssize_t size = 0;
  while (true) {
    size = ::read(fd, stat, sizeof stat - 1);
    if (size >= 0 || errno != EINTR) break;
  }
  ::close(fd);
  if (size <= 0) return std::nullopt;
  // The command name (field 2) may hold spaces and parentheses: fields are counted from the
  // last ')'. starttime is field 22, the 20th after it.
  const char* field = nullptr;
  for (ssize_t i = size - 1; i >= 0; --i) {
    if (stat[i] == ')') {
      field = stat + i + 1;
      break;
    }
  }
  if (field == nullptr) return std::nullopt;
  const char* stop = stat + size;
  for (int spaces = 0; field < stop && spaces < 20; ++field) {
    if (*field == ' ') ++spaces;
  }
  uint64_t ticks = 0;
  bool any = false;
  for (; field < stop && *field >= '0' && *field <= '9'; ++field) {
    ticks = ticks * 10 + static_cast<uint64_t>(*field - '0');
    any = true;
  }
  if (!any) return std::nullopt;
  return ticks;
}

}  // namespace partrain::launch
