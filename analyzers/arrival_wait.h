// The wait for the last member at a collective of ranks that did equal work since they last
// synchronised. Each rank's progress drifts from its peers' by many small independent delays
// (kernel-time noise, a core lent to another process for a while): after `since_sync_s` seconds
// of work a rank's arrival is off by a random walk of standard deviation
// jitter x sqrt(since_sync_s). The collective ends only after the last arrival, so each member
// waits, on average, the expected maximum of the members' offsets less their mean:
// e(n) x jitter x sqrt(since_sync_s). The transfer itself starts at the last arrival; this wait
// is the schedule's, not the link's (issue 35 item 6).
#pragma once

namespace partrain::analyzers {

// E[max of n independent standard normals] (0 for n = 1; 1/sqrt(pi) for n = 2).
double expected_max_of_normals(int n);

// Seconds a member of an n-rank collective waits on average for the last arrival after
// `since_sync_s` seconds of equal work; 0 without jitter or with one rank.
double arrival_wait_s(double jitter, int ranks, double since_sync_s);

}  // namespace partrain::analyzers
