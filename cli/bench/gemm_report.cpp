#include "cli/bench/gemm_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/json_dump.h"
#include "core/number_format.h"

namespace partrain::bench {
namespace {

const char* dtype_name(const runner::GemmBenchResult& result) {
  return result.bf16 ? "bf16" : "fp32";
}

}  // namespace

int total_wrong(const std::vector<runner::GemmBenchResult>& results) {
  int wrong = 0;
  for (const auto& result : results) wrong += result.wrong;
  return wrong;
}

std::string format_gemm_table(const std::vector<runner::GemmBenchResult>& results,
                              const GemmBenchContext& context) {
  std::string out;
  out += fmt::format("# partrain bench gemm: matmul_forward on {}\n", context.device);
  out += fmt::format(
      "# out (M, N) = inp (M, K) @ weight (N, K)^T, operands and out stored in dtype, fp32 "
      "accumulate; warmup iters: {}, iters: {} back to back\n#\n",
      context.warmup_iters, context.iters);
  out += fmt::format("# {:>20} {:>6} {:>5} {:>12} {:>9} {:>8} {:>6} {:>9}\n", "shape", "dtype",
                     "bias", "time", "rate", "checked", "#wrong", "max error");
  out += fmt::format("# {:>20} {:>6} {:>5} {:>12} {:>9} {:>8} {:>6} {:>9}\n", "(MxNxK)", "", "",
                     "(us)", "(TFLOP/s)", "", "", "(x tol.)");
  for (const auto& result : results) {
    const bool checked = result.checked > 0;
    out += fmt::format("  {:>20} {:>6} {:>5} {:>12.1f} {:>9.4g} {:>8} {:>6} {:>9}\n",
                       runner::format_gemm_shape(result.shape), dtype_name(result),
                       result.bias ? "yes" : "no", result.mean_us, result.tflops, result.checked,
                       checked ? fmt::format("{}", result.wrong) : "N/A",
                       checked ? format_decimal(result.max_error, 3) : "N/A");
  }
  const int wrong = total_wrong(results);
  const bool checked = std::any_of(results.begin(), results.end(),
                                   [](const runner::GemmBenchResult& r) { return r.checked > 0; });
  if (!checked) {
    out += "# Out of bounds values : N/A (not checked: -c 0)\n";
  } else {
    out += fmt::format("# Out of bounds values : {} {}\n", wrong, wrong == 0 ? "OK" : "FAILED");
  }
  return out;
}

std::string format_gemm_json(const std::vector<runner::GemmBenchResult>& results,
                             const GemmBenchContext& context) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& result : results) {
    rows.push_back(
        {{"m", result.shape.m},
         {"n", result.shape.n},
         {"k", result.shape.k},
         {"dtype", dtype_name(result)},
         {"bias", result.bias},
         {"iters", result.iters},
         {"time_us", result.mean_us},
         {"tflops", result.tflops},
         {"flops_per_call", result.shape.flops()},
         {"checked", result.checked},
         {"wrong", result.checked == 0 ? nlohmann::json(nullptr) : nlohmann::json(result.wrong)},
         {"max_error_over_tolerance",
          result.checked == 0 ? nlohmann::json(nullptr) : nlohmann::json(result.max_error)}});
  }
  nlohmann::json document = {{"device", context.device},
                             {"warmup_iters", context.warmup_iters},
                             {"iters", context.iters},
                             {"wrong", total_wrong(results)},
                             {"results", rows}};
  return dump_json(document, 2) + "\n";
}

}  // namespace partrain::bench
