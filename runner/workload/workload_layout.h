// How the built-in workloads take a parallel layout. The layout, its vocabulary and its one set
// of rules are memory's (memory/training_layout.h); the runner adds the `--strategy` shorthands,
// a check of what running a resolved layout needs beyond those rules (the vocabulary split over
// tp, the MLP's layer pairs, no context parallelism) and the summary line.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "memory/training_layout.h"
#include "memory/workload_model.h"

namespace partrain::runner {

using memory::PipelineSchedule;
using memory::Recompute;
using memory::ResolvedLayout;
using memory::TrainingLayout;
using memory::WorkloadKind;
using memory::WorkloadModel;

// The layout's names in `partrain launch`'s messages (it has no --cp) and in a worker's, which
// reads PARTRAIN_WORKLOAD_CONFIG.
memory::LayoutNames launch_flag_names();
memory::LayoutNames worker_config_names();

// The degrees a strategy shorthand sets, as given beside it (unset: not given).
struct GivenDegrees {
  std::optional<int> tp = std::nullopt;
  std::optional<int> pp = std::nullopt;
  std::optional<int> zero = std::nullopt;
};
// Applies `--strategy ddp|zero1|zero2|fsdp|tp|sp|pp` to a layout on `world` ranks;
// kInvalidArgument when a degree the shorthand sets was given with another value, also its
// default (`--strategy tp --tp 1`).
Status apply_strategy(std::string_view strategy, const GivenDegrees& given, int world,
                      TrainingLayout& layout);

// What running a resolved layout needs beyond memory's rules: the vocab-parallel embedding and
// cross-entropy split the vocabulary over tp, Megatron's MLP pairs a column-parallel layer with a
// row-parallel one, and the workloads run no context parallelism. kInvalidArgument in `names`.
Status check_runnable(const ResolvedLayout& layout, WorkloadKind kind, const WorkloadModel& model,
                      const memory::LayoutNames& names);

// "dp=2 tp=2 pp=1 zero=0 micro-batch=1 global-batch=4 (2 micro-batches)": for logs and summaries.
std::string describe_layout(const ResolvedLayout& layout);

}  // namespace partrain::runner
