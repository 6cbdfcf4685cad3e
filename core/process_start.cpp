#include "core/process_start.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

namespace partrain {

namespace {
// Which of descriptors 0, 1 and 2 were closed when the process started (bit fd); written once in
// main before any thread starts, read in forked children.
int g_closed_at_start = 0;
}  // namespace

void open_missing_standard_fds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0) continue;
    g_closed_at_start |= 1 << fd;
    // open() takes the lowest free number, which is `fd`: the lower ones are open by now. Opened
    // the other way round, so that a read or write fails with EBADF as on the closed descriptor.
    const int opened = ::open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
    if (opened >= 0 && opened != fd) ::close(opened);
  }
}

bool was_closed_at_start(int fd) { return fd >= 0 && fd <= 2 && (g_closed_at_start >> fd) & 1; }

void discard_output_to_closed_standard_fds() {
  for (int fd = 1; fd <= 2; ++fd) {
    if (!was_closed_at_start(fd)) continue;
    const int sink = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (sink < 0) continue;
    (void)::dup2(sink, fd);
    ::close(sink);
  }
}

void close_standard_fds_closed_at_start() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (was_closed_at_start(fd)) ::close(fd);
  }
}

void ignore_file_size_signal() { ::signal(SIGXFSZ, SIG_IGN); }

namespace {
// The soft limit the process started with, where raise_open_files_limit raised it; written once
// before any thread starts, read in forked children.
rlimit g_started_open_files{RLIM_INFINITY, RLIM_INFINITY};
bool g_open_files_raised = false;
}  // namespace

void raise_open_files_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  // RLIM_INFINITY is the largest rlim_t: an unlimited hard limit gives kMaxOpenFiles.
  const rlim_t wanted = std::min<rlim_t>(limit.rlim_max, kMaxOpenFiles);
  if (limit.rlim_cur >= wanted) return;
  const rlimit raised{wanted, limit.rlim_max};
  if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) return;
  g_started_open_files = limit;
  g_open_files_raised = true;
}

void restore_open_files_limit() {
  if (g_open_files_raised) (void)::setrlimit(RLIMIT_NOFILE, &g_started_open_files);
}

}  // namespace partrain
