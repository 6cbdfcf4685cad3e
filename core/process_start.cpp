#include "core/process_start.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

namespace partrain {

void open_missing_standard_fds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0) continue;
    // open() takes the lowest free number, which is `fd`: the lower ones are open by now.
    const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) ::close(opened);
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
