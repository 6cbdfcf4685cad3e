// analyze_memory_vs_estimate: each rank's memory_events are replayed in time order (a counter per
// category: bytes in use from ts_ns on), keeping every category's peak and the peak of their sum.
// Peaks cover the whole run, not only the window: weights and optimizer states are allocated
// before the first step and a peak is a peak wherever it falls.
#include "analyzers/memory_vs_estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "analyzers/workload_run_config.h"
#include "core/byte_size.h"
#include "core/number_format.h"
#include "core/rank_list.h"
#include "memory/memory_estimate.h"
#include "profiler/chrome_export.h"
#include "profiler/trace_reader/memory_reads.h"
#include "profiler/trace_reader/trace_codes.h"

namespace partrain::analyzers {
namespace {

using memory::Category;
using profiler::TraceReader;

constexpr size_t kCategories = memory::kAllCategories.size();

std::array<std::optional<double>, kCategories> stage_estimate(const memory::StageMemory& s) {
  std::array<std::optional<double>, kCategories> out;
  out[static_cast<size_t>(Category::kParams)] = s.params;
  out[static_cast<size_t>(Category::kGrads)] = s.grads;
  out[static_cast<size_t>(Category::kOptimizer)] = s.optimizer;
  out[static_cast<size_t>(Category::kActivations)] = s.activations;
  out[static_cast<size_t>(Category::kComm)] = s.comm;
  return out;
}

// Replays the rank's samples: per-category peaks, the peak of the sum, which categories appear.
Status measure_peaks(const TraceReader& reader, RankMemory& out,
                     std::array<double, kCategories>& peaks, std::array<bool, kCategories>& seen) {
  static_assert(profiler::kMemoryCategoryCount == kCategories);
  ASSIGN_OR_RETURN(profiler::RankMemoryCursor samples, profiler::rank_memory(reader, out.rank));
  std::array<double, kCategories> now{};
  double total = 0;
  profiler::MemoryLevel sample;
  while (samples.next(sample)) {
    const size_t c = sample.category;  // memory::Category's value
    const auto bytes = static_cast<double>(sample.bytes);
    total += bytes - now[c];
    now[c] = bytes;
    peaks[c] = std::max(peaks[c], bytes);
    seen[c] = true;
    out.recorded = true;
    out.peak_total_bytes = std::max(out.peak_total_bytes, total);
  }
  return samples.status();
}

}  // namespace

std::optional<double> CategoryPeak::error_pct() const {
  if (!estimate_bytes || *estimate_bytes <= 0) return std::nullopt;
  return 100 * (peak_bytes - *estimate_bytes) / *estimate_bytes;
}

StatusOr<MemoryVsEstimate> analyze_memory_vs_estimate(const TraceReader& reader,
                                                      const AnalysisWindow& window) {
  MemoryVsEstimate report;
  ASSIGN_OR_RETURN(std::optional<WorkloadRunConfig> config, read_workload_run_config(reader));
  std::optional<memory::MemoryEstimate> estimate;
  if (!config) {
    report.estimate_note = "not a built-in workload run: peaks only";
  } else {
    StatusOr<memory::EstimateInput> input = workload_estimate_input(*config);
    StatusOr<memory::MemoryEstimate> e =
        input.is_ok() ? memory::estimate_memory(*input) : StatusOr<memory::MemoryEstimate>(input.status());
    if (e.is_ok()) {
      estimate = std::move(e).value();
      report.has_estimate = true;
      const memory::TrainingLayout& l = config->resolved.layout;
      report.estimate_note = fmt::format(
          "estimate for the {} workload in {}, dp {} tp {} pp {}{} zero {}{} (no "
          "reserve)",
          memory::workload_kind_name(config->kind), config->precision, l.dp, l.tp, l.pp,
          l.ep > 1 ? fmt::format(" ep {}", l.ep) : "", l.zero,
          memory::zero_replicas(l) > 1 ? fmt::format(" shard {}", memory::zero_shard_ranks(l))
                                       : "");
    } else {
      report.estimate_note = fmt::format("no estimate: {}", e.status().message());
    }
  }
  ASSIGN_OR_RETURN(const std::optional<profiler::RunRow> run, reader.run());
  report.imported = run && !run->imported_from.empty();
  ASSIGN_OR_RETURN(const std::vector<profiler::StatRow> stats, reader.stats());
  for (const profiler::StatRow& stat : stats) {
    if (stat.name == "import_cpu_memory_relative" && stat.rank &&
        std::find(window.ranks.begin(), window.ranks.end(), *stat.rank) != window.ranks.end()) {
      report.relative_ranks.push_back(*stat.rank);
    }
  }
  std::sort(report.relative_ranks.begin(), report.relative_ranks.end());
  for (int rank : window.ranks) {
    RankMemory row;
    row.rank = rank;
    row.pp_stage = config ? config->pp_stage(rank) : 0;
    std::array<double, kCategories> peaks{};
    std::array<bool, kCategories> seen{};
    RETURN_IF_ERROR(measure_peaks(reader, row, peaks, seen));
    std::array<std::optional<double>, kCategories> predicted{};
    if (estimate && static_cast<size_t>(row.pp_stage) < estimate->stages.size()) {
      const memory::StageMemory& stage = estimate->stages[static_cast<size_t>(row.pp_stage)];
      predicted = stage_estimate(stage);
      row.estimate_total_bytes = stage.total() - stage.reserve;
    }
    for (size_t c = 0; c < kCategories; ++c) {
      if (!seen[c] && !predicted[c]) continue;
      row.categories.push_back({memory::kAllCategories[c], peaks[c], predicted[c]});
    }
    report.ranks.push_back(std::move(row));
  }
  return report;
}

namespace {

constexpr double kBigShare = 0.10;    // a category holding at least this share of the rank's peak
constexpr double kErrorPct = 20.0;    // off by more than this

std::string byte_cell(double value) {
  return format_bytes(static_cast<uint64_t>(std::max(0.0, value)));
}

std::string pct_cell(std::optional<double> pct) {
  if (!pct) return "-";
  return (*pct > 0 ? "+" : "") + format_decimal(*pct, 1) + "%";
}

}  // namespace

namespace {

// How far a category is off, in percent of the estimate; infinite where the estimate has none of
// a category the run used (a 0 that no percentage measures).
double miss_pct(const CategoryPeak& c) {
  if (const std::optional<double> pct = c.error_pct()) return std::abs(*pct);
  const bool none_estimated = c.estimate_bytes && *c.estimate_bytes <= 0 && c.peak_bytes > 0;
  return none_estimated ? std::numeric_limits<double>::infinity() : 0;
}

}  // namespace

std::vector<Finding> memory_vs_estimate_findings(const MemoryVsEstimate& report) {
  // One finding per category, about the rank where it is off the most.
  std::vector<Finding> findings;
  for (Category category : memory::kAllCategories) {
    const RankMemory* worst_rank = nullptr;
    const CategoryPeak* worst = nullptr;
    for (const RankMemory& rank : report.ranks) {
      for (const CategoryPeak& c : rank.categories) {
        const double miss = miss_pct(c);
        const double big = std::max(c.peak_bytes, c.estimate_bytes.value_or(0));
        if (c.category != category || miss <= kErrorPct ||
            big < kBigShare * rank.peak_total_bytes) {
          continue;
        }
        if (worst == nullptr || miss > miss_pct(*worst)) {
          worst = &c;
          worst_rank = &rank;
        }
      }
    }
    if (worst == nullptr) continue;
    Finding f;
    f.kind = "memory_estimate_error";
    f.severity = Severity::kWarning;
    f.rank = worst_rank->rank;
    f.impact = 0;  // a modelling gap, not step time at stake
    f.evidence =
        fmt::format("{} on rank {} (stage {}) peaks at {}, the estimate says {} ({})",
                    memory::category_name(category), worst_rank->rank, worst_rank->pp_stage,
                    byte_cell(worst->peak_bytes), byte_cell(*worst->estimate_bytes),
                    worst->error_pct() ? pct_cell(worst->error_pct()) : std::string("it has none"));
    f.advice = "trust the measured peak when sizing this layout; check the run's precision, "
               "recompute and schedule match the estimate, or report the gap (memory/ estimator)";
    findings.push_back(std::move(f));
  }
  return findings;
}

namespace {

// Two ranks whose rows would read the same: same stage, same figures in every category.
bool same_figures(const RankMemory& a, const RankMemory& b) {
  if (a.pp_stage != b.pp_stage || a.peak_total_bytes != b.peak_total_bytes ||
      a.estimate_total_bytes != b.estimate_total_bytes ||
      a.categories.size() != b.categories.size()) {
    return false;
  }
  for (size_t i = 0; i < a.categories.size(); ++i) {
    const CategoryPeak& x = a.categories[i];
    const CategoryPeak& y = b.categories[i];
    if (x.category != y.category || x.peak_bytes != y.peak_bytes ||
        x.estimate_bytes != y.estimate_bytes) {
      return false;
    }
  }
  return true;
}

// A rank with nothing recorded and nothing estimated has no row: its peak is unknown.
bool has_row(const RankMemory& rank) { return rank.recorded || rank.estimate_total_bytes; }

// The ranks with a row grouped by identical figures, each group in rank order, groups by their
// first rank: a dp replica's ranks read the same, and one block ("0-3") says so instead of four.
std::vector<std::vector<const RankMemory*>> identical_rank_groups(const MemoryVsEstimate& report) {
  std::vector<std::vector<const RankMemory*>> groups;
  for (const RankMemory& rank : report.ranks) {
    if (!has_row(rank)) continue;
    auto same = std::find_if(groups.begin(), groups.end(),
                             [&](const auto& group) { return same_figures(*group.front(), rank); });
    if (same == groups.end()) {
      groups.push_back({&rank});
    } else {
      same->push_back(&rank);
    }
  }
  return groups;
}

}  // namespace

std::string memory_unrecorded_reason(bool imported) {
  return imported
             ? "the imported profile holds no [memory] events: profile with "
               "torch.profiler(profile_memory=True)"
             : "partrain records a PyTorch job's memory from the CUDA caching allocator, and a "
               "built-in workload's by category; a CPU job has none";
}

namespace {

std::string relative_memory_note(const std::vector<int>& ranks) {
  return fmt::format(
      "{} {}: torch.profiler's CPU memory samples count what was allocated after profiling "
      "began (its first sample starts near 0 B), so the peak is a change, not the bytes in use: "
      "the parameters and optimizer states allocated before are not in it",
      ranks.size() == 1 ? "rank" : "ranks", format_rank_list(ranks));
}

}  // namespace

std::string format_memory_vs_estimate(const MemoryVsEstimate& report) {
  std::string out = fmt::format("Memory peak vs estimate ({})\n", report.estimate_note);
  std::vector<int> unrecorded;
  for (const RankMemory& rank : report.ranks) {
    if (!has_row(rank)) unrecorded.push_back(rank.rank);
  }
  if (!unrecorded.empty()) {
    std::sort(unrecorded.begin(), unrecorded.end());
    out +=
        fmt::format("no memory recorded on {} {}: {}\n", unrecorded.size() == 1 ? "rank" : "ranks",
                    format_rank_list(unrecorded), memory_unrecorded_reason(report.imported));
  }
  if (!report.relative_ranks.empty()) out += relative_memory_note(report.relative_ranks) + "\n";
  const auto groups = identical_rank_groups(report);
  if (groups.empty()) return out;
  std::vector<std::string> rank_cells;
  size_t width = 5;
  for (const auto& group : groups) {
    std::vector<int> ranks;
    for (const RankMemory* rank : group) ranks.push_back(rank->rank);
    std::sort(ranks.begin(), ranks.end());
    rank_cells.push_back(format_rank_list(ranks));
    width = std::max(width, rank_cells.back().size());
  }
  auto line = [&](std::string_view ranks, std::string_view stage, std::string_view category,
                  const std::string& peak, const std::string& estimate, const std::string& error) {
    return fmt::format("{:>{}}  {:>5}  {:<11}  {:>12}  {:>12}  {:>8}\n", ranks, width, stage,
                       category, peak, estimate, error);
  };
  out += line("ranks", "stage", "category", "peak", "estimate", "error");
  for (size_t g = 0; g < groups.size(); ++g) {
    const RankMemory& rank = *groups[g].front();
    const std::string stage = std::to_string(rank.pp_stage);
    for (const CategoryPeak& c : rank.categories) {
      out += line(rank_cells[g], stage, memory::category_name(c.category), byte_cell(c.peak_bytes),
                  c.estimate_bytes ? byte_cell(*c.estimate_bytes) : std::string("-"),
                  pct_cell(c.error_pct()));
    }
    const std::optional<double> total_pct =
        rank.estimate_total_bytes && *rank.estimate_total_bytes > 0
            ? std::optional<double>(100 * (rank.peak_total_bytes - *rank.estimate_total_bytes) /
                                    *rank.estimate_total_bytes)
            : std::nullopt;
    out +=
        line(rank_cells[g], stage, "total", byte_cell(rank.peak_total_bytes),
             rank.estimate_total_bytes ? byte_cell(*rank.estimate_total_bytes) : std::string("-"),
             pct_cell(total_pct));
  }
  return out;
}

nlohmann::json memory_vs_estimate_json(const MemoryVsEstimate& report) {
  // Bytes are whole: an estimate shared over ranks (ZeRO-3 over 3) is rounded, as memory's are.
  auto bytes = [](double v) { return static_cast<int64_t>(std::llround(v)); };
  auto optional_bytes = [&](std::optional<double> v) {
    return v ? nlohmann::json(bytes(*v)) : nlohmann::json(nullptr);
  };
  auto optional = [](std::optional<double> v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankMemory& rank : report.ranks) {
    nlohmann::json categories = nlohmann::json::object();
    for (const CategoryPeak& c : rank.categories) {
      categories[std::string(memory::category_name(c.category))] = {
          {"peak_bytes", bytes(c.peak_bytes)},
          {"estimate_bytes", optional_bytes(c.estimate_bytes)},
          {"error_pct", optional(c.error_pct())}};
    }
    const bool relative =
        std::binary_search(report.relative_ranks.begin(), report.relative_ranks.end(), rank.rank);
    std::string note;  // the text's line about this rank's memory, if any
    if (!rank.recorded) {
      note = memory_unrecorded_reason(report.imported);
    } else if (relative) {
      note = relative_memory_note({rank.rank});
    }
    ranks.push_back(
        {{"rank", rank.rank},
         {"pp_stage", rank.pp_stage},
         {"estimate_note", report.estimate_note},
         {"recorded", rank.recorded},
         {"relative", relative},
         {"note", note},
         {"peak_total_bytes",
          rank.recorded ? nlohmann::json(bytes(rank.peak_total_bytes)) : nlohmann::json(nullptr)},
         {"estimate_total_bytes", optional_bytes(rank.estimate_total_bytes)},
         {"categories", std::move(categories)}});
  }
  return ranks;  // the report's "memory" list, one entry per rank
}

}  // namespace partrain::analyzers
