// Pipeline parallelism for the estimator: how many micro-batches' activations a pipeline rank
// holds at its peak under each schedule, and the bubble fraction (Narayanan 2021 sec. 2.2;
// Korthikanti 2022 sec. 4.2.3; Qi 2023; DeepSeek's DualPipe README).
#pragma once

#include "memory/training_layout.h"

namespace partrain::memory {

// Micro-batches' worth of this rank's layers held at once: GPipe m; 1F1B min(p - stage, m)
// (the first stage holds p); interleaved as Megatron-LM's warm-up, (p - stage - 1) 2 + (v - 1) p +
// 1 chunks of L/(pv) layers, capped at m v: the first stage holds p (1 + (p - 1)/(p v)). ZB-H1
// min(p, m) on every rank: a micro-batch's activations live until its W, and rank r runs its W
// passes r micro-batches late (Qi 2023 sec. 3.1: 1F1B's peak). DualPipeV 2p + 1 chunks of half a
// rank's layers, (2p + 1)/2; DualPipe p + 1 stages of the two a rank holds, (p + 1)/2 (the DualPipe
// README's "PP + 1").
double in_flight_micro_batches(PipelineSchedule schedule, int pp, int vpp, int64_t micro_batches,
                               int stage);

// Narayanan 2021 sec. 2.2: the bubble is (p - 1)/m of the ideal time, (p - 1)/(v m) interleaved.
double bubble_fraction(int pp, int64_t micro_batches, int vpp = 1);

// The bubble of `schedule` over the ideal time with a backward twice a forward, split evenly in
// B and W (F = B = W, Qi 2023's setting): GPipe and 1F1B (p - 1)/m, interleaved (p - 1)/(v m);
// ZB-H1 (p - 1)(F + B - W) / (m (F + B + W)) = (p - 1)/(3m); DualPipeV (the README's
// (PP/2 - 1)(F&B + B_full - 3W) over 2p stages of half a rank's layers, F&B = F + B_full as
// partrain runs them, one after the other) (p - 1)/(3m); DualPipe over p stages (p - 2)/(3m).
double bubble_fraction(PipelineSchedule schedule, int pp, int64_t micro_batches, int vpp);
// The zero-bubble schedules' bubble over the ideal time with a rank's action times per chunk:
// forward F, input gradient B, weight gradient W. ZB-H1 (p - 1)(F + B - W) / (m (F + B + W))
// (Qi 2023 sec. 3.1; the README's (PP-1)(F + B_full - 2W)); DualPipeV (p - 1)(F + 2B - W) /
// (2 m (F + B + W)) and DualPipe (p/2 - 1)(F + 2B - W) / (m (F + B + W)) (the README's
// (PP/2 - 1)(F&B + B_full - 3W) with F&B = F + B_full: partrain runs the pair one after the
// other, so this bounds it from above). 0 for the other schedules.
double split_bubble_fraction(PipelineSchedule schedule, int pp, int64_t micro_batches, double F,
                             double B, double W);

// Copies of a pipeline stage's parameters a rank holds: DualPipe 2 (a stage per direction),
// every other schedule 1 (DualPipeV's two chunks are two different halves of a rank's share).
int parameter_copies(PipelineSchedule schedule);

}  // namespace partrain::memory
