// Prints `partrain bench gemm`'s results: a table (text) or {"results": [...]} (--json), with the
// same facts in both.
#pragma once

#include <string>
#include <vector>

#include "runner/device/gemm_benchmark.h"

namespace partrain::bench {

struct GemmBenchContext {
  std::string device;  // the device's name(): "cuda:0 (NVIDIA H200, bf16 GEMMs, cuBLAS 13.0.1)"
  int warmup_iters = 0;
  int iters = 0;
};

std::string format_gemm_table(const std::vector<runner::GemmBenchResult>& results,
                              const GemmBenchContext& context);
std::string format_gemm_json(const std::vector<runner::GemmBenchResult>& results,
                             const GemmBenchContext& context);
// Sampled entries outside the tolerance, over every result (0: all matched the reference).
int total_wrong(const std::vector<runner::GemmBenchResult>& results);

}  // namespace partrain::bench
