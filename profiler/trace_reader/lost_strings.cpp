#include "profiler/trace_reader/lost_strings.h"

#include <fmt/format.h>

#include <map>
#include <regex>
#include <utility>

#include "profiler/trace_schema.h"

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

namespace {

// The first column of a one-row query, as a number.
StatusOr<int64_t> number_of(const SqliteDb& db, const std::string& sql) {
  ASSIGN_OR_RETURN(SqliteStatement stmt, SqliteStatement::prepare(db, sql));
  if (stmt.step() != SQLITE_ROW) return failed("{}", db.error_message());
  return stmt.column_int(0);
}

}  // namespace

StatusOr<int64_t> lost_string_count(const SqliteDb& db) {
  ASSIGN_OR_RETURN(const int64_t whole, number_of(db, string_table_whole_sql("main")));
  if (whole == 1) return int64_t{0};
  return number_of(db, fmt::format("SELECT count(*) FROM ({})", lost_string_ids_sql(db, "main")));
}

std::vector<std::string> views_keeping_lost_strings(std::string_view views) {
  // views.sql joins a string as `JOIN string s ON s.id = t.name_id` and reads it as `s.value`.
  static const std::regex kJoin(R"((LEFT )?JOIN string (\w+) ON \2\.id = ([\w.]+))");
  std::vector<std::string> out;
  size_t begin = 0;
  for (size_t end = views.find(';'); end != std::string_view::npos;
       begin = end + 1, end = views.find(';', begin)) {
    std::string statement(views.substr(begin, end - begin));
    std::map<std::string, std::string> id_of;  // alias -> the expression of its string id
    for (auto it = std::sregex_iterator(statement.begin(), statement.end(), kJoin);
         it != std::sregex_iterator(); ++it) {
      id_of[(*it)[2]] = (*it)[3];
    }
    const size_t create = statement.find("CREATE VIEW ");
    if (id_of.empty() || create == std::string::npos) continue;
    statement =
        std::regex_replace(statement.substr(create), kJoin, "LEFT JOIN string $2 ON $2.id = $3");
    for (const auto& [alias, id] : id_of) {
      const std::regex value("(^|[^\\w.])" + alias + "\\.value\\b");
      statement = std::regex_replace(
          statement, value, "$1coalesce(" + alias + ".value, " + lost_string_text_sql(id) + ")");
    }
    out.push_back("CREATE TEMP VIEW " + statement.substr(std::string_view("CREATE VIEW ").size()));
  }
  return out;
}

Status keep_rows_of_lost_strings(SqliteDb& db) {
  ASSIGN_OR_RETURN(const int64_t lost, lost_string_count(db));
  if (lost == 0) return Status::ok();
  for (const std::string& view : views_keeping_lost_strings(views_sql())) {
    (void)db.exec(view);  // an older file's view stays its own
  }
  return Status::ok();
}

}  // namespace partrain::profiler
