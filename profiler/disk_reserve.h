// Space held back on a trace's filesystem so that a writer which finds the disk full can still
// record that it stopped: a file of `bytes` allocated up front beside the trace
// (`<trace>-reserve`), deleted to hand its space back at the moment it is needed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "core/status.h"

namespace partrain::profiler {

// The reserve file of `trace`; a writer that died leaves it, and whoever marks its trace
// incomplete removes it.
std::filesystem::path disk_reserve_path(const std::filesystem::path& trace);

// The space free to an unprivileged writer on the filesystem that holds (or will hold) `trace`;
// nullopt when it cannot be told (statvfs of its directory fails).
std::optional<uint64_t> free_bytes_beside(const std::filesystem::path& trace);

// Whether a trace can be started with `free_bytes` free on its filesystem: at least
// DiskReserve::kMinFreeBytes, enough for the least reserve and the trace's schema and first
// events, so that a disk that fills later still lets the writer close the trace (its status,
// the ranks' exits, the trace_stopped notice). Below it the error (kFailed) says how much is free
// and what to do.
Status check_room_for_trace(const std::filesystem::path& trace, uint64_t free_bytes);

class DiskReserve {
 public:
  DiskReserve() = default;
  // Allocates the file. On a filesystem with less room than `bytes` (a small tmpfs, a nearly
  // full disk) it holds a quarter of the free space instead, and at least kMinReserveBytes
  // (check_room_for_trace makes sure there is that and as much again, and the writer claims it
  // before it creates the trace); else nothing (held() false, logged at debug). A leftover
  // reserve of this user's is reused; a symbolic link, another user's file or anything else
  // at the name is refused (kInvalidArgument naming it), never written through.
  static StatusOr<DiskReserve> claim(const std::filesystem::path& trace, uint64_t bytes);
  // The writer keeps its write-ahead log, and each batch it commits, within a quarter of the
  // reserve (trace_writer.cpp), so that what the reserve frees at a full disk always covers
  // checkpointing the log into the file and recording the stop. 512 KiB: a log bound of 16
  // pages of 8 KiB, SQLite's own least sensible checkpoint; with 64 KiB (a 128 KiB log bound,
  // twice the reserve) 8 closes of 12 failed on a nearly full 2 MiB tmpfs.
  static constexpr uint64_t kMinReserveBytes = 512 << 10;
  // The least reserve and as much again for the trace (its schema alone is ~240 KiB).
  static constexpr uint64_t kMinFreeBytes = 2 * kMinReserveBytes;
  ~DiskReserve() { release(); }
  DiskReserve(DiskReserve&& other) noexcept;
  DiskReserve& operator=(DiskReserve&& other) noexcept;
  DiskReserve(const DiskReserve&) = delete;
  DiskReserve& operator=(const DiskReserve&) = delete;

  // Deletes the file, freeing its space; idempotent.
  void release();
  bool held() const { return !path_.empty(); }
  uint64_t bytes() const { return bytes_; }

 private:
  std::filesystem::path path_;
  uint64_t bytes_ = 0;
};

}  // namespace partrain::profiler
