#include "profiler/trace_reader/lost_strings.h"

#include <fmt/format.h>

#include <utility>

namespace partrain::profiler {

std::string lost_string_text(int64_t id) { return fmt::format("(lost string {})", id); }

std::string lost_string_text_sql(std::string_view id) {
  return fmt::format("'(lost string ' || {} || ')'", id);
}

std::string string_table_whole_sql(std::string_view schema) {
  return fmt::format("SELECT count(*) > 0 AND count(*) = max(id) FROM {}.string", schema);
}

std::string lost_string_ids_sql(const SqliteDb& db, std::string_view schema) {
  // The columns that hold a string id (share/schema.sql).
  constexpr std::pair<std::string_view, std::string_view> kStringIdColumns[] = {
      {"track", "name_id"},      {"slice", "name_id"},    {"collective", "comm_id"},
      {"collective", "op"},      {"collective", "dtype"}, {"collective", "reduce_op"},
      {"collective", "group_ranks_id"},
  };
  std::string referenced;
  for (const auto& [table, column] : kStringIdColumns) {
    if (!db.has_column(schema, table, column)) continue;
    if (!referenced.empty()) referenced += " UNION ";
    referenced += fmt::format("SELECT {1} AS id FROM {0}.{2} WHERE {1} IS NOT NULL", schema,
                              column, table);
  }
  if (referenced.empty()) return "SELECT NULL AS id WHERE 0";
  return fmt::format("SELECT DISTINCT r.id FROM ({}) r WHERE r.id NOT IN (SELECT id FROM {}.string)",
                     referenced, schema);
}

}  // namespace partrain::profiler
