#include "profiler/import/imported_run.h"

#include <algorithm>
#include <ctime>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/rank_list.h"
#include "profiler/missing_ranks_stat.h"

namespace partrain::profiler {
namespace {

std::string run_id_at(int64_t unix_ns) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ns / 1'000'000'000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%d-%H%M%S", &utc);
  return text;
}

}  // namespace

int64_t ImportedRank::step_at(int64_t ns) const {
  auto after = std::upper_bound(steps.begin(), steps.end(), ns,
                                [](int64_t t, const StepSpan& s) { return t < s.start_ns; });
  if (after == steps.begin()) return -1;
  const StepSpan& span = *(after - 1);
  return ns < span.end_ns ? span.step : -1;
}

std::vector<int> missing_ranks(const std::vector<ImportedRank>& ranks, int world_size,
                               std::vector<std::string>& warnings) {
  std::set<int> present;
  for (const ImportedRank& r : ranks) present.insert(r.rank);
  std::vector<int> missing;
  for (int r = 0; r < world_size; ++r) {
    if (!present.contains(r)) missing.push_back(r);
  }
  if (!missing.empty()) {
    warnings.push_back(fmt::format("{} of {} {} no trace: the imported trace says so",
                                   ranks_phrase(missing), world_size,
                                   missing.size() == 1 ? "has" : "have"));
  }
  return missing;
}

std::vector<ImportedRankSummary> rank_summaries(const std::vector<ImportedRank>& ranks) {
  std::vector<ImportedRankSummary> out;
  for (const ImportedRank& r : ranks) {
    ImportedRankSummary s;
    s.rank = r.rank;
    s.file = r.file;
    s.host = r.host;
    s.device = r.device;
    s.events = r.events;
    s.steps = static_cast<int64_t>(r.steps.size());
    s.clock = r.clock;
    out.push_back(std::move(s));
  }
  return out;
}

