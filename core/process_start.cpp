#include "core/process_start.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

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

}  // namespace partrain
