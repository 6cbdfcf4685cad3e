// Whether a followed run looks hung, and who holds it up, for the metrics endpoint: the rule of
// analyzers/live_hang.h, with a rank's silence timed on this host's clock from when its latest
// record was first read, so neither the clocks of other nodes nor the trace's flush latency
// enter it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "analyzers/live_hang.h"
#include "analyzers/live_run.h"

namespace partrain::metrics {

class HangWatch {
 public:
  // Notes, at now_ns (this host's monotonic clock), which ranks recorded something new.
  void observe(const analyzers::LiveRun& run, int64_t now_ns);
  // How long `rank` has recorded nothing new, as observed; nullopt before its first record.
  std::optional<int64_t> quiet_ns(int rank, int64_t now_ns) const;
  // analyzers::judge_hang over every rank that recorded anything, quiet as observed.
  analyzers::HangState state(const analyzers::LiveRun& run, int64_t now_ns) const;

 private:
  struct Seen {
    int64_t last_event_ns = 0;  // the rank's latest record, on the trace's timeline
    int64_t read_at_ns = 0;     // when it was first read, on this host's clock
  };
  std::map<int, Seen> seen_;
};

}  // namespace partrain::metrics
