#include "profiler/disk_reserve.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/byte_size.h"
#include "core/log.h"
#include "core/own_file.h"

namespace partrain::profiler {

std::filesystem::path disk_reserve_path(const std::filesystem::path& trace) {
  return std::filesystem::path(trace.string() + "-reserve");
}

std::optional<uint64_t> free_bytes_beside(const std::filesystem::path& trace) {
  std::filesystem::path dir = trace.parent_path();
  if (dir.empty()) dir = ".";
  struct statvfs fs {};
  if (statvfs(dir.c_str(), &fs) != 0) return std::nullopt;
  return uint64_t{fs.f_bavail} * uint64_t{fs.f_frsize};
}

Status check_room_for_trace(const std::filesystem::path& trace, uint64_t free_bytes) {
  if (free_bytes >= DiskReserve::kMinFreeBytes) return Status::ok();
  return failed(
      "the filesystem of {} has {} free, and a trace needs at least {} to be closed "
      "properly when the disk fills up (its status, the ranks' exits, the notice that "
      "tracing stopped): free some space, trace into a file on another filesystem "
      "(--trace FILE), or run without a trace (--no-trace)",
      trace.string(), format_bytes(free_bytes), format_bytes(DiskReserve::kMinFreeBytes));
}

StatusOr<DiskReserve> DiskReserve::claim(const std::filesystem::path& trace, uint64_t bytes) {
  DiskReserve reserve;
  const std::filesystem::path path = disk_reserve_path(trace);
  // Beside the trace, in a directory others may write to: never through a link planted there.
  StatusOr<int> opened = open_own_file(path, "the trace's disk reserve");
  if (!opened.is_ok()) {
    if (opened.status().code() == StatusCode::kInvalidArgument) return opened.status();
    log::debug("no disk reserve for {}: {}", trace.string(), opened.status().message());
    return reserve;
  }
  const int fd = *opened;
  (void)ftruncate(fd, 0);  // a leftover reserve of ours, of another size
  // posix_fallocate returns the error instead of setting errno; it writes zeros itself where
  // the filesystem has no fallocate, so the blocks are really taken either way.
  int error = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (error == ENOSPC || error == EFBIG) {
    // A disk smaller than the reserve still gets one, in proportion: the writer keeps its
    // write-ahead log within it, so that a full disk can always be checkpointed and marked.
    (void)ftruncate(fd, 0);  // what the failed call allocated counts as free again
    struct statvfs fs {};
    const uint64_t free_bytes =
        fstatvfs(fd, &fs) == 0 ? uint64_t{fs.f_bavail} * uint64_t{fs.f_frsize} : 0;
    constexpr uint64_t kStep = 64 << 10;
    const uint64_t smaller =
        std::min(bytes, std::max(kMinReserveBytes, (free_bytes / 4) & ~(kStep - 1)));
    if (smaller < bytes && smaller <= free_bytes) {
      log::debug("{}: {} bytes free, a disk reserve of {} bytes instead of {}", trace.string(),
                 free_bytes, smaller, bytes);
      bytes = smaller;
      error = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    }
  }
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
