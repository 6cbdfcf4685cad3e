// A Comm decorator that numbers and records every operation in a FlightRecorder: collectives
// per communicator (seq 0, 1, 2, ... identical on all member ranks, so (comm_id, seq) matches
// them across ranks) and transfers per (communicator, peer, direction), as PyTorch's recorder.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <optional>
#include <vector>

#include "profiler/collective_event.h"
#include "profiler/flight/flight_recorder.h"
#include "runner/comm/comm.h"

namespace partrain::comm {

class OpTracker;  // one recorder entry, updated as its op starts and ends

// The size S nccl-tests reports for an op (its "size" column): all_reduce and broadcast
// count x elt; all_gather, reduce_scatter and all_to_all the whole size() x count x elt buffer;
// send/recv count x elt; barrier 0.
uint64_t nccl_tests_bytes(std::string_view op, size_t count, DType dtype, int comm_size);

class RecordingComm final : public Comm {
 public:
  // The recorder must outlive this communicator, its sub-groups and every Work they return.
  RecordingComm(std::unique_ptr<Comm> inner, profiler::FlightRecorder& recorder);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& id() const override { return inner_->id(); }
  const std::vector<int>& world_ranks() const override { return inner_->world_ranks(); }
  std::string_view backend() const override { return inner_->backend(); }

  WorkPtr all_reduce_async(const void* send, void* recv, size_t count, DType dtype,
                           ReduceOp op) override;
  WorkPtr reduce_scatter_async(const void* send, void* recv, size_t recv_count, DType dtype,
                               ReduceOp op) override;
  WorkPtr all_gather_async(const void* send, void* recv, size_t send_count,
                           DType dtype) override;
  WorkPtr broadcast_async(const void* send, void* recv, size_t count, DType dtype,
                          int root) override;
  WorkPtr all_to_all_async(const void* send, void* recv, size_t count, DType dtype) override;
  WorkPtr barrier_async() override;
  WorkPtr send_async(const void* buffer, size_t count, DType dtype, int peer) override;
  WorkPtr recv_async(void* buffer, size_t count, DType dtype, int peer) override;
  WorkPtr send_recv_async(const void* send, int send_peer, void* recv, int recv_peer,
                          size_t count, DType dtype) override;
  // The sub-group is recorded too, into the same recorder.
  StatusOr<std::unique_ptr<Comm>> split(int color, int key) override;

  Comm& inner() { return *inner_; }
  // What the ops issued from now on are for ("moe_dispatch"; empty: nothing). OpLabel sets it.
  void set_label(std::string label);
  std::string label() const;

 private:
  enum class Numbering { kCollective, kSend, kRecv };
  profiler::CollectiveEvent describe(std::string_view op, DType dtype,
                                     std::optional<ReduceOp> reduce, size_t count,
                                     int peer) const;
  template <typename Issue>
  WorkPtr record(profiler::CollectiveEvent event, Numbering numbering, Issue&& issue);
  // Numbers and records one event; the caller attaches the tracker to the op's Work.
  std::shared_ptr<OpTracker> track(profiler::CollectiveEvent event, Numbering numbering);

  std::unique_ptr<Comm> inner_;
  profiler::FlightRecorder& recorder_;
  mutable std::mutex mutex_;  // numbering and issuing happen together, so seq follows issue order
  std::string label_;         // copied into each op's event as it is numbered
  uint64_t next_seq_ = 0;
  std::vector<uint64_t> send_seq_;  // per peer
  std::vector<uint64_t> recv_seq_;  // per peer
};

// Labels the ops issued on `comm` while it lives with what they are for, when `comm` records
// (a RecordingComm: every traced built-in workload's communicator); does nothing otherwise. The
// label names the op's slice in the trace and gives it a row of its own in `partrain analyze`'s
// collective table, so a mixture of experts' dispatch and combine all_to_all, alike in
// communicator, op and size, are told apart:
//   { comm::OpLabel label(ep_comm, "moe_dispatch"); ep_comm.all_to_all(...); }
// Labels nest (the previous one is restored); one thread labels a communicator at a time.
class OpLabel {
 public:
  OpLabel(Comm& comm, std::string_view label);
  ~OpLabel();
  OpLabel(const OpLabel&) = delete;
  OpLabel& operator=(const OpLabel&) = delete;

 private:
  RecordingComm* recording_;
  std::string previous_;
};

}  // namespace partrain::comm
