// The text formats Prometheus scrapes: its own 0.0.4 text format and OpenMetrics 1.0, from one
// list of metric families. The two differ in how a counter's and an info's samples are named
// (OpenMetrics names the family without `_total` / `_info`), in `# UNIT` lines and in the
// closing `# EOF`; label escaping and numbers are written alike.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace partrain::metrics {

enum class ExpositionFormat { kPrometheusText, kOpenMetrics };

// The Content-Type header value of a response in `format`.
std::string_view content_type(ExpositionFormat format);

enum class MetricType { kGauge, kCounter, kInfo };

struct Sample {
  std::vector<std::pair<std::string, std::string>> labels;  // name, value (any bytes)
  double value = 0;
};

// One family: `name` as OpenMetrics names it (a counter without `_total`, an info without
// `_info`); `unit` is its base unit ("seconds", "bytes"), which then ends the name; empty for
// none. Families without samples are left out of the page.
struct MetricFamily {
  std::string name;
  MetricType type = MetricType::kGauge;
  std::string unit;
  std::string help;
  std::vector<Sample> samples;
};

// The page: every family with samples, in order, its HELP and TYPE (and UNIT for OpenMetrics)
// lines then one line per sample; OpenMetrics ends with "# EOF".
std::string render(const std::vector<MetricFamily>& families, ExpositionFormat format);

// A label value escaped for both formats: backslash, double quote and newline.
std::string escape_label_value(std::string_view value);
// A sample value: integers exactly up to 2^53, others with the shortest round-tripping digits,
// NaN and +Inf / -Inf as both formats spell them.
std::string format_value(double value);

}  // namespace partrain::metrics
