#include "profiler/trace_reader/kernel_reads.h"

#include <fmt/format.h>

namespace partrain::profiler {

StatusOr<bool> has_kernels(const TraceReader& reader) {
  ASSIGN_OR_RETURN(SqliteStatement stmt, reader.prepare("SELECT EXISTS (SELECT 1 FROM kernels)"));
  if (stmt.step() != SQLITE_ROW) return reader.read_error("reading the kernels");
  return stmt.column_int(0) != 0;
}

StatusOr<std::vector<KernelTime>> kernel_times(const TraceReader& reader, int rank, int64_t from,
                                               int64_t to) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare("SELECT name, COUNT(*), SUM(dur_ns) FROM kernels "
                                  "WHERE rank = ?1 AND ts_ns >= ?2 AND ts_ns < ?3 GROUP BY name"));
  stmt.bind(1, int64_t{rank});
  stmt.bind(2, from);
  stmt.bind(3, to);
  std::vector<KernelTime> times;
  RETURN_IF_ERROR(reader.each_row(stmt, fmt::format("reading the kernels of rank {}", rank),
                                  [&](const SqliteStatement& row) {
                                    times.push_back({row.column_text(0), row.column_int(1),
                                                     row.column_int(2)});
                                  }));
  return times;
}

}  // namespace partrain::profiler
