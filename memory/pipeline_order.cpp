#include "memory/pipeline_order.h"

#include <algorithm>
#include <deque>

namespace partrain::memory {
namespace {

using Pass = PipelinePass;

// Megatron-LM schedules.py, get_model_chunk_id / get_microbatch_id_in_model_chunk: the k-th
// forward (backward) of a rank walks micro-batches in groups of pp, chunk by chunk, forwards
// through the rank's chunks in ascending order and backwards in descending order.
PipelineCompute interleaved_pass(int pp, int vpp, int rank, int k, bool forward) {
  const int group = pp * vpp;
  int local = (k % group) / pp;
  if (!forward) local = vpp - 1 - local;
  const int micro_batch = (k / group) * pp + k % pp;
  return {forward ? Pass::kForward : Pass::kBackward, micro_batch, local * pp + rank};
}

// Warm-up forwards, then one forward and one backward per steady step, then the remaining
// backwards: PipeDream-Flush (Narayanan 2021), its interleaved variant and GPipe (every forward
// in the warm-up) share this skeleton.
template <typename PassOf>
std::vector<PipelineCompute> one_f_one_b(int total, int warmup, PassOf pass_of) {
  std::vector<PipelineCompute> order;
  order.reserve(static_cast<size_t>(2 * total));
  for (int k = 0; k < warmup; ++k) order.push_back(pass_of(k, true));
  for (int k = 0; k < total - warmup; ++k) {
    order.push_back(pass_of(warmup + k, true));
    order.push_back(pass_of(k, false));
  }
  for (int k = total - warmup; k < total; ++k) order.push_back(pass_of(k, false));
  return order;
}

// ZB-H1 (Qi 2023, sec. 3.1): 1F1B's forwards and backwards, each backward split in B and W, and
// rank r's W passes r micro-batches behind its B passes. The deferred W passes fill the bubble
// 1F1B leaves at the end of rank r (r backward times), and a rank holds at most pp micro-batches
// (warm-up pp - r - 1, plus one, plus r deferred): the first stage's 1F1B memory on every rank.
std::vector<PipelineCompute> zb_h1(int pp, int m, int rank) {
  const int warmup = std::min(pp - rank - 1, m);
  std::vector<PipelineCompute> order;
  order.reserve(static_cast<size_t>(3 * m));
  int weights = 0;
  auto backward = [&](int k) {
    order.push_back({Pass::kBackward, k, rank});
    if (k - rank >= 0) order.push_back({Pass::kWeight, weights++, rank});
  };
  for (int k = 0; k < warmup; ++k) order.push_back({Pass::kForward, k, rank});
  for (int k = 0; k < m - warmup; ++k) {
    order.push_back({Pass::kForward, warmup + k, rank});
    backward(k);
  }
  for (int k = m - warmup; k < m; ++k) backward(k);
  while (weights < m) order.push_back({Pass::kWeight, weights++, rank});
  return order;
}

// DualPipeV, DeepSeek's dualpipev.py (the "cut-in-half" DualPipe of Sea AI Lab): rank r holds
// chunk r (phase 0, going down the V) and chunk 2 pp - 1 - r (phase 1, coming back up). Each
// phase counts its micro-batches in order. A backward with zero bubble enabled leaves its weight
// gradient in a FIFO that the next W pops; any other backward is followed by its own W at once
// (DualPipe's full backward). The eight steps are dualpipev.py's, in its order; its overlapped
// F&B pairs run here one after the other, forward first.
std::vector<PipelineCompute> dual_pipe_v(int pp, int m, int rank) {
  const int chunk[2] = {rank, 2 * pp - 1 - rank};
  int forwards[2] = {0, 0};
  int backwards[2] = {0, 0};
  std::deque<PipelineCompute> deferred;
  std::vector<PipelineCompute> order;
  order.reserve(static_cast<size_t>(6 * m));
  auto F = [&](int phase) { order.push_back({Pass::kForward, forwards[phase]++, chunk[phase]}); };
  auto B = [&](int phase, bool zero_bubble) {
    const PipelineCompute b{Pass::kBackward, backwards[phase]++, chunk[phase]};
    order.push_back(b);
    const PipelineCompute w{Pass::kWeight, b.micro_batch, b.chunk};
    if (zero_bubble) {
      deferred.push_back(w);
    } else {
      order.push_back(w);
    }
  };
  auto W = [&] {
    order.push_back(deferred.front());
    deferred.pop_front();
  };
  const int below = pp - rank - 1;
  for (int i = 0; i < 2 * below; ++i) F(0);               // 1: nF0
  for (int i = 0; i < rank + 1; ++i) F(0), F(1);          // 2: nF0F1
  for (int i = 0; i < below; ++i) B(1, true), W(), F(1);  // 3: nB1W1F1
  for (int i = 0; i < m - 2 * pp + rank + 1; ++i) {       // 4: nF0B1F1B0, the steady phase
    F(0), B(1, false), F(1), B(0, false);
  }
  for (int i = 0; i < below; ++i) B(1, false), F(1), B(0, false);  // 5: nB1F1B0
  bool zero_bubble = false;  // 6: nB1B0, zero bubble from the middle on
  for (int i = 0; i < rank + 1; ++i) {
    if (i == (rank + 1) / 2 && rank % 2 == 1) zero_bubble = true;
    B(1, zero_bubble);
    if (i == (rank + 1) / 2 && rank % 2 == 0) zero_bubble = true;
    B(0, zero_bubble);
  }
  for (int i = 0; i < below; ++i) W(), B(0, true);  // 7: nWB0
  while (!deferred.empty()) W();                    // 8: nW (rank + 1 of them)
  return order;
}

}  // namespace

int pipeline_chunks(PipelineSchedule schedule, int pp, int vpp) {
  switch (schedule) {
    case PipelineSchedule::kInterleaved:
      return pp * vpp;
    case PipelineSchedule::kDualPipeV:
      return 2 * pp;
    case PipelineSchedule::kGpipe:
    case PipelineSchedule::kOneFOneB:
    case PipelineSchedule::kZbH1:
    case PipelineSchedule::kDualPipe:
      return pp;
  }
  return pp;
}

int chunk_rank(PipelineSchedule schedule, int pp, int chunk) {
  if (schedule == PipelineSchedule::kDualPipeV && chunk >= pp) return 2 * pp - 1 - chunk;
  return chunk % pp;
}

std::vector<int> rank_chunks(PipelineSchedule schedule, int pp, int vpp, int rank) {
  switch (schedule) {
    case PipelineSchedule::kInterleaved: {
      std::vector<int> chunks;
      for (int k = 0; k < vpp; ++k) chunks.push_back(k * pp + rank);
      return chunks;
    }
    case PipelineSchedule::kDualPipeV:
      return {rank, 2 * pp - 1 - rank};
    case PipelineSchedule::kDualPipe:
      if (pp - 1 - rank == rank) return {rank};
      return {std::min(rank, pp - 1 - rank), std::max(rank, pp - 1 - rank)};
    case PipelineSchedule::kGpipe:
    case PipelineSchedule::kOneFOneB:
    case PipelineSchedule::kZbH1:
      return {rank};
  }
  return {rank};
}

int warmup_forwards(PipelineSchedule schedule, int pp, int vpp, int micro_batches, int rank) {
  const int m = micro_batches;
  switch (schedule) {
    case PipelineSchedule::kGpipe:
      return m;
    case PipelineSchedule::kOneFOneB:
    case PipelineSchedule::kZbH1:
      return std::min(pp - rank - 1, m);
    case PipelineSchedule::kInterleaved:
      // Megatron-LM schedules.py, forward_backward_pipelining_with_interleaving.
      return std::min((pp - rank - 1) * 2 + (vpp - 1) * pp, m * vpp);
    case PipelineSchedule::kDualPipeV:
    case PipelineSchedule::kDualPipe:
      return (pp - rank - 1) * 2 + 2 * (rank + 1);
  }
  return m;
}

StatusOr<std::vector<PipelineCompute>> pipeline_compute_order(PipelineSchedule schedule, int pp,
                                                              int vpp, int micro_batches,
                                                              int rank) {
  const int m = micro_batches;
  if (pp < 1 || m < 1 || rank < 0 || rank >= pp) {
    return invalid_argument(
        "a pipeline needs pp >= 1, micro-batches >= 1 and a rank in 0..pp-1 "
        "(got pp {}, {} micro-batches, rank {})",
        pp, m, rank);
  }
  switch (schedule) {
    case PipelineSchedule::kGpipe:
    case PipelineSchedule::kOneFOneB:
      return one_f_one_b(m, warmup_forwards(schedule, pp, 1, m, rank), [&](int k, bool forward) {
        return PipelineCompute{forward ? Pass::kForward : Pass::kBackward, k, rank};
      });
    case PipelineSchedule::kInterleaved:
      return one_f_one_b(
          m * vpp, warmup_forwards(schedule, pp, vpp, m, rank),
          [&](int k, bool forward) { return interleaved_pass(pp, vpp, rank, k, forward); });
    case PipelineSchedule::kZbH1:
      return zb_h1(pp, m, rank);
    case PipelineSchedule::kDualPipeV:
      if (pp < 2 || m < 2 * pp) {
        return invalid_argument(
            "dualpipev needs pp >= 2 and at least 2 x pp micro-batches (got pp "
            "{}, {} micro-batches)",
            pp, m);
      }
      return dual_pipe_v(pp, m, rank);
    case PipelineSchedule::kDualPipe:
      break;
  }
  return invalid_argument(
      "{} is modelled by partrain memory only: the runner and the simulator "
      "run its V-shaped half, dualpipev",
      schedule_name(schedule));
}

int peak_chunk_activations(PipelineSchedule schedule, int pp, int vpp, int micro_batches,
                           int rank) {
  StatusOr<std::vector<PipelineCompute>> order =
      pipeline_compute_order(schedule, pp, vpp, micro_batches, rank);
  if (!order.is_ok()) return 0;
  // Activations are freed by the pass that last reads them: W when the backward is split.
  const PipelinePass frees = splits_backward(schedule) ? Pass::kWeight : Pass::kBackward;
  int held = 0, peak = 0;
  for (const PipelineCompute& c : *order) {
    if (c.pass == Pass::kForward) peak = std::max(peak, ++held);
    if (c.pass == frees) --held;
  }
  return peak;
}

}  // namespace partrain::memory
