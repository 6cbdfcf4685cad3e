#include "profiler/disk_reserve.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "core/log.h"

namespace partrain::profiler {

std::filesystem::path disk_reserve_path(const std::filesystem::path& trace) {
  return std::filesystem::path(trace.string() + "-reserve");
}

DiskReserve DiskReserve::claim(const std::filesystem::path& trace, uint64_t bytes) {
  DiskReserve reserve;
  const std::filesystem::path path = disk_reserve_path(trace);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    log::debug("no disk reserve for {}: cannot create {}: {}", trace.string(), path.string(),
               strerror(errno));
    return reserve;
  }
  // posix_fallocate returns the error instead of setting errno; it writes zeros itself where
  // the filesystem has no fallocate, so the blocks are really taken either way.
  const int error = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  close(fd);
  if (error != 0) {
    log::debug("no disk reserve for {}: cannot allocate {} bytes: {}", trace.string(), bytes,
               strerror(error));
    ::unlink(path.c_str());
    return reserve;
  }
  reserve.path_ = path;
  reserve.bytes_ = bytes;
  return reserve;
}

DiskReserve::DiskReserve(DiskReserve&& other) noexcept
    : path_(std::exchange(other.path_, {})), bytes_(std::exchange(other.bytes_, 0)) {}

DiskReserve& DiskReserve::operator=(DiskReserve&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::exchange(other.path_, {});
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DiskReserve::release() {
  if (path_.empty()) return;
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
    log::debug("cannot remove the disk reserve {}: {}", path_.string(), strerror(errno));
  }
  path_.clear();
  bytes_ = 0;
}

}  // namespace partrain::profiler
