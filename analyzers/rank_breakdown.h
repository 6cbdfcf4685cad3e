// Where one rank's time goes over a span: compute, communication, memcpy and idle as interval
// unions, and how much communication hides under compute (DESIGN.md "Analyses"; formulas in
// docs/analysis.md). BusyTime accumulates it from slices fed in order of start; `partrain
// analyze` feeds it a rank's whole window from the trace, the dashboard the last step of the
// slices it has read, so both split time the same way.
#pragma once

#include <cstdint>
#include <optional>

#include "analyzers/activity.h"

namespace partrain::analyzers {

// Step durations (steps.dur_ns) of one rank's steps inside the window.
struct StepTimes {
  int64_t count = 0;
  double median_ns = 0;
  double p90_ns = 0;  // nearest rank: the smallest duration >= 90% of them
  double mean_ns = 0;
};

// Times in ns over one rank's span. compute/comm/memcpy are each a union of intervals, so
// nested or concurrent slices of one kind count once.
struct RankBreakdown {
  int rank = 0;
  int64_t window_ns = 0;
  int64_t steps = 0;          // steps in the window (0: a trace without steps)
  int64_t compute_ns = 0;     // |compute slices ∪ kernels but NCCL's|
  int64_t comm_ns = 0;        // |collective ∪ p2p slices ∪ NCCL kernels|
  int64_t memcpy_ns = 0;      // |memcpy ∪ memset slices|
  int64_t overlap_ns = 0;     // |compute ∩ comm|
  int64_t busy_ns = 0;        // |compute ∪ comm ∪ memcpy|
  int64_t compute_or_comm_ns = 0;  // |compute ∪ comm|
  // The host's collective calls (collective and p2p slices, NCCL kernels aside) and their union
  // with compute: compute under a host's call is waiting there, compute under an NCCL kernel
  // is work (compute_only_ns). On a CPU trace host_comm is comm.
  int64_t host_comm_ns = 0;
  int64_t compute_or_host_comm_ns = 0;
  // Idle time inside phase slices (forward, backward, optimizer...): work recorded only as a
  // phase, such as a host-side optimizer update, or waits inside it. |phases ∪ busy| - |busy|.
  int64_t idle_in_phases_ns = 0;
  StepTimes step_times;

  int64_t idle_ns() const { return window_ns - busy_ns; }
  int64_t exposed_comm_ns() const { return comm_ns - overlap_ns; }             // comm \ compute
  int64_t exposed_memcpy_ns() const { return busy_ns - compute_or_comm_ns; }   // memcpy alone
  // Compute not under a host's collective call: compute \ host comm.
  int64_t compute_only_ns() const { return compute_or_host_comm_ns - host_comm_ns; }
  // |compute ∩ comm| / |comm|; nullopt without communication.
  std::optional<double> overlap_pct() const;
  double pct_of_window(int64_t ns) const;             // 0 for an empty window
  std::optional<double> ms_per_step(int64_t ns) const;  // nullopt without steps
};

// Accumulates |union| of intervals fed in order of start (exposed for tests).
class IntervalUnion {
 public:
  void add(int64_t start, int64_t end);
  int64_t total_ns() const { return total_ + (open_ ? end_ - start_ : 0); }

 private:
  bool open_ = false;
  int64_t start_ = 0, end_ = 0, total_ = 0;
};

// The running unions of a rank's slices over [start_ns, end_ns): one per kind, one for
// compute ∪ comm, one for all three, one with the phases, and the host's comm alone and with
// compute; intersections follow by
// inclusion-exclusion, so nothing but the open interval of each is held.
class BusyTime {
 public:
  BusyTime(int64_t start_ns, int64_t end_ns) : start_ns_(start_ns), end_ns_(end_ns) {}
  // Slices in order of start, clipped to the span; sync and step slices count as nothing.
  // `gpu`: the GPU's work (a kernel), not the host's (activity.h, on_gpu).
  void add(int64_t start_ns, int64_t end_ns, Activity activity, bool gpu = false);
  // Fills every time of `out` but rank, steps and step times; window_ns is the span.
  void fill(RankBreakdown& out) const;

 private:
  int64_t start_ns_, end_ns_;
  IntervalUnion compute_, comm_, memcpy_, compute_or_comm_, busy_, phases_or_busy_;
  IntervalUnion host_comm_, compute_or_host_comm_;
};

}  // namespace partrain::analyzers
