#include "cli/bench/bench_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/json_dump.h"
#include "core/number_format.h"

namespace partrain::bench {
namespace {

std::string format_measurement(const Measurement& m) {
  std::string wrong = m.wrong < 0 ? "N/A" : fmt::format("{}", m.wrong);
  // nccl-tests' columns in us and GB/s, but a slow CPU link's 0.0016 GB/s is not "0.00".
  return fmt::format(" {:>10} {:>7} {:>7} {:>6}", format_decimal(m.time_us, 2),
                     format_decimal(m.algbw_gbps, 2), format_decimal(m.busbw_gbps, 2), wrong);
}

nlohmann::json measurement_json(const BenchRow& row, const Measurement& m, bool in_place,
                                const BenchContext& context) {
  nlohmann::json entry = {
      {"op", row.op},           {"bytes", row.bytes},         {"count", row.count},
      {"type", row.type},       {"redop", row.redop},         {"root", row.root},
      {"nranks", row.nranks},   {"backend", context.backend}, {"in_place", in_place},
      {"time_us", m.time_us},   {"algbw_gbps", m.algbw_gbps}, {"busbw_gbps", m.busbw_gbps},
  };
  entry["wrong"] = m.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(m.wrong);
  return entry;
}

// How a row's time combines the ranks' (-a): nccl-tests' 0 rank 0, 1 mean, 2 min, 3 max.
const char* time_over_ranks(TimeAverage average) {
  return std::array{"rank 0", "mean", "min", "max"}[static_cast<int>(average)];
}

}  // namespace

int64_t total_wrong(const std::vector<BenchRow>& rows) {
  int64_t wrong = 0;
  for (const auto& row : rows) {
    wrong += std::max<int64_t>(0, row.out_of_place.wrong);
    if (row.in_place) wrong += std::max<int64_t>(0, row.in_place->wrong);
  }
  return wrong;
}

bool any_checked(const std::vector<BenchRow>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](const BenchRow& row) {
    return row.out_of_place.wrong >= 0 || (row.in_place && row.in_place->wrong >= 0);
  });
}

double average_busbw_gbps(const std::vector<BenchRow>& rows) {
  double sum = 0;
  int measurements = 0;
  for (const auto& row : rows) {
    sum += row.out_of_place.busbw_gbps;
    ++measurements;
    if (row.in_place) {
      sum += row.in_place->busbw_gbps;
      ++measurements;
    }
  }
  return measurements == 0 ? 0.0 : sum / measurements;
}

std::string format_bench_header(const BenchOptions& options, const BenchContext& context) {
  std::string out;
  out += fmt::format("# partrain bench collectives: {} ranks, backend {} on {}\n", context.nranks,
                     context.backend, context.device);
  out += fmt::format("# warmup iters: {}, iters: {}, check: {}, time: {} over ranks\n#\n",
                     options.warmup_iters, options.iters, options.check ? 1 : 0,
                     time_over_ranks(options.average));
  return out;
}

std::string format_bench_row(const BenchRow& row, const BenchRow* previous) {
  std::string out;
  if (previous == nullptr || row.op != previous->op) {
    out += fmt::format("# {}\n", row.op);
    out += fmt::format("# {:>12} {:>12} {:>8} {:>6} {:>5} {:-^33} {:-^33}\n", "", "", "", "", "",
                       " out-of-place ", " in-place ");
    out += fmt::format("# {:>12} {:>12} {:>8} {:>6} {:>5} {:>10} {:>7} {:>7} {:>6} {:>10} "
                       "{:>7} {:>7} {:>6}\n",
                       "size", "count", "type", "redop", "root", "time", "algbw", "busbw",
                       "#wrong", "time", "algbw", "busbw", "#wrong");
    out += fmt::format("# {:>12} {:>12} {:>8} {:>6} {:>5} {:>10} {:>7} {:>7} {:>6} {:>10} "
                       "{:>7} {:>7} {:>6}\n",
                       "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                       "(GB/s)", "(GB/s)", "");
  }
  std::string in_place = row.in_place ? format_measurement(*row.in_place)
                                      : fmt::format(" {:>10} {:>7} {:>7} {:>6}", "-", "-", "-",
                                                    "-");
  out += fmt::format("  {:>12} {:>12} {:>8} {:>6} {:>5}{}{}\n", row.bytes, row.count, row.type,
                     row.redop, row.root, format_measurement(row.out_of_place), in_place);
  return out;
}

std::string format_bench_footer(const std::vector<BenchRow>& rows) {
  const int64_t wrong = total_wrong(rows);
  // nccl-tests' two lines, which its parsers read: "N OK|FAILED", then the mean busbw in GB/s
  // (a bare number there; here its unit follows, never scaled to MB/s, which a parser would take
  // for GB/s). With -c 0 nccl-tests says "0 OK" of values it never looked at: said so here.
  return fmt::format("# Out of bounds values : {} {}{}\n", wrong, wrong == 0 ? "OK" : "FAILED",
                     any_checked(rows) ? "" : " (nothing checked: -c 0)") +
         fmt::format("# Avg bus bandwidth    : {} GB/s\n",
                     format_decimal(average_busbw_gbps(rows), 2));
}

std::string format_bench_table(const std::vector<BenchRow>& rows, const BenchOptions& options,
                               const BenchContext& context) {
  std::string out = format_bench_header(options, context);
  for (size_t i = 0; i < rows.size(); ++i) {
    out += format_bench_row(rows[i], i == 0 ? nullptr : &rows[i - 1]);
  }
  return out + format_bench_footer(rows);
}

std::string format_bench_json(const std::vector<BenchRow>& rows, const BenchOptions& options,
                              const BenchContext& context) {
  nlohmann::json results = nlohmann::json::array();
  for (const auto& row : rows) {
    results.push_back(measurement_json(row, row.out_of_place, false, context));
    if (row.in_place) results.push_back(measurement_json(row, *row.in_place, true, context));
  }
  nlohmann::json document = {
      {"nranks", context.nranks},
      {"backend", context.backend},
      {"device", context.device},
      {"warmup_iters", options.warmup_iters},
      {"iters", options.iters},
      {"checked", options.check},
      {"time_over_ranks", time_over_ranks(options.average)},
      {"wrong", any_checked(rows) ? nlohmann::json(total_wrong(rows)) : nlohmann::json(nullptr)},
      {"avg_busbw_gbps", average_busbw_gbps(rows)},
      {"results", results}};
  return dump_json(document, 2) + "\n";
}

}  // namespace partrain::bench
