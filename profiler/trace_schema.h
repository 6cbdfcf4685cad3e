// The trace schema as compiled in from share/schema.sql and share/views.sql, and the version
// rule readers apply (docs/trace-format.md "Versioning").
#pragma once

#include <string_view>

namespace partrain::profiler {

// PRAGMA user_version of the files this build writes; it reads files up to this version.
inline constexpr int kTraceSchemaVersion = 7;
// meta('format') of every partrain trace.
inline constexpr std::string_view kTraceFormatName = "partrain-trace";

std::string_view schema_sql();
std::string_view views_sql();

}  // namespace partrain::profiler
