// The parts of an imported trace that every source shares: its ranks (where each file's clock
// sits on the run's timeline, its steps, its host), and storing the run, rank, step and
// collective rows and the import's own problems through the TraceWriter.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "profiler/import/collective_clock_alignment.h"
#include "profiler/import/trace_import.h"
#include "profiler/trace_event.h"
#include "profiler/trace_writer.h"

namespace partrain::profiler {

struct StepSpan {
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

struct ImportedRank {
  int rank = 0;
  std::filesystem::path file;
  std::string host;  // "" when the file does not say
  // Ranks of one clock domain (a host; one nsys session) share a clock and are never shifted
  // against each other; "" is a domain of its own.
  std::string clock_domain;
  int64_t pid = 0;
  std::string device = "cpu";
  // The file's clock moved onto the reference file's (their time bases' difference), which the
  // reader already applied, and the correction the matched collectives gave.
  int64_t shift_ns = 0;
  RankClockFit clock;
  std::vector<StepSpan> steps;  // ascending start, on the reference file's clock
  int64_t events = 0;

  // The step whose span holds `ns` (the reference file's clock), -1 for none.
  int64_t step_at(int64_t ns) const;
  int64_t on_timeline(int64_t ns) const { return ns + clock.offset_ns; }
};

// What the run row says of an import.
struct ImportedRunDescription {
  std::string source;   // "kineto", "nsys"
  std::string backend;  // "gloo", "nccl", "" when not known
  int world_size = 0;
  int64_t reference_unix_ns = 0;  // Unix time of the reference clock's zero
  std::vector<std::filesystem::path> files;
  std::string command_line;
  // Every file says the profiler recorded shapes (torch.profiler's record_shapes=True): a
  // collective stored without a size was not sized by the trace, not left unrecorded.
  bool record_shapes = false;
};

// Fits each rank's clock to the reference host's from the collectives' ends (ranks of one host
// keep its clock); notes ranks no collective links to it.
void fit_rank_clocks(std::vector<ImportedRank>& ranks, std::vector<CollectiveEnd> ends,
                     std::vector<std::string>& warnings);

// The run row (run id from the first event's time), one rank row per rank (node and local rank
// from the hosts in order of their lowest rank), and the stats of missing ranks and of clocks
// left unaligned. `first_ns`/`last_ns`: the events' extent on the timeline.
void append_run_and_ranks(TraceWriter& writer, const ImportedRunDescription& run,
                          const std::vector<ImportedRank>& ranks,
                          const std::vector<int>& missing_ranks, int64_t first_ns,
                          std::string& run_id);
// Each rank's steps, moved onto the timeline.
int64_t append_steps(TraceWriter& writer, const std::vector<ImportedRank>& ranks);
// The collectives (times on the reference file's clock) moved onto the timeline, with their
// steps; returns how many.
int64_t append_collectives(TraceWriter& writer, const std::vector<ImportedRank>& ranks,
                           std::map<int, std::vector<CollectiveRecord>>& collectives);
struct UnmatchedCollectives {
  int rank = 0;
  int64_t count = 0;
  std::string why;  // "process groups '0' or '1' hold the same ranks ..."
};
// One stat row per rank for collectives left unmatched (`import_unmatched_collectives`), its
// description giving each reason; returns how many collectives.
int64_t append_unmatched(TraceWriter& writer, const std::vector<UnmatchedCollectives>& unmatched,
                         std::vector<std::string>& warnings);

// The ranks of the world that have no rank among `ranks`, with a warning naming them.
std::vector<int> missing_ranks(const std::vector<ImportedRank>& ranks, int world_size,
                               std::vector<std::string>& warnings);

// What the import reports of each rank, ascending.
std::vector<ImportedRankSummary> rank_summaries(const std::vector<ImportedRank>& ranks);

const ImportedRank* find_rank(const std::vector<ImportedRank>& ranks, int rank);

}  // namespace partrain::profiler
