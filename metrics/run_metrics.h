// The metrics of a followed run (analyzers::LiveRun, what the dashboard shows) as metric
// families: per rank its step, step time and split, tokens/s, loss, memory per category, how long
// it has been quiet and how it ended (exit code or signal); per communicator, op and size bucket
// the latest matched collective's busbw, time, skew and size; the straggler of the latest
// analysis window, the hang flag with its culprit and the events the trace lost. Names, labels
// and units: docs/metrics.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "analyzers/live_run.h"
#include "metrics/exposition.h"
#include "metrics/hang_watch.h"

namespace partrain::metrics {

// What producing the page cost (the exporter's own metrics).
struct RefreshCost {
  int64_t refresh_ns = 0;   // the latest refresh: reading the trace and rendering
  int64_t refreshes = 0;    // refreshes so far
  bool trace_open = false;  // the trace file has been opened (it appears once the run starts)
};

// The latest matched collective of each (comm_id, op, label, size bucket): kept across refreshes,
// since the run keeps only its most recent ones and a communicator used once per step would drop
// out. The size bucket is `partrain analyze`'s (analyzers::size_bucket): keyed by (comm, op)
// alone, the op that came last in a step won, and a DDP job that all-reduces its 4-byte loss
// after its gradient buckets showed only the loss's size and busbw.
using CollectiveKey = std::tuple<std::string, std::string, std::string, int64_t>;
using LatestCollectives = std::map<CollectiveKey, analyzers::MatchedCollective>;

// A (comm, op, size bucket) series leaves the page once the trace has gone on this long without its
// op (on the trace's timeline): the longer of a floor and as many steps as the hang rule waits, so
// a collective of every step stays, and the rendezvous' all_gather, or an op of a phase that ended,
// does not keep its figure (a 16 B all_gather's 11 B/s busbw) for the rest of the run.
inline constexpr int64_t kCollectiveStaleFloorNs = 60'000'000'000;

class RunMetrics {
 public:
  // Takes in what the latest refresh read, at now_ns (this host's monotonic clock).
  void observe(const analyzers::LiveRun& run, int64_t now_ns);
  std::vector<MetricFamily> families(const analyzers::LiveRun& run, int64_t now_ns,
                                     const RefreshCost& cost) const;

 private:
  LatestCollectives latest_;
  HangWatch hang_;
};

}  // namespace partrain::metrics
