#include "profiler/step_marker.h"

#include <charconv>

namespace partrain::profiler {

StatusOr<StepMarker> StepMarker::compile(std::string_view expression) {
  try {
    return StepMarker(std::regex(expression.begin(), expression.end(), std::regex::ECMAScript),
                      expression == kDefaultStepMarker);
  } catch (const std::regex_error& error) {
    return invalid_argument("--step-marker '{}' is not a regular expression ({}); the default is "
                            "'{}'",
                            expression, error.what(), kDefaultStepMarker);
  }
}

std::optional<int64_t> StepMarker::step_of(std::string_view range_name) {
  const bool profiler_step = default_expression_ && range_name.starts_with("ProfilerStep#");
  if (not_markers_.contains(range_name)) {
    if (profiler_step) ++unnumbered_;
    return std::nullopt;
  }
  std::match_results<std::string_view::const_iterator> match;
  if (!std::regex_search(range_name.begin(), range_name.end(), match, expression_)) {
    if (not_markers_.size() < kMaxRememberedNames) not_markers_.emplace(range_name);
    if (profiler_step) ++unnumbered_;
    return std::nullopt;
  }
  const int64_t ordinal = steps_seen_++;
  if (match.size() > 1 && match[1].matched) {
    int64_t step = 0;
    const std::string_view digits(&*match[1].first, static_cast<size_t>(match[1].length()));
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
    if (error == std::errc() && end == digits.data() + digits.size()) return step;
    ++renumbered_;
  }
  return ordinal;
}

}  // namespace partrain::profiler
