// simulate_pipeline: every stage walks its action list in order; an action starts once the stage
// is free and its inputs exist (the forward of the same micro-batch on the previous chunk; for a
// backward, the backward on the next chunk and its own forward; for a weight pass, its
// backward). Stages are swept round-robin
// until none can advance, so the result depends only on the dependencies, never on sweep order.
#include "analyzers/pipeline_simulation.h"

#include <algorithm>
#include <optional>

#include "memory/pipeline_order.h"

namespace partrain::analyzers {
namespace {

using memory::PipelineSchedule;

Status check_input(const PipelineSimInput& in) {
  if (in.pp < 1 || in.vpp < 1 || in.micro_batches < 1) {
    return invalid_argument(
        "pipeline simulation needs pp, vpp and micro-batches >= 1 (got {}, {}, {})", in.pp,
        in.vpp, in.micro_batches);
  }
  if (in.schedule != PipelineSchedule::kInterleaved && in.vpp != 1) {
    return invalid_argument("only the interleaved schedule runs vpp > 1 chunks per stage");
  }
  if (in.schedule == PipelineSchedule::kInterleaved && in.micro_batches % in.pp != 0) {
    return invalid_argument("interleaved 1F1B needs micro-batches ({}) to be a multiple of pp ({})",
                            in.micro_batches, in.pp);
  }
  const auto stages = static_cast<size_t>(in.pp);
  if (in.forward.size() != stages || in.backward.size() != stages ||
      (!in.weight.empty() && in.weight.size() != stages)) {
    return invalid_argument(
        "pipeline simulation needs forward and backward (and weight) times for all {} stages",
        in.pp);
  }
  for (size_t s = 0; s < stages; ++s) {
    if (in.forward[s] < 0 || in.backward[s] < 0 || in.transfer < 0 || in.gap < 0 ||
        (!in.weight.empty() && in.weight[s] < 0)) {
      return invalid_argument("stage {} has a negative action time", s);
    }
  }
  // The orders' own checks (dualpipev's m >= 2 pp, dualpipe not simulated), as messages.
  RETURN_IF_ERROR(
      memory::pipeline_compute_order(in.schedule, in.pp, in.vpp, in.micro_batches, 0).status());
  return Status::ok();
}

// End times of finished actions, by (direction, micro-batch, chunk).
class Finished {
 public:
  Finished(int micro_batches, int chunks)
      : micro_batches_(micro_batches), chunks_(chunks),
        end_(2 * static_cast<size_t>(micro_batches) * static_cast<size_t>(chunks)) {}
  std::optional<double>& at(bool forward, int micro_batch, int chunk) {
    const int row = (forward ? 0 : micro_batches_) + micro_batch;
    return end_[static_cast<size_t>(row) * static_cast<size_t>(chunks_) +
                static_cast<size_t>(chunk)];
  }

 private:
  int micro_batches_;
  int chunks_;
  std::vector<std::optional<double>> end_;
};

// When the action's inputs are ready, or nullopt while one is missing.
std::optional<double> inputs_ready(Finished& done, const PipelineAction& a,
                                   const PipelineSimInput& in, int chunks) {
  double ready = 0;
  auto need = [&](bool forward, int chunk) {
    const std::optional<double>& end = done.at(forward, a.micro_batch, chunk);
    // An input from a chunk on another stage crosses a stage boundary; the chunk's own forward
    // (needed by its backward) and a neighbour on the same stage (DualPipeV's tip) do not.
    const bool crosses = memory::chunk_rank(in.schedule, in.pp, chunk) !=
                         memory::chunk_rank(in.schedule, in.pp, a.chunk);
    if (end) ready = std::max(ready, *end + (crosses ? in.transfer : 0));
    return end.has_value();
  };
  if (a.weight) {
    if (!need(false, a.chunk)) return std::nullopt;
  } else if (a.forward) {
    if (a.chunk > 0 && !need(true, a.chunk - 1)) return std::nullopt;
  } else {
    if (!need(true, a.chunk)) return std::nullopt;
    if (a.chunk + 1 < chunks && !need(false, a.chunk + 1)) return std::nullopt;
  }
  return ready;
}

}  // namespace

std::vector<PipelineAction> pipeline_stage_actions(PipelineSchedule schedule, int pp, int vpp,
                                                   int micro_batches, int stage) {
  StatusOr<std::vector<memory::PipelineCompute>> order =
      memory::pipeline_compute_order(schedule, pp, vpp, micro_batches, stage);
  std::vector<PipelineAction> actions;
  if (!order.is_ok()) return actions;
  for (const memory::PipelineCompute& c : *order) {
    actions.push_back({c.pass == memory::PipelinePass::kForward, c.micro_batch, c.chunk,
                       c.pass == memory::PipelinePass::kWeight});
  }
  return actions;
}

double PipelineSimulation::bubble_of_step(int stage) const {
  return step_time > 0 ? bubble[static_cast<size_t>(stage)] / step_time : 0;
}

double PipelineSimulation::bubble_of_ideal(int stage) const {
  const double b = busy[static_cast<size_t>(stage)];
  return b > 0 ? bubble[static_cast<size_t>(stage)] / b : 0;
}

StatusOr<PipelineSimulation> simulate_pipeline(const PipelineSimInput& in) {
  RETURN_IF_ERROR(check_input(in));
  const int vpp = in.schedule == PipelineSchedule::kInterleaved ? in.vpp : 1;
  const int chunks = memory::pipeline_chunks(in.schedule, in.pp, vpp);
  std::vector<std::vector<PipelineAction>> lists;
  for (int s = 0; s < in.pp; ++s) {
    lists.push_back(pipeline_stage_actions(in.schedule, in.pp, vpp, in.micro_batches, s));
  }
  Finished done(in.micro_batches, chunks);
  std::vector<size_t> next(lists.size(), 0);
  std::vector<double> free_at(lists.size(), 0);
  PipelineSimulation sim;
  sim.busy.assign(lists.size(), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t s = 0; s < lists.size(); ++s) {
      while (next[s] < lists[s].size()) {
        const PipelineAction& a = lists[s][next[s]];
        const std::optional<double> ready = inputs_ready(done, a, in, chunks);
        if (!ready) break;
        const double weight = in.weight.empty() ? 0 : in.weight[s];
        const double duration = a.weight ? weight : a.forward ? in.forward[s] : in.backward[s];
        const double start = std::max(*ready, free_at[s] + (next[s] > 0 ? in.gap : 0));
        free_at[s] = start + duration;
        if (!a.weight) done.at(a.forward, a.micro_batch, a.chunk) = free_at[s];
        sim.busy[s] += duration;
        sim.actions.push_back({static_cast<int>(s), a, start, free_at[s]});
        sim.step_time = std::max(sim.step_time, free_at[s]);
        ++next[s];
        progress = true;
      }
    }
  }
  for (size_t s = 0; s < lists.size(); ++s) {
    if (next[s] < lists[s].size()) {
      return failed("pipeline simulation deadlocked at stage {} action {}", s, next[s]);
    }
    sim.bubble.push_back(sim.step_time - sim.busy[s]);
  }
  return sim;
}

}  // namespace partrain::analyzers
