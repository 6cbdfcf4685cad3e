// Flags of `partrain bench collectives`, named as nccl-tests names them (-b -e -f -i -w -c -d
// -o -r -a), with --iters for nccl-tests' -n (here -n is the number of ranks, as in launch).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runner/comm/dtype.h"
#include "runner/worker/world.h"

namespace partrain::bench {

enum class TimeAverage { kRank0 = 0, kMean = 1, kMin = 2, kMax = 3 };  // nccl-tests' -a

struct BenchOptions {
  uint64_t min_bytes = 32ull << 20;
  uint64_t max_bytes = 32ull << 20;
  uint64_t step_factor = 1;          // > 1: multiply the size each step
  uint64_t step_bytes = 1ull << 20;  // used when step_factor is 1: add this each step
  int warmup_iters = 5;
  int iters = 20;
  bool check = true;
  comm::DType dtype = comm::DType::kF32;
  comm::ReduceOp reduce_op = comm::ReduceOp::kSum;
  int root = 0;
  TimeAverage average = TimeAverage::kMean;
  std::vector<std::string> ops = {"all_reduce"};
  runner::CommBackend backend = runner::CommBackend::kGloo;
  bool json = false;
};

// The message sizes to run, in bytes: min, then multiplied by step_factor (or plus step_bytes)
// while <= max.
std::vector<uint64_t> bench_sizes(const BenchOptions& options);

}  // namespace partrain::bench
