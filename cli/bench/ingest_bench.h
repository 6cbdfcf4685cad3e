// `partrain bench ingest`: how fast the trace pipeline stores events on this machine. The SQLite
// writer alone (TraceWriter::append), then end to end as in a traced run (per-rank Recorder +
// CollectorClient threads -> Unix socket -> TraceSession's Collector -> decode -> TraceWriter),
// and what an event costs on disk. Every case is checked: stored events are counted in the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/status.h"

namespace partrain::bench {

struct IngestOptions {
  uint64_t events = 2'000'000;  // per case
  int producers = 4;            // end-to-end producer threads, one "rank" each
  std::filesystem::path dir;    // empty: a new temporary directory
  bool keep = false;            // keep the trace files (and a temporary directory)
  // Which cases run: the writer on the mix, end to end, the writer on each kind alone.
  bool writer = true;
  bool end_to_end = true;
  bool kinds = true;
};

// The event mix, per kMixPeriod events (see ingest_bench.cpp for its shape).
struct IngestMix {
  static constexpr uint64_t kMixPeriod = 1000;
  uint64_t slices = 550;
  uint64_t memory_samples = 350;
  uint64_t collectives = 99;
  uint64_t steps = 1;
};

struct IngestCase {
  std::string name;  // "writer", "writer (slices only)", ..., "end-to-end"
  std::string kind;  // "mix", "slices", "memory", "collectives"
  bool end_to_end = false;
  uint64_t events = 0;   // produced
  uint64_t stored = 0;   // counted in the file afterwards
  uint64_t dropped = 0;  // reported lost by the pipeline (ranks' drops, undecodable records)
  double seconds = 0;
  double cpu_seconds = 0;   // the process's CPU time (user + system, all threads) while timed
  // Closing the file, not in `seconds`: the final WAL checkpoint and building the deferred
  // indexes (writer cases; end to end it is inside the timed finish()).
  double close_seconds = 0;
  uint64_t file_bytes = 0;  // after the WAL is checkpointed into the file

  uint64_t lost() const { return events - stored; }
  double events_per_second() const {
    return seconds > 0 ? static_cast<double>(stored) / seconds : 0;
  }
  // CPU time per event: steadier than the rate on a machine that others share.
  double cpu_ns_per_event() const {
    return stored > 0 ? cpu_seconds * 1e9 / static_cast<double>(stored) : 0;
  }
  double bytes_per_event() const {
    return stored > 0 ? static_cast<double>(file_bytes) / static_cast<double>(stored) : 0;
  }
};

struct IngestReport {
  IngestOptions options;
  IngestMix mix;
  std::filesystem::path dir;
  std::vector<IngestCase> cases;

  // The writer alone must store every event it is given.
  uint64_t writer_lost() const;
};

StatusOr<IngestReport> run_ingest_bench(const IngestOptions& options);
std::string format_ingest_table(const IngestReport& report);
std::string format_ingest_json(const IngestReport& report);

}  // namespace partrain::bench
