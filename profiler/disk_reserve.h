// Space held back on a trace's filesystem so that a writer which finds the disk full can still
// record that it stopped: a file of `bytes` allocated up front beside the trace
// (`<trace>-reserve`), deleted to hand its space back at the moment it is needed.
#pragma once

#include <cstdint>
#include <filesystem>

namespace partrain::profiler {

// The reserve file of `trace`; a writer that died leaves it, and whoever marks its trace
// incomplete removes it.
std::filesystem::path disk_reserve_path(const std::filesystem::path& trace);

class DiskReserve {
 public:
  DiskReserve() = default;
  // Allocates the file. On a filesystem with less room than `bytes` (a small tmpfs, a nearly
  // full disk) it holds a quarter of the free space instead, when that is at least
  // kMinReserveBytes; else nothing (held() false, logged at debug), which only means a full disk
  // will leave no room for the stop notice.
  static DiskReserve claim(const std::filesystem::path& trace, uint64_t bytes);
  static constexpr uint64_t kMinReserveBytes = 64 << 10;
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
