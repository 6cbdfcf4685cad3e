// What the dashboard shows is the live run the analyzers keep (analyzers/live_run.h): its
// status, a row per rank, recent matched collectives, memory over time, recent slices and the
// analysis report `partrain analyze` prints. The views (views.h) draw it, and `partrain top
// --json` prints it (view_model_json), so the dashboard and analyze agree on every number.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "analyzers/live_run.h"

namespace partrain::tui {

using ViewModel = analyzers::LiveRun;
using analyzers::Activity;
using analyzers::CategoryBytes;
using analyzers::kMemoryCategories;
using analyzers::LiveAnalysis;
using analyzers::MatchedCollective;
using analyzers::MemoryChart;
using analyzers::MemoryPoint;
using analyzers::RankBreakdown;
using analyzers::RankCollective;
using analyzers::RankStatus;
using analyzers::StepMark;
using analyzers::StepPoint;
using analyzers::TimelineSlice;
using analyzers::total_bytes;

// `partrain top --json`: the run, the ranks, recent collectives, memory now/peak/estimate, the
// findings and the analysis report (as `partrain analyze --json` prints it); times in ms
// (`_ms`), sizes in bytes (`_bytes`), absent values null.
nlohmann::json view_model_json(const ViewModel& model);

}  // namespace partrain::tui
