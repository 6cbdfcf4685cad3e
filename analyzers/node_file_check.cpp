#include "analyzers/node_file_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>

#include "profiler/chrome_export.h"
#include "profiler/node_trace_name.h"

namespace partrain::analyzers {
namespace {

namespace fs = std::filesystem;
using profiler::SqliteStatement;

// The single number `sql` selects, or nullopt for NULL / no row.
StatusOr<std::optional<int64_t>> number(const profiler::SqliteDb& db, std::string_view sql) {
  ASSIGN_OR_RETURN(SqliteStatement stmt, SqliteStatement::prepare(db, sql));
  if (stmt.step() != SQLITE_ROW || stmt.column_is_null(0)) return std::optional<int64_t>();
  return std::optional<int64_t>(stmt.column_int(0));
}

std::string file_list(const std::vector<fs::path>& files) {
  std::string text;
  for (const fs::path& file : files) text += (text.empty() ? "" : ", ") + file.string();
  return text;
}

}  // namespace

StatusOr<std::optional<NodeFile>> find_node_file(const profiler::SqliteDb& db) {
  ASSIGN_OR_RETURN(auto merged,
                   number(db, "SELECT count(*) FROM meta WHERE key = 'merged_from'"));
  if (merged.value_or(0) > 0) return std::optional<NodeFile>();
  ASSIGN_OR_RETURN(auto world, number(db, "SELECT world_size FROM runs"));
  NodeFile file;
  file.world_size = static_cast<int>(world.value_or(0));
  std::set<int> nodes;
  {
    // The launcher's rank rows say each rank's node; a file whose launcher was killed before
    // writing them still names its ranks in its tracks.
    ASSIGN_OR_RETURN(SqliteStatement stmt,
                     SqliteStatement::prepare(db, "SELECT rank, node FROM ranks UNION "
                                                  "SELECT DISTINCT rank, NULL FROM tracks"));
    std::set<int> ranks;
    while (stmt.step() == SQLITE_ROW) {
      ranks.insert(static_cast<int>(stmt.column_int(0)));
      if (!stmt.column_is_null(1)) nodes.insert(static_cast<int>(stmt.column_int(1)));
    }
    file.ranks.assign(ranks.begin(), ranks.end());
  }
  const int held = static_cast<int>(file.ranks.size());
  if (held == 0 || file.world_size <= held) return std::optional<NodeFile>();
  ASSIGN_OR_RETURN(auto per_node,
                   number(db, "SELECT json_extract(config, '$.nproc_per_node') FROM runs "
                              "WHERE json_valid(config)"));
  const int nproc = static_cast<int>(per_node.value_or(held));
  if (nproc <= 0 || file.world_size % nproc != 0) return std::optional<NodeFile>();
  file.nodes = file.world_size / nproc;
  if (file.nodes < 2) return std::optional<NodeFile>();  // one node that lost ranks: not this
  file.node = nodes.size() == 1 ? *nodes.begin() : file.ranks.front() / nproc;
  file.path = sqlite3_db_filename(db.get(), "main");
  const fs::path node0 = profiler::node0_trace_path(file.path, file.node);
  for (int n = 0; n < file.nodes; ++n) {
    if (n != file.node) file.others.push_back(profiler::node_trace_path(node0, n));
  }
  return std::optional<NodeFile>(std::move(file));
}

Finding node_file_finding(const NodeFile& file) {
  const fs::path node0 = profiler::node0_trace_path(file.path, file.node);
  std::string all;
  for (int n = 0; n < file.nodes; ++n) all += " " + profiler::node_trace_path(node0, n).string();
  fs::path merged = node0;
  merged.replace_filename(node0.stem().string() + ".merged" + node0.extension().string());
  Finding finding;
  finding.kind = "node_file";
  finding.severity = Severity::kWarning;
  finding.impact = 1;
  finding.evidence = fmt::format(
      "{} is node {}'s trace file of a run of {} nodes: it holds ranks {} of {}; the other "
      "ranks are in the other nodes' files ({}), not read here, so what they did (or did not "
      "do) is not judged",
      file.path.string(), file.node, file.nodes, profiler::format_rank_ranges(file.ranks),
      file.world_size, file_list(file.others));
  finding.advice = fmt::format("merge the nodes' files and analyze the merged trace: partrain "
                               "merge{} -o {} && partrain analyze {}",
                               all, merged.string(), merged.string());
  return finding;
}

Status add_node_file_finding(const profiler::SqliteDb& db, std::vector<Finding>& findings) {
  ASSIGN_OR_RETURN(std::optional<NodeFile> file, find_node_file(db));
  if (!file) return Status::ok();
  std::erase_if(findings, [&](const Finding& f) {
    const bool about_collectives = f.kind == "missing_collective" || f.kind == "desync";
    return about_collectives && f.rank &&
           !std::binary_search(file->ranks.begin(), file->ranks.end(), *f.rank);
  });
  findings.push_back(node_file_finding(*file));
  return Status::ok();
}

}  // namespace partrain::analyzers
