// view_model_json: the `--json` document. Units as in `partrain analyze --json`: times in ms
// (`_ms`), sizes in bytes (`_bytes`), shares in percent (`_pct`), absent values null.
#include "tui/view_model.h"

#include "analyzers/analysis_report.h"
#include "analyzers/live_hang.h"
#include "profiler/trace_reader/communicator_name.h"

namespace partrain::tui {
namespace {

using nlohmann::json;

template <typename T>
json or_null(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

json categories(const CategoryBytes& bytes) {
  json out = json::object();
  for (size_t c = 0; c < bytes.size(); ++c) {
    out[std::string(memory::category_name(memory::kAllCategories[c]))] = bytes[c];
  }
  return out;
}

// `compute_known`: analyzers::compute_recorded(model), asked once for all the rows.
json rank_json(const ViewModel& model, const RankStatus& row, bool compute_known) {
  const std::optional<int64_t> quiet = analyzers::quiet_on_timeline_ns(model, row);
  json r = {
      {"rank", row.rank},
      {"host", row.host},
      {"device", row.device},
      {"step", or_null(row.step)},
      {"step_ms", row.step ? json(ms(row.step_ns)) : json(nullptr)},
      {"loss", or_null(row.loss)},
      {"tokens_per_s", or_null(row.tokens_per_s)},
      // No memory recorded (a PyTorch job on the CPU) is unknown, as the text's '-'.
      {"memory_bytes", model.memory.contains(row.rank) ? json(row.memory_total()) : json(nullptr)},
      {"memory_by_category_bytes",
       model.memory.contains(row.rank) ? categories(row.memory_bytes) : json(nullptr)},
      {"straggler", model.analysis.straggler() == row.rank},
      {"exit_code", or_null(row.exit_code)},
      // The trace stores 0 for "no signal": null, as the text shows none (an exit with a code).
      {"exit_signal", row.exit_signal.value_or(0) != 0 ? json(*row.exit_signal) : json(nullptr)},
      // Since its latest record, on the trace's timeline, while the run is live (the overview
      // shows it as "quiet" past 2 s).
      {"quiet_ms", quiet.has_value() ? json(ms(*quiet)) : json(nullptr)}};
  if (row.breakdown && row.breakdown->window_ns > 0) {
    // Shares of the step as `partrain analyze` gives them of its window; without compute
    // recorded on any rank, compute, exposed comm and idle are unknown (null), as in analyze.
    const RankBreakdown& b = *row.breakdown;
    auto share = [&](int64_t ns) {
      return compute_known ? json(b.pct_of_window(ns)) : json(nullptr);
    };
    r["last_step"] = {{"compute_pct", share(b.compute_ns)},
                      {"exposed_comm_pct", share(b.exposed_comm_ns())},
                      {"exposed_memcpy_pct", b.pct_of_window(b.exposed_memcpy_ns())},
                      {"idle_pct", share(b.idle_ns())},
                      {"compute_recorded", compute_known}};
  } else {
    r["last_step"] = nullptr;
  }
  if (row.collective) {
    r["collective"] = {{"op", row.collective->op},
                       {"comm_id", row.collective->comm_id},
                       {"group", profiler::communicator_name(row.collective->comm_id)},
                       {"seq", row.collective->seq},
                       {"waited_ms", ms(row.collective->waited_ns)},
                       {"matched", row.collective->matched}};
  } else {
    r["collective"] = nullptr;
  }
  if (auto it = model.memory.find(row.rank); it != model.memory.end()) {
    const MemoryChart& mem = it->second;
    r["memory_peak_bytes"] = mem.peak_total;
    r["memory_estimate_bytes"] = or_null(mem.estimate_total);
  }
  return r;
}

// Whether the run looks hung, by the metrics endpoint's rule (analyzers/live_hang.h).
json hang_json(const analyzers::HangState& hang) {
  return {{"hung", hang.hung},
          {"diagnosed", hang.diagnosed},
          {"culprit", or_null(hang.culprit)},
          {"threshold_ms", ms(hang.threshold_ns)}};
}

}  // namespace

nlohmann::json view_model_json(const ViewModel& model) {
  json ranks = json::array();
  const bool compute_known = analyzers::compute_recorded(model);
  for (const RankStatus& row : model.ranks) ranks.push_back(rank_json(model, row, compute_known));
  json collectives = json::array();
  for (auto it = model.collectives.rbegin(); it != model.collectives.rend(); ++it) {
    collectives.push_back({{"comm_id", it->comm_id},
                           {"group", profiler::communicator_name(it->comm_id)},
                           {"seq", it->seq},
                           {"op", it->op},
                           {"label", it->label.empty() ? json(nullptr) : json(it->label)},
                           {"bytes", it->bytes},
                           {"group_size", it->group_size},
                           {"time_ms", ms(it->time_ns)},
                           {"busbw_gbps", or_null(it->busbw_gbps)},
                           {"skew_ms", ms(it->skew_ns)},
                           {"last_rank", it->last_rank}});
  }
  json history = json::array();
  for (const StepPoint& point : model.history) {
    history.push_back({{"step", point.step},
                       {"step_ms", ms(point.slowest_ns)},
                       {"loss", or_null(point.loss)},
                       // 0: the step's tokens are not known (a PyTorch job's), not none.
                       {"tokens", point.tokens > 0 ? json(point.tokens) : json(nullptr)}});
  }
  json findings = json::array();
  for (const analyzers::Finding& f : model.analysis.findings()) {
    findings.push_back(analyzers::finding_json(f));
  }
  return {{"trace", model.trace_path},
          {"run_id", model.run_id},
          {"status", model.status},
          {"live", model.live},
          {"world_size", model.world_size},
          {"step", or_null(model.step)},
          {"elapsed_ms", ms(model.elapsed_ns)},
          {"tokens_per_s", or_null(model.tokens_per_s)},
          {"tokens_per_s_steps", model.throughput_steps},
          {"steps", history},
          {"data_loss_events", model.data_loss_events},
          {"hang", hang_json(analyzers::judge_hang_on_timeline(model))},
          {"ranks", ranks},
          {"recent_collectives", collectives},
          {"analysis",
           {{"available", model.analysis.available()},
            {"window", model.analysis.note},
            {"straggler", or_null(model.analysis.straggler())},
            {"report", model.analysis.report ? analyzers::report_json(*model.analysis.report)
                                             : json(nullptr)}}},
          {"findings", findings}};
}

}  // namespace partrain::tui
