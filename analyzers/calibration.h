// `partrain recommend --calibrate DB`: the user's own measurements replace the presets'
// defaults. From a built-in workload's trace: how much longer compute and the optimizer step
// took than the cost model predicts for that run's own layout (an effective GEMM efficiency and
// memory bandwidth); from any trace with collectives: latency and busbw per collective, fitted
// to t = alpha + S x factor / busbw over the sizes it saw. Last, with all of those applied, the
// built-in runs' measured step against the model's prediction for it: the step scale, what the
// terms leave out.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analyzers/step_cost.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

struct CollectiveFit {
  CostedOp op = CostedOp::kAllReduce;
  LinkLevel level = LinkLevel::kIntraNode;
  int group_size = 0;   // the ranks of the groups it was measured on
  int sizes = 0;        // distinct message sizes fitted
  int64_t samples = 0;  // matched collectives
  Link link;            // latency per step and busbw
  // How well the link fits what was measured: the root mean square of (fitted - measured) /
  // measured over the sizes' median times (0 for one size, which it fits exactly).
  double rms_error = 0;
};

struct Calibration {
  std::string source;                   // the trace file
  std::string run_layout;               // the traced run's layout, for the report
  std::optional<double> compute_scale;  // measured / predicted compute per step
  int compute_tp = 1;                   // the run's tensor-parallel degree: the scale's class
  double measured_compute_s = 0, predicted_compute_s = 0;
  std::optional<double> optimizer_scale;  // measured / predicted optimizer step
  double measured_optimizer_s = 0, predicted_optimizer_s = 0;
  std::vector<CollectiveFit> collectives;
  std::vector<std::string> notes;  // what could not be calibrated from this trace, and why

  // A built-in workload's run: what predicting its own step again needs (its model, precision,
  // layout and placement), and the median over the window of its slowest rank's step.
  struct OwnRun {
    memory::ModelConfig model;
    memory::PrecisionRecipe recipe;
    memory::MemoryEstimate estimate;
    Machines machines;
    double measured_step_s = 0;
  };
  std::optional<OwnRun> own_run;
  // Filled by apply_calibrations: the run's step predicted with every calibration applied, and
  // measured / predicted.
  double predicted_step_s = 0;
  std::optional<double> step_scale;
};

// `uncalibrated` gives the peak, preset efficiency and bandwidths the prediction is made with;
// the trace's own model and layout come from its run config. kUnreadable naming the case when
// the trace holds nothing to calibrate from.
StatusOr<Calibration> measure_calibration(const profiler::TraceReader& reader,
                                          const std::string& source, const CostModel& uncalibrated,
                                          int skip_steps = 1);

// Scales the compute speed per tensor-parallel degree (CostModel::compute_scale_by_tp: the
// geometric mean of the scales of the traces with that degree) and the optimizer's (of all),
// each measured against the uncalibrated model, and installs the fitted links (of several fits of
// one op, link level and group size, the one from the most samples). Then predicts each
// built-in run's own step with that model and sets model.step_scale to the geometric mean of
// measured / predicted, recording each in its Calibration.
void apply_calibrations(std::vector<Calibration>& calibrations, CostModel& model);
// The geometric mean of the calibrations' step scales; nullopt when none has one.
std::optional<double> combined_step_scale(const std::vector<Calibration>& calibrations);

// Least squares t = a + b x over (x, t) points; nullopt with fewer than two distinct x or when
// the slope is not positive. Exposed for tests.
struct LineFit {
  double intercept = 0;
  double slope = 0;
};
std::optional<LineFit> fit_line(const std::vector<std::pair<double, double>>& points);

}  // namespace partrain::analyzers
