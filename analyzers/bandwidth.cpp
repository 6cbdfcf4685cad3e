#include "analyzers/bandwidth.h"

namespace partrain::analyzers {

std::optional<double> busbw_factor(std::string_view op, int nranks) {
  if (nranks <= 0) return std::nullopt;
  const double n = nranks;
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  // nccl-tests' gather and scatter: the root's (n-1)/n of the whole buffer crosses the links.
  if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all" || op == "gather" ||
      op == "scatter") {
    return (n - 1) / n;
  }
  if (op == "broadcast" || op == "reduce" || op == "send" || op == "recv" || op == "send_recv") {
    return 1.0;
  }
  return std::nullopt;
}

Bandwidth collective_bandwidth(std::string_view op, double bytes, double seconds, int nranks) {
  Bandwidth result;
  if (seconds <= 0) return result;
  result.algbw_gbps = bytes / seconds / 1e9;
  // An op without nccl-tests' factor moves its bytes once (docs/metrics.md: "1 otherwise").
  result.busbw_gbps = result.algbw_gbps * busbw_factor(op, nranks).value_or(1.0);
  return result;
}

}  // namespace partrain::analyzers
