// The HTTP the metrics endpoint speaks, as plain functions over bytes (so a fuzzer and unit
// tests reach every branch without a socket): where a request's head ends, what it asks for,
// and the response. Only GET and HEAD of /metrics are served; anything else is answered 404,
// 405 or 400 and the connection closed. Every response closes the connection (no keep-alive:
// one scrape per connection keeps the server's state per peer to one buffer).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "metrics/exposition.h"

namespace partrain::metrics {

// Limits on what a peer may send (the head of a Prometheus scrape is ~300 bytes).
inline constexpr size_t kMaxRequestHeadBytes = 8192;
inline constexpr size_t kMaxHeaderLines = 64;

struct HttpRequest {
  std::string method;               // "GET", "HEAD", or any other token (answered 405)
  std::string path;                 // the target without its query
  bool wants_open_metrics = false;  // Accept names application/openmetrics-text with q > 0
};

struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::string body;
  bool head_only = false;     // HEAD: the headers (with the body's length) and no body
  bool allow_header = false;  // 405: say which methods are allowed
};

// The length of the request head in `received` (through its blank line), or nullopt while it is
// not complete.
std::optional<size_t> request_head_length(std::string_view received);

// The request line and headers of a complete head, or a 400 response saying what is wrong:
// a malformed request line or header, an HTTP version other than 1.0 / 1.1 (505), too many
// header lines, a request with a body (Content-Length other than 0, Transfer-Encoding).
struct ParsedHead {
  std::optional<HttpRequest> request;
  HttpResponse error;  // when request is unset
};
ParsedHead parse_request_head(std::string_view head);

// Whether an Accept header value asks for OpenMetrics: a media range
// application/openmetrics-text whose q is not 0 and not below text/plain's.
bool accepts_open_metrics(std::string_view accept);

// The answer to a parsed request: the page (in the format asked for) for GET / HEAD /metrics,
// 404 for another path, 405 for another method. `page` gives the page text in a format.
struct MetricsPage {
  std::string prometheus_text;
  std::string open_metrics_text;
  bool final = false;  // the run's end: no refresh follows it (PageRefresher::finish)
};
HttpResponse answer(const HttpRequest& request, const MetricsPage& page);

// A response for a request that never became one: 408 (head not received in time), 431 (head
// too large), 503 (too many connections).
HttpResponse refusal(int status, std::string_view why);

// Status line, headers (Content-Type, Content-Length, Connection: close, Cache-Control:
// no-store, Allow on 405) and body.
std::string serialize(const HttpResponse& response);

}  // namespace partrain::metrics
