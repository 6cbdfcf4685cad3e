#include "core/own_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace partrain {

namespace {

Status refuse(const std::filesystem::path& path, std::string_view what, std::string_view why) {
  return invalid_argument(
      "{} {} is {}: partrain does not write through it (another user may have put it there); "
      "remove it, or use a directory only you can write to",
      what, path.string(), why);
}

}  // namespace

StatusOr<int> open_own_file(const std::filesystem::path& path, std::string_view what) {
  // O_NONBLOCK: a FIFO at the name must not block the open; it is refused below.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int error = errno;
    if (error == ELOOP) return refuse(path, what, "a symbolic link");
    return failed("cannot create {} {}: {}", what, path.string(), std::strerror(error));
  }
  struct stat info {};
  std::string_view why;
  if (::fstat(fd, &info) != 0) {
    why = "unreadable";
  } else if (!S_ISREG(info.st_mode)) {
    why = "not a regular file";
  } else if (info.st_uid != ::geteuid()) {
    why = "another user's file";
  } else if (info.st_nlink != 1) {
    why = "a file with other hard links";
  }
  if (!why.empty()) {
    ::close(fd);
    return refuse(path, what, why);
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

StatusOr<UniqueFile> create_unique_file(const std::filesystem::path& dir, std::string_view prefix) {
  static constexpr std::string_view kLetters =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::random_device seed;
  std::mt19937_64 random(seed());
  std::uniform_int_distribution<size_t> pick(0, kLetters.size() - 1);
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name(prefix);
    for (int i = 0; i < 10; ++i) name += kLetters[pick(random)];
    UniqueFile file{-1, dir / name};
    file.fd = ::open(file.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (file.fd >= 0) return file;
    if (errno != EEXIST) {
      return failed("cannot create a file in {}: {}", dir.empty() ? "." : dir.string(),
                    std::strerror(errno));
    }
  }
  return failed("cannot create a file in {}: every name tried was taken", dir.string());
}

}  // namespace partrain
