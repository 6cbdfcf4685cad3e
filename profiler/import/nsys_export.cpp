#include "profiler/import/nsys_export.h"

#include <charconv>

#include "profiler/trace_open.h"

namespace partrain::profiler {
namespace {

// "3.16.1" -> (3, 16); nullopt for text that is no version.
std::optional<std::pair<int, int>> major_minor(std::string_view version) {
  int major = 0, minor = 0;
  const char* end = version.data() + version.size();
  auto [after_major, ec1] = std::from_chars(version.data(), end, major);
  if (ec1 != std::errc() || after_major == end || *after_major != '.') return std::nullopt;
  auto [after_minor, ec2] = std::from_chars(after_major + 1, end, minor);
  if (ec2 != std::errc() || (after_minor != end && *after_minor != '.')) return std::nullopt;
  return std::pair(major, minor);
}

std::string host_of(const NsysExport& file) {
  if (!file.has_table("TARGET_INFO_SYSTEM_ENV") ||
      !file.has_column("TARGET_INFO_SYSTEM_ENV", "name")) {
    return {};
  }
  auto host = SqliteStatement::prepare(
      file.db,
      "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE lower(name) IN ('hostname', "
      "'host name') LIMIT 1");
  return host.is_ok() && host->step() == SQLITE_ROW ? host->column_text(0) : std::string();
}

std::map<int64_t, std::string> thread_names_of(const NsysExport& file) {
  std::map<int64_t, std::string> names;
  if (!file.has_table("ThreadNames")) return names;
  auto stmt = SqliteStatement::prepare(
      file.db,
      "SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId");
  while (stmt.is_ok() && stmt->step() == SQLITE_ROW) {
    names[stmt->column_int(0)] = stmt->column_text(1);
  }
  return names;
}

}  // namespace

std::string nvtx_ranges_query(bool with_payloads) {
  return fmt::format(
      "SELECT e.start, e.end, e.globalTid, e.domainId, COALESCE(e.text, s.value), {} "
      "FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
      "WHERE e.eventType IN ({}, {}) AND e.end IS NOT NULL ORDER BY e.start",
      with_payloads ? "e.binaryData" : "NULL", kNvtxPushPopRange, kNvtxStartEndRange);
}

std::string NsysExport::thread_track(int64_t global_tid) const {
  auto name = thread_names.find(global_tid);
  return name == thread_names.end()
             ? fmt::format("thread {}", nsys_tid_of(global_tid))
             : fmt::format("thread {} ({})", nsys_tid_of(global_tid), name->second);
}

bool NsysExport::has_column(std::string_view table, std::string_view column) const {
  auto stmt = SqliteStatement::prepare(db, fmt::format("PRAGMA table_info({})", table));
  while (stmt.is_ok() && stmt->step() == SQLITE_ROW) {
    if (stmt->column_text(1) == column) return true;
  }
  return false;
}

StatusOr<NsysExport> open_nsys_export(const std::filesystem::path& path) {
  auto unreadable = [&](std::string why) {
    return make_status(StatusCode::kUnreadable, "{}: {}", path.string(), why);
  };
  auto db = SqliteDb::open(path.string(), SQLITE_OPEN_READONLY);
  if (!db.is_ok()) return unreadable(fmt::format("cannot open: {}", db.status().message()));
  NsysExport out;
  out.path = path;
  out.db = std::move(db).value();
  if (!out.db.has_table("main", "META_DATA_EXPORT")) {
    // has_table reads sqlite_master, which fails on what is not SQLite at all.
    const bool sqlite = out.db.exec("SELECT 1 FROM sqlite_master LIMIT 1").is_ok();
    if (sqlite && is_partrain_trace(out.db)) {
      return unreadable(fmt::format(
          "already a partrain trace, nothing to import: analyze it (partrain analyze {}), or "
          "combine node files with partrain merge",
          path.string()));
    }
    return unreadable(sqlite ? "an SQLite database, but not an Nsight Systems export (no "
                               "META_DATA_EXPORT table; make one with `nsys export --type "
                               "sqlite REPORT.nsys-rep`)"
                             : "not an SQLite database");
  }
  auto version =
      out.db.query_text("SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION'");
  if (!version.is_ok() || !version->has_value()) {
    return unreadable(
        "an Nsight Systems export without EXPORT_SCHEMA_VERSION in "
        "META_DATA_EXPORT: its schema cannot be known");
  }
  out.schema_version = **version;
  const auto mm = major_minor(out.schema_version);
  if (!mm || mm->first != kNsysSchemaMajor || mm->second < kNsysSchemaMinorFirst ||
      mm->second > kNsysSchemaMinorLast) {
    return unreadable(fmt::format(
        "export schema version {} is not one partrain knows (it reads {}.{} to {}.{}, what nsys "
        "2024.6 to 2026.4 write); export the report with an nsys of that range",
        out.schema_version, kNsysSchemaMajor, kNsysSchemaMinorFirst, kNsysSchemaMajor,
        kNsysSchemaMinorLast));
  }
  if (auto product = out.db.query_text(
          "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_PRODUCT_VERSION'");
      product.is_ok() && product->has_value()) {
    out.product_version = **product;
  }
  if (!out.has_table("TARGET_INFO_SESSION_START_TIME")) {
    return unreadable(
        "an Nsight Systems export without TARGET_INFO_SESSION_START_TIME: its "
        "times cannot be placed on a clock");
  }
  if (!out.has_table("StringIds")) {
    return unreadable(
        "an Nsight Systems export without StringIds: its kernel, range and thread names "
        "cannot be read (export the report again with nsys export --type sqlite)");
  }
  auto start = out.db.query_text("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1");
  const std::string text = start.is_ok() && start->has_value() ? **start : std::string();
  auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), out.session_start_unix_ns);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return unreadable("TARGET_INFO_SESSION_START_TIME holds no session start time");
  }
  out.host = host_of(out);
  out.thread_names = thread_names_of(out);
  return out;
}

}  // namespace partrain::profiler
