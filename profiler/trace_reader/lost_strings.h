// Strings a trace's string table lost (a damaged file): rows still name their ids. One rule for
// the reads (damaged_rows.h: strings_lost) and for `partrain merge` (stat merge_lost_strings),
// and one text for such a string, "(lost string N)", in C++ and in SQL.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "profiler/sqlite_db.h"

namespace partrain::profiler {

// The text a row's string id reads as when the string table lost it; `partrain merge` writes
// the same text in its place.
std::string lost_string_text(int64_t id);
// The same text in SQL, of the string id the expression `id` gives.
std::string lost_string_text_sql(std::string_view id);
// A string table that lost rows (ids a writer hands out one after another are missing, or none
// is left) leaves rows naming strings that are not there. The rule, on the database attached as
// `schema`:
// SQL of one row, 1 when its string table is whole (then no row can name a lost string) ...
std::string string_table_whole_sql(std::string_view schema);
// ... and SQL of the distinct string ids (column `id`) its rows name that its string table lacks:
// a scan of every column holding a string id that `db` has in `schema` (older files lack some).
std::string lost_string_ids_sql(const SqliteDb& db, std::string_view schema);

// How many distinct string ids `db`'s rows name that its string table lacks: 0 at once when the
// table is whole, else the scan above.
StatusOr<int64_t> lost_string_count(const SqliteDb& db);

// The views of `views` (share/views.sql) that join the string table, as CREATE TEMP VIEW
// statements of the same names whose string joins keep a row naming a lost string and read it
// as lost_string_text: the file's own views join strings inwardly, and would drop such a row
// from every read.
std::vector<std::string> views_keeping_lost_strings(std::string_view views);
// When `db`'s rows name strings its string table lacks, makes those TEMP views on its connection:
// they shadow the file's views for every unqualified read. Nothing otherwise. A view a file of an
// older version cannot back (a table it lacks) stays the file's.
Status keep_rows_of_lost_strings(SqliteDb& db);

}  // namespace partrain::profiler
