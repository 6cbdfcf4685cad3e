// The benchmark harness: for each size, runs one collective out of place and in place, times
// `iters` back-to-back runs after `warmup_iters`, checks one more run against the reference,
// and combines time and errors over the ranks (as nccl-tests does).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli/bench/bench_options.h"
#include "cli/bench/buffer_space.h"
#include "cli/bench/collective_test.h"
#include "runner/comm/comm.h"

namespace partrain::bench {

struct Measurement {
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  int64_t wrong = 0;  // elements off the reference, summed over ranks; -1 when not checked
};

struct BenchRow {
  std::string op;
  uint64_t bytes = 0;
  uint64_t count = 0;
  std::string type;
  std::string redop = "none";  // as nccl-tests prints it for an op that does not reduce
  int root = -1;      // -1 when the op has no root
  int nranks = 0;
  Measurement out_of_place;
  std::optional<Measurement> in_place;
};

// Every size of every op in `options`; `on_row` (when set) is called with each row as soon as it
// is measured, so a table can be printed as it grows.
StatusOr<std::vector<BenchRow>> run_collective_bench(
    comm::Comm& comm, BufferSpace& space, const BenchOptions& options,
    const std::function<void(const BenchRow&)>& on_row = {});

// Converts between doubles and the wire format of dtype (host memory).
std::vector<std::byte> encode_values(const std::vector<double>& values, comm::DType dtype);
std::vector<double> decode_values(const std::vector<std::byte>& bytes, comm::DType dtype);
// Elements of `got` further from `expected` than dtype's tolerance (exact for integers).
int64_t count_wrong(const std::vector<double>& got, const std::vector<double>& expected,
                    comm::DType dtype);

}  // namespace partrain::bench
