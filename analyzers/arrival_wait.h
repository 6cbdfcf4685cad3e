// The wait for the last member at a collective of ranks that did equal work since they last
// synchronised. Each rank's progress drifts from its peers' two ways:
// - by many small independent delays (a core lent to another process for a while, a thread
//   woken late): after `since_sync_s` seconds of work a random walk of standard deviation
//   jitter x sqrt(since_sync_s). Ranks that share cores drift so.
// - by running at a rate of its own over the interval (its cache, its core's clock): an offset
//   of rate_spread x since_sync_s. Ranks on cores (or GPUs) of their own drift so: nothing
//   interrupts them, and their skew grows in proportion to the work.
// Independent, the two add in variance. The collective ends only after the last arrival, so each
// member waits, on average, the expected maximum of the members' offsets less their mean:
// e(n) x sqrt(jitter^2 W + rate_spread^2 W^2) at W = since_sync_s. The transfer itself starts at
// the last arrival; this wait is the schedule's, not the link's (issue 35 item 6).
#pragma once

#include <string>

namespace partrain::analyzers {

// E[max of n independent standard normals] (0 for n = 1; 1/sqrt(pi) for n = 2).
double expected_max_of_normals(int n);

// How equal-work ranks drift apart: 0 and 0 until calibrated from a trace.
struct ArrivalDrift {
  double jitter = 0;       // s^(1/2): the random walk's, ranks sharing cores
  double rate_spread = 0;  // a fraction of the work: ranks on devices of their own
};

// How a drift reads in a report: "jitter 0.45 ms^1/2", "rate spread 3.1% of the work", both, or
// "none".
std::string arrival_drift_text(const ArrivalDrift& drift);

// Seconds a member of an n-rank collective waits on average for the last arrival after
// `since_sync_s` seconds of equal work; 0 without drift or with one rank.
double arrival_wait_s(const ArrivalDrift& drift, int ranks, double since_sync_s);

}  // namespace partrain::analyzers
