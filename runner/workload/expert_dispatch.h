// Expert parallelism's token exchange (GShard, Lepikhin 2020; Megatron-LM's all-to-all token
// dispatcher): each rank sends the rows of its routed token choices to the ep ranks that hold
// their experts and gets the results back in the same places. The counts vary per step, and the
// comm layer's all_to_all moves equal blocks: the ranks all-gather each other's per-expert counts
// first (one small collective), then every block is padded to the largest count between any two
// ranks. Rows go to a peer grouped by expert (ascending) and by token within an expert, so a
// receiver's rows of one expert from one sender are contiguous.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "runner/comm/comm.h"
#include "runner/comm/host_value_collectives.h"
#include "runner/device/device.h"
#include "runner/workload/moe_router.h"

namespace partrain::runner {

struct DispatchPlan {
  int peers = 1;             // the ep group's ranks
  int experts_per_rank = 1;  // rank p holds experts [p E_l, (p + 1) E_l)
  int64_t block = 0;         // rows per peer in each all_to_all, padding included
  // peers x block: the choice (token x top_k + c) each sent row carries, -1 for padding.
  std::vector<int64_t> sent_choice;
  // peers x experts_per_rank: the rows each peer sends this rank for each local expert.
  std::vector<int64_t> received;

  int64_t received_rows(int peer, int local_expert) const {
    return received[static_cast<size_t>(peer * experts_per_rank + local_expert)];
  }
  // Calls fn(local_expert, first_row, rows) for each received run of one expert's rows from one
  // peer (rows in the received layout, peers x block), skipping empty ones.
  template <typename Fn>
  void for_each_run(Fn&& fn) const {
    for (int peer = 0; peer < peers; ++peer) {
      int64_t row = peer * block;
      for (int e = 0; e < experts_per_rank; ++e) {
        const int64_t rows = received_rows(peer, e);
        if (rows > 0) fn(e, row, rows);
        row += rows;
      }
    }
  }
};

// Plans the exchange of `routing`'s kept choices over the ep group (`ep_values`: collectives on
// its communicator, of `peers` ranks, this one `rank`); every rank of the group calls it.
StatusOr<DispatchPlan> plan_dispatch(comm::HostValueCollectives& ep_values, int peers, int rank,
                                     const Routing& routing);

// All-to-all of host rows (peers x block x width floats) through device buffers (category comm):
// block b of `send` goes to peer b, `receive` gets peer b's block for this rank in block b.
Status exchange_rows(Device& device, comm::Comm& ep, const DispatchPlan& plan, int64_t width,
                     const std::vector<float>& send, std::vector<float>& receive);

}  // namespace partrain::runner
