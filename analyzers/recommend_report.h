// What `partrain recommend` prints: the ranked table, --explain (why the winner wins, why the
// runners-up and the common alternatives lose, with numbers), and --json with the same facts.
#pragma once

#include <string>
#include <vector>

#include "analyzers/calibration.h"
#include "analyzers/layout_search.h"

namespace partrain::analyzers {

struct RecommendContext {
  std::string model;  // preset name or "custom"
  std::string gpu;
  int gpus = 1;
  int gpus_per_node = 8;
  int64_t global_batch = 1;
  int64_t seq = 1;
  std::vector<Calibration> calibrations;
  double search_seconds = 0;
};

// One of explain's "common alternatives": the best of a family, or why none of it fits.
struct Alternative {
  std::string name;  // "data parallel only (ZeRO-0)"
  SearchResult result;
};

std::string format_recommend_text(const RecommendContext& context, const SearchResult& result,
                                  size_t top);
std::string format_explain_text(const SearchResult& result, const std::vector<Alternative>& alternatives,
                                size_t runners_up);
std::string format_recommend_json(const RecommendContext& context, const SearchResult& result,
                                  size_t top);
// --check: one layout, fitting or not.
std::string format_check_text(const RecommendContext& context, const Candidate& candidate);
std::string format_check_json(const RecommendContext& context, const Candidate& candidate);
// What each --calibrate trace replaced, for the text report.
std::string format_calibration_text(const std::vector<Calibration>& calibrations);

// The term of `slower` that grew most over `winner`'s, as "bubble +0.41 s".
std::string largest_loss(const StepCost& winner, const StepCost& slower);

}  // namespace partrain::analyzers
