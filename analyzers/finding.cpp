// Names of finding severities, as text and JSON print them.
#include "analyzers/finding.h"

namespace partrain::analyzers {

std::string_view severity_name(Severity severity) {
  switch (severity) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kCritical: return "critical";
  }
  return "info";
}

}  // namespace partrain::analyzers
