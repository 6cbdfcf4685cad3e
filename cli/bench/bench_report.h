// Prints benchmark results: the nccl-tests table (text) or {"results": [...]} (--json), with the
// same facts in both.
#pragma once

#include <string>
#include <vector>

#include "cli/bench/bench_runner.h"

namespace partrain::bench {

struct BenchContext {
  int nranks = 0;
  std::string backend;  // gloo, nccl
  std::string device;   // cpu, cuda:0
};

std::string format_bench_table(const std::vector<BenchRow>& rows, const BenchOptions& options,
                               const BenchContext& context);
// The table in the pieces printed as the benchmark runs (as nccl-tests prints each size when it
// is measured): the header, a row (after its op's column heads when `previous` is another op's
// or null), and the totals.
std::string format_bench_header(const BenchOptions& options, const BenchContext& context);
std::string format_bench_row(const BenchRow& row, const BenchRow* previous);
std::string format_bench_footer(const std::vector<BenchRow>& rows);
// The table's facts: the header's (ranks, backend, device, iterations, check, time over ranks)
// and every row.
std::string format_bench_json(const std::vector<BenchRow>& rows, const BenchOptions& options,
                              const BenchContext& context);
// Elements wrong over every row and variant (0 when all checked runs matched the reference).
int64_t total_wrong(const std::vector<BenchRow>& rows);
// Whether any measurement was checked against the reference (none with -c 0).
bool any_checked(const std::vector<BenchRow>& rows);
// nccl-tests' "Avg bus bandwidth": the mean busbw over every measurement, out of place and in
// place (GB/s).
double average_busbw_gbps(const std::vector<BenchRow>& rows);

}  // namespace partrain::bench
