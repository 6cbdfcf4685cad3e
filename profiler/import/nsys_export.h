// One `nsys export --type sqlite` file opened for reading: its export schema version checked
// against those partrain knows (META_DATA_EXPORT), its session's start on the Unix clock
// (TARGET_INFO_SESSION_START_TIME: rows' start/end are nanoseconds from it), which of the lazily
// created tables and columns it has, and the id layout nsys uses (globalTid: pid in bits 24-47,
// tid in bits 0-23, the host above; globalPid has no tid bits).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/status.h"
#include "profiler/sqlite_db.h"

namespace partrain::profiler {

// The export schema versions read: 3.16 (nsys 2024.6) to 3.28 (nsys 2026.4), whose tables and
// columns NVIDIA's SQLite schema reference documents.
inline constexpr int kNsysSchemaMajor = 3;
inline constexpr int kNsysSchemaMinorFirst = 16;
inline constexpr int kNsysSchemaMinorLast = 28;

struct NsysExport {
  std::filesystem::path path;
  SqliteDb db;
  std::string schema_version;   // "3.16.1"
  std::string product_version;  // "2024.6.2.225", "" when not recorded
  int64_t session_start_unix_ns = 0;

  bool has_table(std::string_view table) const { return db.has_table("main", table); }
  bool has_column(std::string_view table, std::string_view column) const;
};

// A process as nsys keys it: the global id without its thread bits (host and pid).
inline int64_t nsys_process_of(int64_t global_id) { return global_id >> 24; }
inline int64_t nsys_pid_of(int64_t global_id) { return (global_id >> 24) & 0xFFFFFF; }
inline int64_t nsys_tid_of(int64_t global_tid) { return global_tid & 0xFFFFFF; }

// kUnreadable naming the file: not SQLite, SQLite but no nsys export (no META_DATA_EXPORT), an
// export schema version outside those known (named), no session start time.
StatusOr<NsysExport> open_nsys_export(const std::filesystem::path& path);

}  // namespace partrain::profiler
