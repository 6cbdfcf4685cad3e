// `partrain recommend --calibrate DB`: the user's own measurements replace the presets'
// defaults. From a built-in workload's trace: how much longer compute and the optimizer step
// took than the cost model predicts for that run's own layout (an effective GEMM efficiency and
// memory bandwidth); from any trace with collectives: latency and busbw per collective, fitted
// to t = alpha + S x factor / busbw over the sizes it saw. Last, with all of those applied, the
// built-in runs' measured step against the model's prediction for it: the step scale, what the
// terms leave out.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analyzers/collective_arrivals.h"
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
  // measured over the sizes' mean transfer times (0 for an exact fit).
  double rms_error = 0;
  // False when every message was latency-sized (under 64 KiB of bus bytes): the trace says
  // nothing of bandwidth, and the link keeps the busbw it had (the preset's or another trace's).
  bool bandwidth_measured = true;
  // The matched collectives' transfers by message size, seconds from the last member's arrival
  // to the members' mean end (the waiting before the last arrival is the schedule's: see
  // ArrivalDriftFit): what the fit rests on, pooled with other traces' of the same op, link
  // level and group size into one fit over all their sizes.
  std::map<double, std::vector<double>> transfers_by_bytes;
};

// The ranks' drift (analyzers/arrival_wait.h) fitted over collectives of equal-work ranks, each
// sample by its ranks' law (chosen by where they ran: one trace's collectives after one stretch
// of work cannot tell the laws apart): over ranks that shared cores the interruptions
// (analyzers/interruption_fit.h: a random walk unless the waits after stretches of different
// lengths say how long the interruptions are), over ranks on devices of their own the rate
// spread = sum of waits / sum of e(n) since_sync.
struct ArrivalDriftFit {
  ArrivalDrift drift;
  int64_t samples = 0;
  // The root mean square of (fitted - measured) / measured over the mean wait of each kind of
  // collective (op, size, group and law): how well the drift explains syncs after short and long
  // work.
  double rms_error = 0;
  int kinds = 0;
  std::vector<ArrivalSample> arrivals;  // pooled with other traces' by apply_calibrations

  // The fit's rms as a report reads: "within 3.1% rms", and where the drift has as many fitted
  // values (jitter, interruption length, rate spread) as there are kinds to fit, that this fits
  // them exactly by construction and tests nothing of the law.
  std::string rms_text() const;
};
// nullopt when no sample waited a measurable time.
std::optional<ArrivalDriftFit> fit_arrival_drift(std::vector<ArrivalSample> arrivals);

struct Calibration {
  std::string source;                   // the trace file
  std::string run_layout;               // the traced run's layout, for the report
  std::optional<double> compute_scale;  // measured / predicted compute per step
  int compute_tp = 1;                   // the run's tensor-parallel degree
  double measured_compute_s = 0, predicted_compute_s = 0;
  // predicted_compute_s by kind: the GEMMs' part, the memory-bound part and the part a special
  // function paces (the activation on a CPU, at special_function_rate when the run measured one,
  // else the preset's); they add up to it.
  double predicted_gemm_s = 0, predicted_memory_s = 0, predicted_special_s = 0;
  // The GEMMs' part at the rate the run's own GEMMs achieved (the gemm_rate stat, the mean over
  // its ranks), with the sharing that rate already holds; 0 when the run recorded none.
  double measured_gemm_s = 0;
  std::optional<double> gemm_rate;  // FLOP/s, the mean over the run's ranks
  // The activation's special-function rate the run's cores measured at start (evaluations/s,
  // the best rank's); nullopt: the preset's stands.
  std::optional<double> special_function_rate;
  std::optional<double> optimizer_scale;  // measured / predicted optimizer step
  double measured_optimizer_s = 0, predicted_optimizer_s = 0;
  std::vector<CollectiveFit> collectives;
  std::optional<ArrivalDriftFit> arrival_drift;  // a built-in run with tp or dp groups
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

// The compute rates fitted by kind over the built-in runs: measured compute = g x predicted
// GEMMs + m x predicted memory-bound work + the special-function-paced work at the preset's
// rate (not fitted), least squares in relative error. Runs whose mixes
// differ (a tp run shards its GEMMs but not its replicated norms) pin both; with one run, or runs
// of one mix, the GEMMs keep the preset's rate (gemm_fitted false: a trace of per-block slices
// cannot tell the kinds apart) and the memory-bound rate takes the rest; when the preset's GEMMs
// alone outlast the measurement, one scale for both.
// No GEMM runs above the peak: a fit asking for a GEMM scale under `min_gemm_scale` (the
// preset's gemm_efficiency: its GEMMs at the full peak) holds it there and fits the memory-bound
// rate alone (at_peak). The special-function part is held only while it fits inside every run's
// measured compute: a rate under which it alone outlasts a run (a probe or a --gpu-file that got
// it wrong) cannot be the run's, and then every kind takes one scale (special_held false).
struct ComputeKindFit {
  double gemm_scale = 1;
  double memory_scale = 1;
  double special_scale = 1;
  bool special_held = true;
  bool gemm_fitted = false;
  // Not told apart by the runs' mixes, the GEMMs at the rate the runs' own GEMMs achieved
  // (Calibration::measured_gemm_s) rather than the preset's.
  bool gemm_measured = false;
  bool at_peak = false;
  int runs = 0;
  double rms_error = 0;  // of (fitted - measured) / measured over the runs
};
std::optional<ComputeKindFit> fit_compute_kinds(const std::vector<Calibration>& calibrations,
                                                double min_gemm_scale = 0);

// Installs the compute rates by kind (fit_compute_kinds) and the optimizer's scale (the geometric
// mean over the runs), each measured against the uncalibrated model, the fitted links (every
// trace's samples of one op, link level and group size pooled into one fit) and the arrival
// jitter (every trace's arrivals pooled). Then predicts each
// built-in run's own step with that model and sets model.step_scale to the geometric mean of
// measured / predicted, recording each in its Calibration.
void apply_calibrations(std::vector<Calibration>& calibrations, CostModel& model);
// The geometric mean of the calibrations' step scales; nullopt when none has one.
std::optional<double> combined_step_scale(const std::vector<Calibration>& calibrations);

// Least squares t = a + b x over (x, t) points, each weighted (by default 1); nullopt with fewer
// than two distinct x or when the slope is not positive. Exposed for tests.
struct LineFit {
  double intercept = 0;
  double slope = 0;
};
std::optional<LineFit> fit_line(const std::vector<std::pair<double, double>>& points,
                                const std::vector<double>& weights = {});

// The link of `fit`'s op and group size fitted to its transfers_by_bytes: busbw by least squares
// t = a + S x factor / busbw over the sizes' lower-quartile transfers, each weighted by its
// sample count (a transfer is the link plus, under load, a member descheduled while it ran:
// delays only add, so the fastest quarter shows the link), then the latency per step, alpha, from
// the mean transfers less their time at that busbw (the delays recur with every collective, as a
// latency does): of the latency-sized messages when there are some beside a measured busbw (a
// long transfer's delays grow with its length: not a per-collective cost), else of every size.
// Latency-sized messages alone fit the latency only (bandwidth_measured false); nullopt with a
// note when nothing can be fitted.
std::optional<CollectiveFit> fit_link(CollectiveFit fit, std::vector<std::string>& notes);

}  // namespace partrain::analyzers
