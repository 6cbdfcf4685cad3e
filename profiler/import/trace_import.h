// What an import of foreign traces (Kineto JSON, Nsight Systems SQLite) is asked to do, and what
// it reports back; shared by the importers and `partrain import`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/import/collective_clock_alignment.h"

namespace partrain::profiler {

struct TraceImportOptions {
  std::vector<std::filesystem::path> inputs;
  std::filesystem::path output;
  bool overwrite = false;
  std::string step_marker;   // regular expression of step ranges (StepMarker); empty: default
  std::string command_line;  // the importing command, for the run row
  // Which profiler cycle to import when the inputs hold several files per rank (a schedule with
  // repeat, or several active cycles: a file per cycle), 1-based in each rank's time order;
  // kLastCycle the latest. Unset: several files of one rank are refused, naming the cycles.
  std::optional<int> cycle;
  static constexpr int kLastCycle = -1;
  // Told what the import is doing as it goes ("reading rank0.json.gz", 1, 8), so a command can
  // show how far an import of large traces has got; unset: nothing is told.
  std::function<void(std::string_view what, int number, int count)> progress;
};

struct ImportedRankSummary {
  int rank = 0;
  std::filesystem::path file;
  std::string host;
  std::string device;
  int64_t events = 0;  // partrain events stored for it
  int64_t steps = 0;
  RankClockFit clock;
};

struct TraceImportSummary {
  std::string run_id;
  int world_size = 0;
  std::vector<ImportedRankSummary> ranks;  // ascending rank
  std::vector<int> missing_ranks;          // ranks of the world with no file
  int64_t events = 0;
  int64_t collectives = 0;
  int64_t unmatched_collectives = 0;
  int64_t skipped_events = 0;
  uint64_t input_bytes = 0;  // the files' sizes on disk
  // Problems the trace records (stat rows), one line each, for the command to repeat on stderr.
  std::vector<std::string> warnings;
};

}  // namespace partrain::profiler
