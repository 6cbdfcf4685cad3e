// Who holds the write lock of a WAL-mode SQLite database, for messages that tell the user which
// process to end: the kernel's table of file locks (/proc/locks) lists the POSIX lock SQLite
// takes on the WAL's write-lock byte of the `-shm` file while a transaction writes.
#pragma once

#include <filesystem>
#include <string>

namespace partrain::profiler {

// "pid 1234 (sqlite3)", or "" when no process holds it or it cannot be told (no /proc/locks, no
// -shm file: not in WAL mode, or no connection open).
std::string sqlite_write_lock_holder(const std::filesystem::path& database);

}  // namespace partrain::profiler
