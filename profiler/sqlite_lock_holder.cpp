#include "profiler/sqlite_lock_holder.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fstream>
#include <sstream>

#include "core/log.h"

namespace partrain::profiler {
namespace {

// SQLite's WAL index: its lock bytes start at offset 120 of the -shm file, and the first of them
// is the write lock a transaction holds from its first write (or BEGIN IMMEDIATE) to its end.
constexpr long long kWalWriteLockByte = 120;

// A line of /proc/locks: "3: POSIX  ADVISORY  WRITE 22839 fe:00:10955461 120 120" (a waiter's
// line has "->" after the number, and an open-file-description lock a pid of -1).
struct LockLine {
  std::string kind, type;
  long long pid = 0;
  unsigned major = 0, minor = 0;
  unsigned long long inode = 0;
  long long start = 0;
  std::string end;
};

bool parse(const std::string& line, LockLine& out) {
  std::istringstream in(line);
  std::string number, mode, device;
  if (!(in >> number >> out.kind)) return false;
  if (out.kind == "->") return false;  // waiting for the lock, not holding it
  if (!(in >> mode >> out.type >> out.pid >> device >> out.start >> out.end)) return false;
  return std::sscanf(device.c_str(), "%x:%x:%llu", &out.major, &out.minor, &out.inode) == 3;
}

std::string process_name(long long pid) {
  std::ifstream comm(fmt::format("/proc/{}/comm", pid));
  std::string name;
  std::getline(comm, name);
  return name;
}

}  // namespace

std::string sqlite_write_lock_holder(const std::filesystem::path& database) {
  struct stat shm {};
  if (::stat((database.string() + "-shm").c_str(), &shm) != 0) return "";
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    LockLine lock;
    if (!parse(line, lock) || lock.type != "WRITE" || lock.inode != shm.st_ino ||
        lock.major != ::major(shm.st_dev) || lock.minor != ::minor(shm.st_dev)) {
      continue;
    }
    const bool to_end = lock.end == "EOF";
    if (lock.start > kWalWriteLockByte || (!to_end && std::stoll(lock.end) < kWalWriteLockByte)) {
      continue;
    }
    if (lock.pid <= 0) return "a process (an open-file-description lock, no pid)";
    const std::string name = process_name(lock.pid);
    return name.empty() ? fmt::format("pid {}", lock.pid)
                        : fmt::format("pid {} ({})", lock.pid, name);
  }
  return "";
}

}  // namespace partrain::profiler