const ImportedRank* find_rank(const std::vector<ImportedRank>& ranks, int rank) {
  for (const ImportedRank& r : ranks) {
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

void fit_rank_clocks(std::vector<ImportedRank>& ranks, std::vector<CollectiveEnd> ends,
                     std::vector<std::string>& warnings) {
  std::map<int, std::string> domains;
  for (const ImportedRank& r : ranks) domains[r.rank] = r.clock_domain;
  const auto fits = align_clocks_by_collectives(domains, std::move(ends));
  std::vector<int> unaligned;
  for (ImportedRank& r : ranks) {
    r.clock = fits.at(r.rank);
    if (!r.clock.aligned) unaligned.push_back(r.rank);
  }
  if (!unaligned.empty()) {
    warnings.push_back(fmt::format(
        "{} {} on another host than rank {} and no collective that ends together on every "
        "member (all_reduce, all_gather, reduce_scatter, all_to_all, barrier) links them: {} "
        "left as {} give{} {}",
        ranks_phrase(unaligned), unaligned.size() == 1 ? "is" : "are", ranks.front().rank,
        unaligned.size() == 1 ? "its clock is" : "their clocks are",
        unaligned.size() == 1 ? "its file" : "their files", unaligned.size() == 1 ? "s" : "",
        unaligned.size() == 1 ? "it" : "them"));
  }
}

void append_run_and_ranks(TraceWriter& writer, const ImportedRunDescription& run,
                          const std::vector<ImportedRank>& ranks,
                          const std::vector<int>& missing_ranks, int64_t first_ns,
                          std::string& run_id) {
  const int64_t start_unix_ns = run.reference_unix_ns + first_ns;
  run_id = fmt::format("{}-{}", run.source, run_id_at(start_unix_ns));
  nlohmann::json config = {{"imported_from", run.source}, {"world_size", run.world_size}};
  if (!run.backend.empty()) config["backend"] = run.backend;
  if (run.record_shapes) config["record_shapes"] = true;
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : run.files) files.push_back(f.string());
  config["files"] = std::move(files);
  RunInfo info;
  info.run_id = run_id;
  info.command = run.command_line;
  info.config_json = config.dump();
  info.world_size = run.world_size;
  info.start_unix_ns = start_unix_ns;
  info.start_ns = first_ns;
  writer.append(info);

  // Nodes: hosts (else clock domains: one nsys session) in order of their lowest rank; a rank
  // with neither is a node alone.
  std::map<std::string, int> node_of_host;
  std::map<int, int> ranks_on_node;
  int nodes = 0;
  std::vector<int> unaligned;
  for (const ImportedRank& r : ranks) {
    int node = 0;
    const std::string& machine = r.host.empty() ? r.clock_domain : r.host;
    if (machine.empty()) {
      node = nodes++;
    } else {
      auto [it, inserted] = node_of_host.try_emplace(machine, nodes);
      if (inserted) ++nodes;
      node = it->second;
    }
    RankInfo rank;
    rank.rank = r.rank;
    rank.node = node;
    rank.local_rank = ranks_on_node[node]++;
    rank.host = r.host;
    rank.pid = r.pid;
    rank.device = r.device;
    rank.clock_offset_ns = r.shift_ns + r.clock.offset_ns;
    rank.clock_uncertainty_ns = r.clock.uncertainty_ns;
    writer.append(rank);
    if (!r.clock.aligned) unaligned.push_back(r.rank);
  }
  if (!missing_ranks.empty()) {
    writer.append(
        StatEvent{std::string(kMissingRanksStat), -1, static_cast<int64_t>(missing_ranks.size()),
                  StatSeverity::kDataLoss,
                  missing_ranks_description(ranks_phrase(missing_ranks), run.world_size)});
  }
  for (int rank : unaligned) {
    writer.append(StatEvent{"import_clock_unaligned", rank, 1, StatSeverity::kDataLoss,
                            "no matched collective links this rank's host to the reference "
                            "host: its times are its file's own, unaligned"});
  }
}

int64_t append_steps(TraceWriter& writer, const std::vector<ImportedRank>& ranks) {
  int64_t stored = 0;
  for (const ImportedRank& r : ranks) {
    std::set<int64_t> seen;
    for (const StepSpan& s : r.steps) {
      if (!seen.insert(s.step).second) continue;
      StepEvent step;
      step.rank = r.rank;
      step.step = s.step;
      step.ts_ns = r.on_timeline(s.start_ns);
      step.dur_ns = s.end_ns - s.start_ns;
      // No trace says the loss: stored as NULL (a NaN's binding), as a live run's steps without
      // one are, never as a loss of 0.
      step.loss = std::numeric_limits<double>::quiet_NaN();
      writer.append(step);
      ++stored;
    }
  }
  return stored;
}

int64_t append_collectives(TraceWriter& writer, const std::vector<ImportedRank>& ranks,
                           std::map<int, std::vector<CollectiveRecord>>& collectives) {
  int64_t stored = 0;
  std::vector<TraceEvent> batch;
  for (auto& [rank_number, records] : collectives) {
    const ImportedRank* rank = find_rank(ranks, rank_number);
    if (rank == nullptr) continue;
    for (CollectiveRecord& record : records) {
      CollectiveEvent& c = record.event;
      record.step = rank->step_at(c.start_ns);
      c.enqueue_ns = rank->on_timeline(c.enqueue_ns);
      c.start_ns = rank->on_timeline(c.start_ns);
      c.end_ns = rank->on_timeline(c.end_ns);
      if (record.gpu_start_ns >= 0) record.gpu_start_ns = rank->on_timeline(record.gpu_start_ns);
      if (record.gpu_end_ns >= 0) record.gpu_end_ns = rank->on_timeline(record.gpu_end_ns);
      batch.emplace_back(std::move(record));
      if (batch.size() >= 4096) {
        writer.append(batch);
        batch.clear();
      }
      ++stored;
    }
  }
  writer.append(batch);
  return stored;
}

int64_t append_unmatched(TraceWriter& writer, const std::vector<UnmatchedCollectives>& unmatched,
                         std::vector<std::string>& warnings) {
  std::map<int, std::pair<int64_t, std::vector<std::string>>> by_rank;
  int64_t total = 0;
  for (const UnmatchedCollectives& u : unmatched) {
    auto& [count, reasons] = by_rank[u.rank];
    count += u.count;
    reasons.push_back(fmt::format("{}: {}", u.count, u.why));
    total += u.count;
  }
  for (const auto& [rank, entry] : by_rank) {
    const std::string why = fmt::format("{}", fmt::join(entry.second, "; "));
    writer.append(StatEvent{"import_unmatched_collectives", rank, entry.first, StatSeverity::kInfo,
                            fmt::format("collectives left unmatched across ranks (each on a "
                                        "communicator of its own, unmatched:rank{}): {}",
                                        rank, why)});
    warnings.push_back(
        fmt::format("rank {}: {} collectives left unmatched: {}", rank, entry.first, why));
  }
  return total;
}

}  // namespace partrain::profiler
