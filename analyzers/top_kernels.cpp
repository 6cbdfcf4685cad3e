// analyze_top_kernels: one GROUP BY per rank over the kernels view, restricted to the rank's span
// of the window, merged by name. Memory grows with distinct kernel names (hundreds), not launches.
#include "analyzers/top_kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "profiler/trace_open.h"

namespace partrain::analyzers {

StatusOr<TopKernels> analyze_top_kernels(const profiler::SqliteDb& db, const AnalysisWindow& window,
                                         size_t top) {
  ASSIGN_OR_RETURN(auto stmt, profiler::SqliteStatement::prepare(
                                  db, "SELECT name, COUNT(*), SUM(dur_ns) FROM kernels "
                                      "WHERE rank = ?1 AND ts_ns >= ?2 AND ts_ns < ?3 "
                                      "GROUP BY name"));
  std::map<std::string, KernelRow> by_name;
  TopKernels report;
  // A CPU trace has no kernel rows, and the query would still walk every slice of the window.
  ASSIGN_OR_RETURN(auto any, profiler::SqliteStatement::prepare(
                                 db, "SELECT EXISTS (SELECT 1 FROM kernels)"));
  if (any.step() != SQLITE_ROW) return profiler::trace_read_error(db, "reading the kernels");
  if (any.column_int(0) == 0) return report;
  for (int rank : window.ranks) {
    const RankSpan& span = window.spans.at(rank);
    stmt.reset();
    stmt.bind(1, int64_t{rank});
    stmt.bind(2, span.start_ns);
    stmt.bind(3, span.end_ns);
    int rc = SQLITE_ROW;
    while ((rc = stmt.step()) == SQLITE_ROW) {
      KernelRow& row = by_name[stmt.column_text(0)];
      row.count += stmt.column_int(1);
      row.total_ns += stmt.column_int(2);
      report.kernel_count += stmt.column_int(1);
      report.kernel_ns += stmt.column_int(2);
    }
    if (rc != SQLITE_DONE) {
      return profiler::trace_read_error(db, fmt::format("reading the kernels of rank {}", rank));
    }
  }
  report.distinct = by_name.size();
  for (auto& [name, row] : by_name) {
    row.name = name;
    row.share = report.kernel_ns > 0
                    ? static_cast<double>(row.total_ns) / static_cast<double>(report.kernel_ns)
                    : 0;
    report.rows.push_back(std::move(row));
  }
  std::sort(report.rows.begin(), report.rows.end(), [](const KernelRow& a, const KernelRow& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  if (report.rows.size() > top) report.rows.resize(top);
  return report;
}

std::vector<Finding> top_kernels_findings(const TopKernels&) { return {}; }

std::string format_top_kernels(const TopKernels& report) {
  if (report.rows.empty()) {
    return "Top kernels: no GPU kernels in the window (a CPU trace, or GPU tracing was off)\n";
  }
  std::string out = fmt::format(
      "Top kernels ({} of {} names; {} launches, {:.2f} ms of GPU time over the window's "
      "ranks)\n",
      report.rows.size(), report.distinct, report.kernel_count,
      static_cast<double>(report.kernel_ns) / 1e6);
  out += fmt::format("{:>8}  {:>12}  {:>12}  {:>7}  {}\n", "count", "total", "mean", "share",
                     "kernel");
  for (const KernelRow& row : report.rows) {
    out += fmt::format("{:>8}  {:>9.3f} ms  {:>9.1f} us  {:>6.1f}%  {}\n", row.count,
                       static_cast<double>(row.total_ns) / 1e6, row.mean_ns() / 1e3,
                       100 * row.share, row.name);
  }
  return out;
}

nlohmann::json top_kernels_json(const TopKernels& report) {
  nlohmann::json rows = nlohmann::json::array();
  for (const KernelRow& row : report.rows) {
    rows.push_back({{"name", row.name},
                    {"count", row.count},
                    {"total_ms", static_cast<double>(row.total_ns) / 1e6},
                    {"mean_us", row.mean_ns() / 1e3},
                    {"share", row.share}});
  }
  return {{"kernel_ms", static_cast<double>(report.kernel_ns) / 1e6},
          {"kernel_count", report.kernel_count},
          {"distinct", report.distinct},
          {"kernels", std::move(rows)}};
}

}  // namespace partrain::analyzers
