// One `nsys export --type sqlite` file opened for reading: its export schema version checked
// against those partrain knows (META_DATA_EXPORT), its session's start on the Unix clock
// (TARGET_INFO_SESSION_START_TIME: rows' start/end are nanoseconds from it), which of the lazily
// created tables and columns it has, and the id layout nsys uses (globalTid: pid in bits 24-47,
// tid in bits 0-23, the host above; globalPid has no tid bits).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
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
  std::string host;  // TARGET_INFO_SYSTEM_ENV's host name, "" when not recorded
  std::map<int64_t, std::string> thread_names;  // globalTid -> name (ThreadNames)

  bool has_table(std::string_view table) const { return db.has_table("main", table); }
  bool has_column(std::string_view table, std::string_view column) const;
  // A CPU thread's track: "thread 4242 (pt_main_thread)", or "thread 4242" unnamed.
  std::string thread_track(int64_t global_tid) const;
};

// nsys's NVTX event types (ENUM_NSYS_EVENT_TYPE): push/pop and start/end ranges, domain creation.
inline constexpr int kNvtxPushPopRange = 59;
inline constexpr int kNvtxStartEndRange = 60;
inline constexpr int kNvtxDomainCreate = 75;

// A process as nsys keys it: the global id without its thread bits (host and pid).
inline int64_t nsys_process_of(int64_t global_id) { return global_id >> 24; }
inline int64_t nsys_pid_of(int64_t global_id) { return (global_id >> 24) & 0xFFFFFF; }
inline int64_t nsys_tid_of(int64_t global_tid) { return global_tid & 0xFFFFFF; }

// NVTX ranges that ended, oldest first: start, end, globalTid, domainId, name (text or its
// registered string), and the payload's bytes (NULL unless `with_payloads`).
std::string nvtx_ranges_query(bool with_payloads);

// kUnreadable naming the file: not SQLite, SQLite but no nsys export (no META_DATA_EXPORT), an
// export schema version outside those known (named), no session start time.
StatusOr<NsysExport> open_nsys_export(const std::filesystem::path& path);

}  // namespace partrain::profiler
