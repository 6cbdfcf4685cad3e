#include "metrics/exposition.h"

#include <fmt/format.h>

#include <cmath>

namespace partrain::metrics {
namespace {

std::string_view type_name(MetricType type, ExpositionFormat format) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kInfo:
      // Prometheus' own format has no info type: an info is a gauge of value 1 there.
      return format == ExpositionFormat::kOpenMetrics ? "info" : "gauge";
    case MetricType::kGauge:
      break;
  }
  return "gauge";
}

std::string_view sample_suffix(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "_total";
    case MetricType::kInfo:
      return "_info";
    case MetricType::kGauge:
      break;
  }
  return "";
}

// Backslash and newline escaped, and double quotes when `quotes` (label values in both formats,
// HELP text in OpenMetrics; Prometheus' format leaves quotes in HELP as they are).
std::string escape(std::string_view text, bool quotes) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string_view content_type(ExpositionFormat format) {
  return format == ExpositionFormat::kOpenMetrics
             ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
             : "text/plain; version=0.0.4; charset=utf-8";
}

std::string escape_label_value(std::string_view value) { return escape(value, true); }

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  constexpr double kExactIntegers = 9007199254740992.0;  // 2^53
  if (value == std::trunc(value) && std::fabs(value) < kExactIntegers) {
    return fmt::format("{}", static_cast<int64_t>(value));
  }
  return fmt::format("{}", value);
}

std::string render(const std::vector<MetricFamily>& families, ExpositionFormat format) {
  const bool open_metrics = format == ExpositionFormat::kOpenMetrics;
  std::string out;
  for (const MetricFamily& family : families) {
    if (family.samples.empty()) continue;
    // Prometheus' format names the family as its samples are named.
    const std::string family_name =
        open_metrics ? family.name : family.name + std::string(sample_suffix(family.type));
    fmt::format_to(std::back_inserter(out), "# HELP {} {}\n", family_name,
                   escape(family.help, open_metrics));
    fmt::format_to(std::back_inserter(out), "# TYPE {} {}\n", family_name,
                   type_name(family.type, format));
    if (open_metrics && !family.unit.empty()) {
      fmt::format_to(std::back_inserter(out), "# UNIT {} {}\n", family_name, family.unit);
    }
    const std::string sample_name = family.name + std::string(sample_suffix(family.type));
    for (const Sample& sample : family.samples) {
      out += sample_name;
      if (!sample.labels.empty()) {
        out += '{';
        for (size_t i = 0; i < sample.labels.size(); ++i) {
          if (i > 0) out += ',';
          fmt::format_to(std::back_inserter(out), "{}=\"{}\"", sample.labels[i].first,
                         escape_label_value(sample.labels[i].second));
        }
        out += '}';
      }
      out += ' ';
      out += format_value(sample.value);
      out += '\n';
    }
  }
  if (open_metrics) out += "# EOF\n";
  return out;
}

}  // namespace partrain::metrics
