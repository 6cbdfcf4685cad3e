#include "analyzers/node_file_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>

#include "core/rank_list.h"
#include "profiler/chrome_export.h"
#include "profiler/node_trace_name.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {
namespace {

namespace fs = std::filesystem;

// The world ranks the file holds something of, and the nodes its launcher's rank rows name.
struct HeldRanks {
  std::vector<int> ranks;  // sorted
  std::set<int> nodes;
};

StatusOr<HeldRanks> held_ranks(const profiler::TraceReader& reader) {
  // The launcher's rank rows say each rank's node; a file whose launcher was killed before
  // writing them still names its ranks in its tracks.
  HeldRanks held;
  std::set<int> ranks;
  ASSIGN_OR_RETURN(const std::vector<profiler::RankRow> rank_rows, reader.ranks());
  for (const profiler::RankRow& row : rank_rows) {
    ranks.insert(row.rank);
    if (row.node) held.nodes.insert(*row.node);
  }
  ASSIGN_OR_RETURN(const std::vector<profiler::TrackRow> tracks, reader.tracks());
  for (const profiler::TrackRow& track : tracks) ranks.insert(track.rank);
  held.ranks.assign(ranks.begin(), ranks.end());
  return held;
}

// Drops the findings that take a rank the file holds nothing of for one that skipped its
// collectives (missing_collective, desync).
void drop_collective_findings_of_absent_ranks(const std::vector<int>& held,
                                              std::vector<Finding>& findings) {
  std::erase_if(findings, [&](const Finding& f) {
    const bool about_collectives = f.kind == "missing_collective" || f.kind == "desync";
    return about_collectives && f.rank && !std::binary_search(held.begin(), held.end(), *f.rank);
  });
}

}  // namespace

StatusOr<std::optional<NodeFile>> find_node_file(const profiler::TraceReader& reader) {
  ASSIGN_OR_RETURN(const bool merged, reader.is_merge());
  if (merged) return std::optional<NodeFile>();
  ASSIGN_OR_RETURN(const std::optional<profiler::RunRow> run, reader.run());
  // An imported trace's missing ranks are files the import was not given (its own finding says
  // so), not other nodes' partrain traces to merge.
  if (run && !run->imported_from.empty()) {
    return std::optional<NodeFile>();
  }
  NodeFile file;
  file.world_size = run ? run->world_size.value_or(0) : 0;
  ASSIGN_OR_RETURN(HeldRanks in_file, held_ranks(reader));
  file.ranks = std::move(in_file.ranks);
  const std::set<int>& nodes = in_file.nodes;
  const int held = static_cast<int>(file.ranks.size());
  if (held == 0 || file.world_size <= held) return std::optional<NodeFile>();
  const int nproc = run && run->nproc_per_node ? *run->nproc_per_node : held;
  if (nproc <= 0 || file.world_size % nproc != 0) return std::optional<NodeFile>();
  file.nodes = file.world_size / nproc;
  if (file.nodes < 2) return std::optional<NodeFile>();  // one node that lost ranks: not this
  file.node = nodes.size() == 1 ? *nodes.begin() : file.ranks.front() / nproc;
  file.path = sqlite3_db_filename(reader.db().get(), "main");
  file.others_beside = profiler::other_node_files_present(
      profiler::node0_trace_path(file.path, file.node), file.nodes, file.node);
  file.run_id = run ? run->run_id : "";
  return std::optional<NodeFile>(std::move(file));
}

Finding node_file_finding(const NodeFile& file) {
  const fs::path node0 = profiler::node0_trace_path(file.path, file.node);
  const std::string others = profiler::other_node_files_text(node0, file.nodes, file.node);
  fs::path merged = node0;
  merged.replace_filename(node0.stem().string() + ".merged" + node0.extension().string());
  Finding finding;
  finding.kind = "node_file";
  finding.severity = Severity::kWarning;
  finding.impact = 1;
  if (!file.others_beside) {
    // Named as the launcher names node files, the others would not be found: the run's other
    // traces are elsewhere, under names only the user knows.
    finding.evidence = fmt::format(
        "{} holds {} {} of the {} of run {}; the other ranks' traces are not beside it under "
        "the launcher's node-file names ({} absent): a `partrain trace` per host or per rank "
        "writes each to its own -o, or they were not copied here; what the other ranks did (or "
        "did not do) is not judged",
        file.path.string(), file.ranks.size() == 1 ? "rank" : "ranks", format_rank_list(file.ranks),
        file.world_size, file.run_id.empty() ? "(no id)" : file.run_id, others);
    finding.advice = fmt::format(
        "merge every trace of run {} and analyze the merged one: partrain merge {} <the other "
        "traces> -o {} && partrain analyze {}",
        file.run_id.empty() ? "(no id)" : file.run_id, file.path.string(), merged.string(),
        merged.string());
    return finding;
  }
  finding.evidence = fmt::format(
      "{} is node {}'s trace file of a run of {} nodes: it holds ranks {} of {}; the other "
      "ranks are in the other nodes' files ({}), not read here, so what they did (or did not "
      "do) is not judged",
      file.path.string(), file.node, file.nodes, format_rank_list(file.ranks), file.world_size,
      others);
  finding.advice = fmt::format(
      "merge the nodes' files and analyze the merged trace: partrain "
      "merge {} -o {} && partrain analyze {}",
      profiler::node_files_merge_arguments(node0, file.nodes), merged.string(), merged.string());
  return finding;
}

Status add_node_file_finding(const profiler::TraceReader& reader,
                             std::vector<Finding>& findings) {
  ASSIGN_OR_RETURN(const std::optional<profiler::RunRow> run, reader.run());
  if (run && !run->imported_from.empty()) {
    // The ranks whose files the import was not given: its import_missing_ranks finding says so.
    ASSIGN_OR_RETURN(const HeldRanks held, held_ranks(reader));
    drop_collective_findings_of_absent_ranks(held.ranks, findings);
    return Status::ok();
  }
  ASSIGN_OR_RETURN(std::optional<NodeFile> file, find_node_file(reader));
  if (!file) return Status::ok();
  drop_collective_findings_of_absent_ranks(file->ranks, findings);
  findings.push_back(node_file_finding(*file));
  return Status::ok();
}

}  // namespace partrain::analyzers
