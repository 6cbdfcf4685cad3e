// The time of one collective in the recommender's cost model: alpha-beta per link level, with
// the bus-bandwidth factors of nccl-tests, so a calibrated busbw plugs straight in:
// t = steps(n) x latency + S x factor(op, n) / busbw (DESIGN.md "Formulas").
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "analyzers/link_model.h"

namespace partrain::analyzers {

// kAllToAll: a mixture of experts' dispatch and combine over the ep ranks.
enum class CostedOp { kAllReduce, kAllGather, kReduceScatter, kSendRecv, kAllToAll };
inline constexpr std::array<CostedOp, 5> kCostedOps = {CostedOp::kAllReduce, CostedOp::kAllGather,
                                                       CostedOp::kReduceScatter,
                                                       CostedOp::kSendRecv, CostedOp::kAllToAll};

// all_reduce, all_gather, reduce_scatter, send_recv, all_to_all
std::string_view costed_op_name(CostedOp op);
// The op a traced collective counts as (send and recv are one send_recv); nullopt otherwise.
std::optional<CostedOp> costed_op_from_trace(std::string_view op);

// Latency steps: NCCL's tree and LL protocols keep small messages at O(log n) steps; an
// all-reduce is a reduce-scatter plus an all-gather, so twice as many. An all-to-all is n - 1
// sends and receives NCCL issues at once (one group): one step, as a send/recv.
int latency_steps(CostedOp op, int nranks);

class CollectiveCost {
 public:
  explicit CollectiveCost(Machines machines) : machines_(std::move(machines)) {}

  // Seconds for one collective over `nranks` ranks at `level`; `bytes` is S as nccl-tests counts
  // it (the whole buffer; the gathered one for all-gather and reduce-scatter; a rank's whole send
  // buffer for all-to-all, of which (n - 1)/n leaves the rank). Zero for one rank.
  double seconds(CostedOp op, double bytes, int nranks, LinkLevel level) const;
  // A link measured for one op, level and group size replaces the preset's for that op and
  // level (calibration from a trace); with several group sizes measured, a collective uses the
  // nearest one (by log2 of the size).
  void calibrate(CostedOp op, LinkLevel level, int group_size, Link measured);
  bool is_calibrated(CostedOp op, LinkLevel level) const;
  const Machines& machines() const { return machines_; }
  // The same links (calibrated ones included) on other machines: a calibration run's own.
  CollectiveCost on_machines(Machines machines) const {
    CollectiveCost moved = *this;
    moved.machines_ = std::move(machines);
    return moved;
  }

 private:
  const Link& link(CostedOp op, LinkLevel level, int nranks) const;

  Machines machines_;
  // Per op and level: (group size, link) measured.
  std::array<std::array<std::vector<std::pair<int, Link>>, 2>, kCostedOps.size()> calibrated_{};
};

}  // namespace partrain::analyzers
