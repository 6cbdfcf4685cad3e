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

constexpr int32_t kDone = 0;
constexpr size_t kMaxGroups = 4096;  // workers per node; more are not watched

void sleep_ms(int ms) {
  timespec pause{ms / 1000, (ms % 1000) * 1'000'000L};
  while (::nanosleep(&pause, &pause) != 0 && errno == EINTR) {
  }
}

// Whether any process is left in the group.
bool group_alive(pid_t group) { return ::kill(-group, 0) == 0 || errno == EPERM; }

// The helper, between fork and _exit: the launcher may have threads, so only async-signal-safe
// calls and no allocation.
[[noreturn]] void guard_main(int read_fd) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT}) ::signal(sig, SIG_IGN);
  // Nothing of the launcher's is held open: a trace's lock, its stdout, sockets.
  for (int fd = 0; fd < 1024; ++fd) {
    if (fd != read_fd) ::close(fd);
  }
  ::syscall(SYS_close_range, 1024u, ~0u, 0u);  // the rest, where the kernel has close_range

  pid_t groups[kMaxGroups];  // 16 KiB of the forking thread's stack: no allocation after fork
  size_t count = 0;
  bool done = false;
  char buffer[4 * 64];
  size_t have = 0;
  while (true) {
    const ssize_t n = ::read(read_fd, buffer + have, sizeof buffer - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    have += static_cast<size_t>(n);
    size_t used = 0;
    for (; have - used >= sizeof(int32_t); used += sizeof(int32_t)) {
      int32_t value;
      std::memcpy(&value, buffer + used, sizeof value);
      if (value == kDone) {
        done = true;
      } else if (count < kMaxGroups) {
        groups[count++] = value;
      }
    }
    std::memmove(buffer, buffer + used, have - used);
    have -= used;
  }
  if (done) ::_exit(0);
  for (size_t i = 0; i < count; ++i) ::kill(-groups[i], SIGTERM);
  for (int waited = 0; waited < OrphanGuard::kGraceMs; waited += 50) {
    bool any = false;
    for (size_t i = 0; i < count && !any; ++i) any = group_alive(groups[i]);
    if (!any) ::_exit(0);
    sleep_ms(50);
  }
  for (size_t i = 0; i < count; ++i) ::kill(-groups[i], SIGKILL);
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

void OrphanGuard::watch(pid_t group) {
  if (!write_end_.valid() || group <= 0) return;
  const int32_t value = group;
  // A pipe write of 4 bytes is atomic; a guard that is gone (EPIPE) protects nothing more.
  (void)!::write(write_end_.get(), &value, sizeof value);
}

void OrphanGuard::dismiss() {
  if (pid_ <= 0) return;
  const int32_t done = kDone;
  (void)!::write(write_end_.get(), &done, sizeof done);
  write_end_.reset();
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

}  // namespace partrain::launch
