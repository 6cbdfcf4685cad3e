// The wait for the last member at a collective of ranks that did equal work since they last
// synchronised. Each rank's progress drifts from its peers' two ways:
// - by interruptions (a core lent to another process for a while, a thread woken late): each of
//   `interruption_s` seconds, arriving at random at a rate that makes the rank's delay after W
//   seconds of work vary by jitter^2 W. Ranks that share cores drift so. Over work that holds many
//   interruptions the delay is a random walk, jitter x sqrt(W) (the limit of short interruptions,
//   interruption_s 0); over work shorter than the time between two, most syncs wait nothing and
//   a few wait a whole interruption, so the mean wait grows in proportion to W.
// - by running at a rate of its own over the interval (its cache, its core's clock): an offset
//   of rate_spread x since_sync_s. Ranks on cores (or GPUs) of their own drift so: nothing
//   interrupts them, and their skew grows in proportion to the work.
// The collective ends only after the last arrival, so each member waits, on average, the expected
// maximum of the members' offsets less their mean: for the interruptions d x (E[max of n Poisson
// counts of mean mu] - mu) with d = interruption_s and mu = jitter^2 W / d^2 interruptions a rank
// (e(n) x jitter x sqrt(W) as d goes to 0), for the rates e(n) x rate_spread x W. Independent, the
// two add as the normals they tend to do: in quadrature. The transfer itself starts at
// the last arrival; this wait is the schedule's, not the link's (issue 35 item 6).
#pragma once

#include <string>

namespace partrain::analyzers {

// E[max of n independent standard normals] (0 for n = 1; 1/sqrt(pi) for n = 2).
double expected_max_of_normals(int n);

// E[max of n independent Poisson counts of mean `mean`] - mean: 0 for n = 1, about (n - 1) x mean
// for a small mean, e(n) x sqrt(mean) for a large one.
double poisson_max_excess(int n, double mean);

// How equal-work ranks drift apart: 0 and 0 until calibrated from a trace.
struct ArrivalDrift {
  double jitter = 0;          // s^(1/2): ranks sharing cores, the random walk's coefficient
  double interruption_s = 0;  // how long each of their interruptions is (0: a random walk)
  double rate_spread = 0;     // a fraction of the work: ranks on devices of their own
};

// How a drift reads in a report: "jitter 0.45 ms^1/2", "jitter 3.1 ms^1/2 in interruptions of
// 12 ms (65/s)", "rate spread 3.1% of the work", the first two with the third, or "none".
std::string arrival_drift_text(const ArrivalDrift& drift);

// Seconds a member of an n-rank collective waits on average for the last arrival after
// `since_sync_s` seconds of equal work; 0 without drift or with one rank.
double arrival_wait_s(const ArrivalDrift& drift, int ranks, double since_sync_s);

}  // namespace partrain::analyzers
