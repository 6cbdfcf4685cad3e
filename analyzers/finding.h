// A finding of `partrain analyze`: what is wrong or worth knowing, how sure and how big (the
// evidence, in numbers with units), and what to try. Every analysis contributes its own; the
// report orders them by impact (DESIGN.md "Analyses": each finding has a severity, the evidence
// and what to try).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace partrain::analyzers {

enum class Severity { kInfo, kWarning, kCritical };
std::string_view severity_name(Severity severity);  // "info", "warning", "critical"

struct Finding {
  std::string kind;          // "straggler", "desync", "low_overlap", "pipeline_bubble", ...
  Severity severity = Severity::kInfo;
  std::optional<int> rank;   // the rank it is about, when one
  // Share of step time at stake (0..1): what ordering by impact sorts on.
  double impact = 0;
  std::string evidence;      // "rank 2 arrives last at 94% of all-reduces, 38 ms late at the median"
  std::string advice;        // what to try
};

}  // namespace partrain::analyzers
