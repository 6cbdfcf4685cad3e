#include "runner/workload/expert_dispatch.h"

#include <algorithm>

#include "runner/device/tensor.h"

namespace partrain::runner {

StatusOr<DispatchPlan> plan_dispatch(comm::HostValueCollectives& ep_values, int peers, int rank,
                                     const Routing& routing) {
  DispatchPlan plan;
  plan.peers = peers;
  plan.experts_per_rank = routing.experts / peers;
  const auto E = static_cast<size_t>(routing.experts);
  // The kept choices of each expert, in token order.
  std::vector<std::vector<int64_t>> by_expert(E);
  for (size_t i = 0; i < routing.choice.size(); ++i) {
    if (routing.kept[i] != 0) {
      by_expert[static_cast<size_t>(routing.choice[i])].push_back(static_cast<int64_t>(i));
    }
  }
  std::vector<int32_t> counts(E);
  for (size_t e = 0; e < E; ++e) counts[e] = static_cast<int32_t>(by_expert[e].size());
  std::vector<int32_t> all(E * static_cast<size_t>(peers));
  if (peers > 1) {
    RETURN_IF_ERROR(ep_values.all_gather(counts.data(), all.data(), E, comm::DType::kI32));
  } else {
    all = counts;
  }
  // The block: the most rows any rank sends any other.
  const auto per_rank = static_cast<size_t>(plan.experts_per_rank);
  for (size_t from = 0; from < static_cast<size_t>(peers); ++from) {
    for (size_t to = 0; to < static_cast<size_t>(peers); ++to) {
      int64_t rows = 0;
      for (size_t e = to * per_rank; e < (to + 1) * per_rank; ++e) rows += all[from * E + e];
      plan.block = std::max(plan.block, rows);
    }
  }
  plan.block = std::max<int64_t>(plan.block, 1);  // empty blocks still make a valid buffer
  plan.sent_choice.assign(static_cast<size_t>(peers * plan.block), -1);
  for (size_t to = 0; to < static_cast<size_t>(peers); ++to) {
    auto row = static_cast<size_t>(to * static_cast<size_t>(plan.block));
    for (size_t e = to * per_rank; e < (to + 1) * per_rank; ++e) {
      for (int64_t choice : by_expert[e]) plan.sent_choice[row++] = choice;
    }
  }
  plan.received.resize(static_cast<size_t>(peers) * per_rank);
  for (size_t from = 0; from < static_cast<size_t>(peers); ++from) {
    for (size_t local = 0; local < per_rank; ++local) {
      plan.received[from * per_rank + local] =
          all[from * E + static_cast<size_t>(rank) * per_rank + local];
    }
  }
  return plan;
}

Status exchange_rows(Device& device, comm::Comm& ep, const DispatchPlan& plan, int64_t width,
                     const std::vector<float>& send, std::vector<float>& receive) {
  receive.resize(send.size());
  if (plan.peers == 1) {
    receive = send;
    return Status::ok();
  }
  const auto n = static_cast<int64_t>(send.size());
  ASSIGN_OR_RETURN(Tensor out, Tensor::create(device.allocator(), {n}, memory::Category::kComm));
  ASSIGN_OR_RETURN(Tensor in, Tensor::create(device.allocator(), {n}, memory::Category::kComm));
  device.upload(out.data(), send.data(), send.size() * sizeof(float));
  RETURN_IF_ERROR(ep.all_to_all(out.data(), in.data(), static_cast<size_t>(plan.block * width),
                                comm::DType::kF32));
  device.download(receive.data(), in.data(), receive.size() * sizeof(float));
  return Status::ok();
}

}  // namespace partrain::runner
