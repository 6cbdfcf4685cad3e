// libFuzzer target: the metrics endpoint's HTTP on arbitrary bytes, as a peer sends them. The
// head is found, parsed and answered without crashing or reading past the bytes; every answer is
// one of the statuses the endpoint gives, on a well-formed status line; and whatever bytes a
// label value holds, the rendered page keeps one sample per line.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "metrics/exposition.h"
#include "metrics/http_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace partrain::metrics;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::optional<size_t> length = request_head_length(bytes);
  if (length && (*length == 0 || *length > bytes.size())) std::abort();
  const std::string_view head = length ? bytes.substr(0, *length) : bytes;
  const ParsedHead parsed = parse_request_head(head);
  const MetricsPage page{"a 1\n", "a 1\n# EOF\n"};
  const HttpResponse response = parsed.request ? answer(*parsed.request, page) : parsed.error;
  constexpr int kStatuses[] = {200, 400, 404, 405, 431, 505};
  if (std::find(std::begin(kStatuses), std::end(kStatuses), response.status) ==
      std::end(kStatuses)) {
    std::abort();
  }
  if (response.status == 200 &&
      (parsed.request->path != "/metrics" ||
       (parsed.request->method != "GET" && parsed.request->method != "HEAD"))) {
    std::abort();
  }
  const std::string wire = serialize(response);
  if (wire.rfind("HTTP/1.1 ", 0) != 0 || wire.find("\r\n\r\n") == std::string::npos) std::abort();

  const std::vector<MetricFamily> families = {MetricFamily{
      "x", MetricType::kGauge, "", std::string(bytes), {{{{"l", std::string(bytes)}}, 1}}}};
  for (ExpositionFormat format :
       {ExpositionFormat::kPrometheusText, ExpositionFormat::kOpenMetrics}) {
    const std::string text = render(families, format);
    const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
    if (lines != (format == ExpositionFormat::kOpenMetrics ? 4u : 3u)) std::abort();
  }
  return 0;
}
