// `partrain recommend --calibrate DB`: the user's own measurements replace the presets'
// defaults. From a built-in workload's trace: how much longer compute and the optimizer step
// took than the cost model predicts for that run's own layout (an effective GEMM efficiency and
// memory bandwidth); from any trace with collectives: latency and busbw per collective, fitted
// to t = alpha + S x factor / busbw over the sizes it saw.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analyzers/step_cost.h"
#include "profiler/sqlite_db.h"

namespace partrain::analyzers {

struct CollectiveFit {
  CostedOp op = CostedOp::kAllReduce;
  LinkLevel level = LinkLevel::kIntraNode;
  int group_size = 0;   // the ranks of the groups it was measured on
  int sizes = 0;        // distinct message sizes fitted
  int64_t samples = 0;  // matched collectives
  Link link;            // latency per step and busbw
};

struct Calibration {
  std::string source;                 // the trace file
  std::string run_layout;             // the traced run's layout, for the report
  std::optional<double> compute_scale;    // measured / predicted compute per step
  double measured_compute_s = 0, predicted_compute_s = 0;
  std::optional<double> optimizer_scale;  // measured / predicted optimizer step
  double measured_optimizer_s = 0, predicted_optimizer_s = 0;
  std::vector<CollectiveFit> collectives;
  std::vector<std::string> notes;     // what could not be calibrated from this trace, and why
};

// `uncalibrated` gives the peak, preset efficiency and bandwidths the prediction is made with;
// the trace's own model and layout come from its run config. kUnreadable naming the case when
// the trace holds nothing to calibrate from.
StatusOr<Calibration> measure_calibration(const profiler::SqliteDb& db, const std::string& source,
                                          const CostModel& uncalibrated, int skip_steps = 1);

// Scales the compute and optimizer speeds (by the geometric mean of the traces' scales, each
// measured against the uncalibrated model) and installs the fitted links (of several fits of
// one op, link level and group size, the one from the most samples).
void apply_calibrations(const std::vector<Calibration>& calibrations, CostModel& model);

// Least squares t = a + b x over (x, t) points; nullopt with fewer than two distinct x or when
// the slope is not positive. Exposed for tests.
struct LineFit {
  double intercept = 0;
  double slope = 0;
};
std::optional<LineFit> fit_line(const std::vector<std::pair<double, double>>& points);

}  // namespace partrain::analyzers
