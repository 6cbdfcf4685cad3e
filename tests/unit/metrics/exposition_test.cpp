#include "metrics/exposition.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace partrain::metrics {
namespace {

std::vector<MetricFamily> sample_families() {
  return {
      MetricFamily{"partrain_run", MetricType::kInfo, "", "The run", {{{{"run_id", "r1"}}, 1}}},
      MetricFamily{"partrain_dropped_events", MetricType::kCounter, "", "Lost events", {{{}, 7}}},
      MetricFamily{"partrain_step_duration_seconds",
                   MetricType::kGauge,
                   "seconds",
                   "Step time",
                   {{{{"rank", "0"}}, 0.25}, {{{"rank", "1"}}, 1.5}}},
      MetricFamily{"partrain_empty", MetricType::kGauge, "", "Nothing yet", {}},
  };
}

TEST(Exposition, PrometheusTextNamesCountersAndInfosByTheirSamples) {
  const std::string text = render(sample_families(), ExpositionFormat::kPrometheusText);
  EXPECT_EQ(text,
            "# HELP partrain_run_info The run\n"
            "# TYPE partrain_run_info gauge\n"
            "partrain_run_info{run_id=\"r1\"} 1\n"
            "# HELP partrain_dropped_events_total Lost events\n"
            "# TYPE partrain_dropped_events_total counter\n"
            "partrain_dropped_events_total 7\n"
            "# HELP partrain_step_duration_seconds Step time\n"
            "# TYPE partrain_step_duration_seconds gauge\n"
            "partrain_step_duration_seconds{rank=\"0\"} 0.25\n"
            "partrain_step_duration_seconds{rank=\"1\"} 1.5\n");
}

TEST(Exposition, OpenMetricsNamesFamiliesWithoutSuffixesAddsUnitsAndEndsWithEof) {
  const std::string text = render(sample_families(), ExpositionFormat::kOpenMetrics);
  EXPECT_EQ(text,
            "# HELP partrain_run The run\n"
            "# TYPE partrain_run info\n"
            "partrain_run_info{run_id=\"r1\"} 1\n"
            "# HELP partrain_dropped_events Lost events\n"
            "# TYPE partrain_dropped_events counter\n"
            "partrain_dropped_events_total 7\n"
            "# HELP partrain_step_duration_seconds Step time\n"
            "# TYPE partrain_step_duration_seconds gauge\n"
            "# UNIT partrain_step_duration_seconds seconds\n"
            "partrain_step_duration_seconds{rank=\"0\"} 0.25\n"
            "partrain_step_duration_seconds{rank=\"1\"} 1.5\n"
            "# EOF\n");
}

TEST(Exposition, AnEmptyPageIsJustTheTerminator) {
  EXPECT_EQ(render({}, ExpositionFormat::kOpenMetrics), "# EOF\n");
  EXPECT_EQ(render({}, ExpositionFormat::kPrometheusText), "");
}

TEST(Exposition, LabelValuesAndHelpAreEscaped) {
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  const std::vector<MetricFamily> families = {
      MetricFamily{"x", MetricType::kGauge, "", "line\nbreak \\ \"q\"", {{{{"comm", "w\"1"}}, 2}}}};
  EXPECT_EQ(render(families, ExpositionFormat::kPrometheusText),
            "# HELP x line\\nbreak \\\\ \"q\"\n# TYPE x gauge\nx{comm=\"w\\\"1\"} 2\n");
  EXPECT_EQ(render(families, ExpositionFormat::kOpenMetrics),
            "# HELP x line\\nbreak \\\\ \\\"q\\\"\n# TYPE x gauge\nx{comm=\"w\\\"1\"} 2\n# EOF\n");
}

TEST(Exposition, ValuesAreExactIntegersOrShortestDecimals) {
  EXPECT_EQ(format_value(0), "0");
  EXPECT_EQ(format_value(-3), "-3");
  EXPECT_EQ(format_value(4294967296.0), "4294967296");
  EXPECT_EQ(format_value(0.1), "0.1");
  EXPECT_EQ(std::stod(format_value(1.0 / 3)), 1.0 / 3);  // round-trips
  EXPECT_EQ(format_value(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
}

TEST(Exposition, ContentTypesAreTheOnesPrometheusNegotiates) {
  EXPECT_EQ(content_type(ExpositionFormat::kPrometheusText),
            "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(content_type(ExpositionFormat::kOpenMetrics),
            "application/openmetrics-text; version=1.0.0; charset=utf-8");
}

}  // namespace
}  // namespace partrain::metrics
