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

std::string views_keeping_lost_strings_sql(std::string_view views) {
  // views.sql joins a string as `JOIN string s ON s.id = t.name_id` and reads it as `s.value`.
  static const std::regex kJoin(R"((LEFT )?JOIN string (\w+) ON \2\.id = ([\w.]+))");
  std::string out;
  size_t begin = 0;
  for (size_t end = views.find(';'); end != std::string_view::npos;
       begin = end + 1, end = views.find(';', begin)) {
    std::string statement(views.substr(begin, end - begin));
    std::map<std::string, std::string> id_of;  // alias -> the expression of its string id
    for (auto it = std::sregex_iterator(statement.begin(), statement.end(), kJoin);
         it != std::sregex_iterator(); ++it) {
      id_of[(*it)[2]] = (*it)[3];
    }
    if (id_of.empty()) continue;
    statement = std::regex_replace(statement, kJoin, "LEFT JOIN string $2 ON $2.id = $3");
    for (const auto& [alias, id] : id_of) {
      const std::regex value("(^|[^\\w.])" + alias + "\\.value\\b");
      statement = std::regex_replace(
          statement, value, "$1coalesce(" + alias + ".value, " + lost_string_text_sql(id) + ")");
    }
    const size_t create = statement.find("CREATE VIEW ");
    if (create == std::string::npos) continue;
    statement.replace(create, std::string_view("CREATE VIEW ").size(), "CREATE TEMP VIEW ");
    out += statement.substr(create) + ";\n";
  }
  return out;
}

Status keep_rows_of_lost_strings(SqliteDb& db) {
  ASSIGN_OR_RETURN(std::optional<std::string> whole, db.query_text(string_table_whole_sql("main")));
  if (whole.value_or("0") == "1") return Status::ok();
  // Not whole by its ids (or empty, as a live trace starts): do its rows name a string it lacks?
  ASSIGN_OR_RETURN(
      std::optional<std::string> lost,
      db.query_text(fmt::format("SELECT EXISTS ({})", lost_string_ids_sql(db, "main"))));
  if (lost.value_or("0") != "1") return Status::ok();
  const std::string views = views_keeping_lost_strings_sql(views_sql());
  size_t begin = 0;
  for (size_t end = views.find(';'); end != std::string::npos;
       begin = end + 1, end = views.find(';', begin)) {
    (void)db.exec(views.substr(begin, end - begin));  // an older file's view stays its own
  }
  return Status::ok();
}

}  // namespace partrain::profiler
