#include "core/fd_above_stdio.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace partrain {

int fd_above_stdio(int fd) {
  if (fd < 0 || fd > STDERR_FILENO) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  const int error = errno;
  ::close(fd);
  errno = error;
  return moved;
}

}  // namespace partrain
