#include "profiler/trace_reader/memory_reads.h"

#include <fmt/format.h>

#include "profiler/trace_reader/trace_codes.h"

namespace partrain::profiler {

// The raw table's integer category (memory::Category's value), not the memory_events view's
// text: the view costs a join and a parse per sample (docs/decisions.md).
constexpr const char* kMemoryColumns = "SELECT rowid, rank, ts_ns, category, bytes FROM memory ";

bool MemoryCursor::next(MemoryRow& row) {
  if (!step()) return false;
  row.rowid = stmt_.column_int(0);
  row.rank = static_cast<int>(stmt_.column_int(1));
  row.ts_ns = stmt_.column_int(2);
  row.category = memory_category_from_code(stmt_.column_int(3));
  row.bytes = stmt_.column_int(4);
  return true;
}

StatusOr<RankMemoryCursor> rank_memory(const TraceReader& reader, int rank) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare("SELECT category, bytes FROM memory WHERE rank = ?1 "
                                  "ORDER BY ts_ns"));
  stmt.bind(1, int64_t{rank});
  return RankMemoryCursor(reader.db(), std::move(stmt),
                          fmt::format("reading the memory samples of rank {}", rank));
}

StatusOr<MemoryCursor> memory_stored_between(const TraceReader& reader, int64_t after,
                                             int64_t upto) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare(std::string(kMemoryColumns) +
                                  "WHERE rowid > ?1 AND rowid <= ?2 ORDER BY rowid"));
  stmt.bind(1, after);
  stmt.bind(2, upto);
  return MemoryCursor(reader.db(), std::move(stmt), "reading memory samples");
}

StatusOr<int64_t> last_memory_rowid(const TraceReader& reader) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare("SELECT coalesce(max(rowid), 0) FROM memory"));
  if (stmt.step() != SQLITE_ROW) return reader.read_error("reading memory samples");
  return stmt.column_int(0);
}

}  // namespace partrain::profiler
