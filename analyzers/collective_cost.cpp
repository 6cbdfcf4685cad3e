#include "analyzers/collective_cost.h"

#include <bit>
#include <cmath>
#include <cstdlib>

#include "analyzers/bandwidth.h"

namespace partrain::analyzers {
namespace {

size_t index_of(CostedOp op) { return static_cast<size_t>(op); }
size_t index_of(LinkLevel level) { return level == LinkLevel::kIntraNode ? 0 : 1; }

}  // namespace

std::string_view costed_op_name(CostedOp op) {
  switch (op) {
    case CostedOp::kAllReduce: return "all_reduce";
    case CostedOp::kAllGather: return "all_gather";
    case CostedOp::kReduceScatter: return "reduce_scatter";
    case CostedOp::kSendRecv: return "send_recv";
    case CostedOp::kAllToAll:
      return "all_to_all";
  }
  return "?";
}

std::optional<CostedOp> costed_op_from_trace(std::string_view op) {
  if (op == "all_reduce") return CostedOp::kAllReduce;
  if (op == "all_gather") return CostedOp::kAllGather;
  if (op == "reduce_scatter") return CostedOp::kReduceScatter;
  if (op == "send" || op == "recv") return CostedOp::kSendRecv;
  if (op == "all_to_all") return CostedOp::kAllToAll;
  return std::nullopt;
}

int latency_steps(CostedOp op, int nranks) {
  if (nranks <= 1) return 0;
  const int log_steps = std::bit_width(static_cast<unsigned>(nranks - 1));  // ceil(log2 n)
  switch (op) {
    case CostedOp::kAllReduce: return 2 * log_steps;
    case CostedOp::kAllGather:
    case CostedOp::kReduceScatter: return log_steps;
    case CostedOp::kSendRecv:
    case CostedOp::kAllToAll:
      return 1;
  }
  return 1;
}

double CollectiveCost::seconds(CostedOp op, double bytes, int nranks, LinkLevel level) const {
  if (nranks <= 1 || bytes <= 0) return 0;
  const Link& l = link(op, level, nranks);
  const double factor = busbw_factor(costed_op_name(op), nranks).value_or(1.0);
  return latency_steps(op, nranks) * l.latency_s + bytes * factor / l.bandwidth;
}

void CollectiveCost::calibrate(CostedOp op, LinkLevel level, int group_size, Link measured) {
  auto& fits = calibrated_[index_of(op)][index_of(level)];
  for (auto& [size, link] : fits) {
    if (size == group_size) {
      link = measured;
      return;
    }
  }
  fits.emplace_back(group_size, measured);
}

bool CollectiveCost::is_calibrated(CostedOp op, LinkLevel level) const {
  return !calibrated_[index_of(op)][index_of(level)].empty();
}

const Link& CollectiveCost::link(CostedOp op, LinkLevel level, int nranks) const {
  const auto& fits = calibrated_[index_of(op)][index_of(level)];
  if (fits.empty()) return machines_.link(level);
  const std::pair<int, Link>* nearest = &fits.front();
  auto distance = [nranks](int size) { return std::abs(std::log2(static_cast<double>(size) / nranks)); };
  for (const auto& fit : fits) {
    const double d = distance(fit.first), best = distance(nearest->first);
    if (d < best || (d == best && fit.first > nearest->first)) nearest = &fit;
  }
  return nearest->second;
}

}  // namespace partrain::analyzers
