// analyze_top_kernels: the kernel time by name of each rank over its span of the window (one
// GROUP BY each, in the reader), merged by name. Memory grows with distinct kernel names (hundreds), not launches.
#include "analyzers/top_kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "core/number_format.h"
#include "profiler/trace_reader/kernel_reads.h"

namespace partrain::analyzers {

StatusOr<TopKernels> analyze_top_kernels(const profiler::TraceReader& reader,
                                         const AnalysisWindow& window, size_t top) {
  std::map<std::string, KernelRow> by_name;
  TopKernels report;
  // A CPU trace has no kernel rows, and the query would still walk every slice of the window.
  ASSIGN_OR_RETURN(const bool any, profiler::has_kernels(reader));
  if (!any) return report;
  for (int rank : window.ranks) {
    const RankSpan& span = window.spans.at(rank);
    ASSIGN_OR_RETURN(const std::vector<profiler::KernelTime> times,
                     profiler::kernel_times(reader, rank, span.start_ns, span.end_ns));
    for (const profiler::KernelTime& time : times) {
      KernelRow& row = by_name[time.name];
      row.count += time.count;
      row.total_ns += time.total_ns;
      report.kernel_count += time.count;
      report.kernel_ns += time.total_ns;
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
    out += fmt::format("{:>8}  {:>9} ms  {:>9} us  {:>7}  {}\n", row.count,
                       format_decimal(static_cast<double>(row.total_ns) / 1e6, 3),
                       format_decimal(row.mean_ns() / 1e3, 1), format_percent(row.share), row.name);
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
