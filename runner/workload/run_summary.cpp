#include "runner/workload/run_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/byte_size.h"
#include "core/json_dump.h"
#include "core/number_format.h"
#include "core/step_quantiles.h"

namespace partrain::runner {
namespace {

// The steps after the first (warm-up), as the summary's step times count them.
std::vector<double> after_warm_up(const std::vector<double>& step_seconds) {
  if (step_seconds.size() <= 1) return step_seconds;
  return {step_seconds.begin() + 1, step_seconds.end()};
}

}  // namespace

double RunSummary::step_time_median() const { return median(after_warm_up(step_seconds)); }
double RunSummary::step_time_p90() const {
  return nearest_rank_quantile(after_warm_up(step_seconds), 0.9);
}

double RunSummary::tokens_per_second() const {
  double step = step_time_median();
  return step > 0 ? static_cast<double>(tokens_per_step) / step : 0;
}

double RunSummary::gemm_share_of_run() const {
  double run_seconds = 0;
  for (double step : step_seconds) run_seconds += step;
  return run_seconds > 0 ? gemm_seconds / run_seconds : 0;
}

double RunSummary::model_flops_per_second_per_rank() const {
  const double step = step_time_median();
  return step > 0 && world > 0 ? model_flops_per_step / step / world : 0;
}

double RunSummary::gemm_flops_per_second() const {
  return gemm_seconds > 0 ? gemm_flops / gemm_seconds : 0;
}

void settle_peak(RunSummary& s) {
  const double fastest = std::max(s.model_flops_per_second_per_rank(), s.gemm_flops_per_second());
  if (fastest <= s.peak_flops_per_rank) return;
  s.peak_raised_from = s.peak_flops_per_rank;
  s.peak_source = fmt::format("the run's own fastest rate: it beat the {} peak of {} GFLOP/s",
                              s.peak_source, format_decimal(s.peak_flops_per_rank / 1e9, 1));
  s.peak_flops_per_rank = fastest;
}

double RunSummary::mfu() const {
  double step = step_time_median();
  double peak = peak_flops_per_rank * world;
  return step > 0 && peak > 0 ? model_flops_per_step / step / peak : 0;
}

std::string format_summary_text(const RunSummary& s) {
  std::string out = fmt::format("{} on {} ranks: {}\ndevice: {}, precision {}\n", s.workload,
                                s.world, s.layout, s.device, s.precision);
  out += "loss:";
  for (size_t i = 0; i < s.losses.size(); ++i) {
    out += fmt::format("{}{:.4f}", i == 0 ? " " : " -> ", s.losses[i]);
    if (s.losses.size() > 12 && i == 4) {
      out += " -> ...";
      i = s.losses.size() - 4;
    }
  }
  out += fmt::format("\nstep time: {:.1f} ms median, {:.1f} ms p90 (first step excluded)\n",
                     s.step_time_median() * 1e3, s.step_time_p90() * 1e3);
  if (s.rank_step_seconds.size() > 1) {
    out += "step time per rank:  rank      median         p90\n";
    for (size_t r = 0; r < s.rank_step_seconds.size(); ++r) {
      out += fmt::format("                    {:>5} {:>8} ms {:>8} ms\n", r,
                         format_decimal(s.rank_step_seconds[r].first * 1e3, 1),
                         format_decimal(s.rank_step_seconds[r].second * 1e3, 1));
    }
  }
  out += fmt::format(
      "throughput: {:.0f} tokens/s, {} GFLOP/s model FLOPs, MFU {} of {} GFLOP/s "
      "per rank ({})\n",
      s.tokens_per_second(), format_decimal(s.model_flops_per_second_per_rank() * s.world / 1e9, 2),
      format_percent(s.mfu()), format_decimal(s.peak_flops_per_rank / 1e9, 1), s.peak_source);
  if (s.peak_raised_from > 0) {
    out +=
        "  (MFU against a measured rate is at most 100% but not the device's; --peak-flops "
        "sets its rated peak)\n";
  }
  out += fmt::format("final parameter L2 norm: {:.6f}\n", s.final_params_l2);
  if (s.gemm_seconds > 0) {
    out += fmt::format(
        "GEMMs (rank 0): {} of the run's time, {} GFLOP/s achieved = {} of the "
        "peak\n",
        format_percent(s.gemm_share_of_run()), format_decimal(s.gemm_flops_per_second() / 1e9, 2),
        format_percent(s.gemm_flops_per_second() / s.peak_flops_per_rank, 0));
  }
  if (s.ddp_buckets > 0) {
    out += fmt::format("DDP: {} gradient buckets per step; {} of {} bucket all-reduces started "
                       "before their step's backward ended (rank 0)\n",
                       s.ddp_buckets, s.ddp_buckets_started_in_backward,
                       s.ddp_bucket_all_reduces);
  }
  for (const ExpertLayerLoad& load : s.expert_load) {
    int64_t routed = 0, busiest = 0;
    for (int64_t tokens : load.tokens_per_expert) {
      routed += tokens;
      busiest = std::max(busiest, tokens);
    }
    out += fmt::format("experts, layer {} (rank 0): {} token choices routed, the busiest expert "
                       "took {} (an even share: {}), {} dropped over capacity; load-balancing "
                       "loss {:.4f} (1: balanced)\n",
                       load.layer, routed, busiest,
                       routed / std::max<int64_t>(1, static_cast<int64_t>(load.tokens_per_expert.size())),
                       load.dropped_tokens, load.aux_loss);
  }
  // Every category, as --json has them; the total is the peak of their sum (each category
  // peaks at its own moment, so it is at most the sum of the peaks).
  std::string header = fmt::format("memory peak per rank: {:>5}", "rank");
  for (memory::Category category : memory::kAllCategories) {
    header += fmt::format(" {:>11}", memory::category_name(category));
  }
  out += header + fmt::format(" {:>11}\n", "total");
  for (size_t r = 0; r < s.memory.size(); ++r) {
    const MemoryStats& m = s.memory[r];
    std::string row = fmt::format("                      {:>5}", r);
    for (memory::Category category : memory::kAllCategories) {
      row += fmt::format(" {:>11}", format_bytes(m.peak[category]));
    }
    out += row + fmt::format(" {:>11}\n", format_bytes(m.total_peak));
  }
  out += "  (total: the peak of the sum, at most the sum of each category's peak)\n";
  return out;
}

std::string format_summary_json(const RunSummary& s) {
  nlohmann::json memory = nlohmann::json::object();
  for (size_t r = 0; r < s.memory.size(); ++r) {
    nlohmann::json rank;
    for (memory::Category category : memory::kAllCategories) {
      rank[std::string(memory::category_name(category))] = s.memory[r].peak[category];
    }
    rank["total"] = s.memory[r].total_peak;
    memory[std::to_string(r)] = rank;
  }
  nlohmann::json ranks = nlohmann::json::array();
  for (size_t r = 0; r < s.rank_step_seconds.size(); ++r) {
    ranks.push_back({{"rank", r},
                     {"step_time_ms",
                      {{"median", s.rank_step_seconds[r].first * 1e3},
                       {"p90", s.rank_step_seconds[r].second * 1e3}}}});
  }
  nlohmann::json experts = nlohmann::json::array();
  for (const ExpertLayerLoad& load : s.expert_load) {
    experts.push_back({{"layer", load.layer},
                       {"tokens_per_expert", load.tokens_per_expert},
                       {"dropped_tokens", load.dropped_tokens},
                       {"aux_loss", load.aux_loss}});
  }
  nlohmann::json doc = {
      {"workload", s.workload},
      {"ranks", ranks},
      {"layout", s.layout},
      {"device", s.device},
      {"precision", s.precision},
      {"world", s.world},
      {"losses", s.losses},
      {"final_params_l2", s.final_params_l2},
      {"tokens_per_step", s.tokens_per_step},
      {"tokens_per_s", s.tokens_per_second()},
      {"step_time_ms", {{"median", s.step_time_median() * 1e3}, {"p90", s.step_time_p90() * 1e3}}},
      {"model_flops_per_step", s.model_flops_per_step},
      {"peak_flops_per_rank", s.peak_flops_per_rank},
      {"peak_source", s.peak_source},
      {"peak_raised_from_flops_per_rank",
       s.peak_raised_from > 0 ? nlohmann::json(s.peak_raised_from) : nlohmann::json(nullptr)},
      {"mfu", s.mfu()},
      {"gemm",
       {{"seconds", s.gemm_seconds},
        {"flops", s.gemm_flops},
        {"gflops", s.gemm_seconds > 0 ? s.gemm_flops / s.gemm_seconds / 1e9 : 0.0},
        {"share_of_run", s.gemm_share_of_run()}}},
      {"memory_peak_bytes", memory},
      {"ddp",
       {{"buckets", s.ddp_buckets},
        {"bucket_all_reduces", s.ddp_bucket_all_reduces},
        {"all_reduces_started_before_backward_end", s.ddp_buckets_started_in_backward}}},
      {"expert_load", experts},
  };
  return dump_json(doc, 2) + "\n";
}

}  // namespace partrain::runner
