#include "metrics/http_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <vector>

#include "core/ascii.h"

namespace partrain::metrics {
namespace {

constexpr std::string_view kMetricsPath = "/metrics";
constexpr std::string_view kTextType = "text/plain; charset=utf-8";

std::string_view reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Error";
  }
}

HttpResponse text_response(int status, std::string body) {
  HttpResponse response;
  response.status = status;
  response.content_type = std::string(kTextType);
  response.body = std::move(body);
  response.body += '\n';
  return response;
}

// RFC 9110 token characters (methods, header names).
bool is_token(std::string_view text) {
  if (text.empty()) return false;
  return std::all_of(text.begin(), text.end(), [](unsigned char c) {
    return is_ascii_alnum(static_cast<char>(c)) ||
           std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
  });
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// The head's lines, each without its line ending (CRLF, or a bare LF as servers tolerate).
std::vector<std::string_view> split_lines(std::string_view head) {
  std::vector<std::string_view> lines;
  while (!head.empty()) {
    const size_t end = head.find('\n');
    std::string_view line = head.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (end == std::string_view::npos) break;
    head.remove_prefix(end + 1);
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

bool has_control_bytes(std::string_view text) {
  return std::any_of(text.begin(), text.end(),
                     [](unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; });
}

ParsedHead bad(int status, std::string why) { return {std::nullopt, text_response(status, why)}; }

}  // namespace

std::optional<size_t> request_head_length(std::string_view received) {
  const size_t crlf = received.find("\r\n\r\n");
  const size_t lf = received.find("\n\n");
  const size_t end = std::min(crlf == std::string_view::npos ? crlf : crlf + 4,
                              lf == std::string_view::npos ? lf : lf + 2);
  if (end == std::string_view::npos) return std::nullopt;
  return end;
}

namespace {

// A q-value in thousandths (RFC 9110 12.4.2: "0" to "1" with up to three decimals); one that does
// not read as one is taken as 1, as a client that wrote no q.
int q_thousandths(std::string_view q) {
  if (q.empty() || (q[0] != '0' && q[0] != '1')) return 1000;
  int value = (q[0] - '0') * 1000;
  if (q.size() == 1) return value;
  if (q[1] != '.' || q.size() > 5) return 1000;
  int scale = 100;
  for (char c : q.substr(2)) {
    if (!is_ascii_digit(c)) return 1000;
    value += (c - '0') * scale;
    scale /= 10;
  }
  return std::min(value, 1000);
}

}  // namespace

bool accepts_open_metrics(std::string_view accept) {
  int open_metrics = 0, plain_text = 0;  // the highest q of each, in thousandths
  while (!accept.empty()) {
    const size_t comma = accept.find(',');
    std::string_view range = accept.substr(0, comma);
    accept.remove_prefix(comma == std::string_view::npos ? accept.size() : comma + 1);
    const size_t semicolon = range.find(';');
    const std::string type = ascii_lower(trim(range.substr(0, semicolon)));
    int* best = type == "application/openmetrics-text" ? &open_metrics
                : type == "text/plain"                 ? &plain_text
                                                       : nullptr;
    if (best == nullptr) continue;
    int q = 1000;
    std::string_view params =
        semicolon == std::string_view::npos ? std::string_view() : range.substr(semicolon + 1);
    while (!params.empty()) {
      const size_t next = params.find(';');
      const std::string_view param = trim(params.substr(0, next));
      params.remove_prefix(next == std::string_view::npos ? params.size() : next + 1);
      if (param.size() >= 2 && ascii_lower(param[0]) == 'q' && param[1] == '=') {
        q = q_thousandths(param.substr(2));
      }
    }
    *best = std::max(*best, q);
  }
  // Named with q > 0 and not below text/plain's q; a tie, or only wildcards beside it, is
  // OpenMetrics, the richer format.
  return open_metrics > 0 && open_metrics >= plain_text;
}

ParsedHead parse_request_head(std::string_view head) {
  if (head.size() > kMaxRequestHeadBytes) {
    return bad(431, fmt::format("request head over {} bytes", kMaxRequestHeadBytes));
  }
  // RFC 9112 sec. 2.2: an empty line before the request line is ignored.
  if (head.starts_with("\r\n")) {
    head.remove_prefix(2);
  } else if (head.starts_with("\n")) {
    head.remove_prefix(1);
  }
  const std::vector<std::string_view> lines = split_lines(head);
  if (lines.empty()) return bad(400, "empty request");
  if (lines.size() - 1 > kMaxHeaderLines) {
    return bad(431, fmt::format("over {} header lines", kMaxHeaderLines));
  }
  // Request line: METHOD SP TARGET SP HTTP/1.x, single spaces.
  const std::string_view line = lines.front();
  const size_t first = line.find(' ');
  const size_t second = first == std::string_view::npos ? first : line.find(' ', first + 1);
  if (second == std::string_view::npos || line.find(' ', second + 1) != std::string_view::npos) {
    return bad(400, "malformed request line: expected 'GET /metrics HTTP/1.1'");
  }
  const std::string_view method = line.substr(0, first);
  std::string_view target = line.substr(first + 1, second - first - 1);
  // The absolute form (RFC 9112 sec. 3.2.2: a server MUST accept it), as a proxy or a client
  // configured with a proxy sends it: its path is the target.
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.size() > scheme.size() && ascii_lower(target.substr(0, scheme.size())) == scheme) {
      const std::string_view rest = target.substr(scheme.size());
      const size_t path = rest.find_first_of("/?");
      target = path == std::string_view::npos ? std::string_view("/") : rest.substr(path);
      if (target.front() == '?') target = "/";  // "http://h?x": the root, its query dropped
      break;
    }
  }
  const std::string_view version = line.substr(second + 1);
  if (!is_token(method)) return bad(400, "malformed request method");
  if (target.empty() || target.front() != '/' || has_control_bytes(target)) {
    return bad(400, "the request target must be a path such as /metrics");
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !is_ascii_digit(version[5]) ||
      version[6] != '.' || !is_ascii_digit(version[7])) {
    return bad(400, "malformed HTTP version");
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return bad(505, "only HTTP/1.0 and HTTP/1.1 are served");
  }
  HttpRequest request;
  request.method = std::string(method);
  request.path = std::string(target.substr(0, target.find('?')));
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view header = lines[i];
    const size_t colon = header.find(':');
    if (colon == std::string_view::npos || !is_token(header.substr(0, colon))) {
      // A line starting with whitespace is obsolete line folding (RFC 9112 says reject it).
      return bad(400, "malformed header line");
    }
    const std::string name = ascii_lower(header.substr(0, colon));
    const std::string_view value = trim(header.substr(colon + 1));
    if (has_control_bytes(value)) return bad(400, "control characters in a header value");
    if (name == "accept") {
      request.wants_open_metrics = request.wants_open_metrics || accepts_open_metrics(value);
    } else if (name == "transfer-encoding" ||
               (name == "content-length" &&
                value.find_first_not_of('0') != std::string_view::npos)) {
      return bad(400, "requests with a body are not served");
    }
  }
  return {std::move(request), {}};
}

HttpResponse answer(const HttpRequest& request, const MetricsPage& page) {
  if (request.path != kMetricsPath) {
    return text_response(404, "not found: partrain serves its metrics at /metrics");
  }
  if (request.method != "GET" && request.method != "HEAD") {
    HttpResponse response = text_response(405, "only GET and HEAD are allowed on /metrics");
    response.allow_header = true;
    return response;
  }
  HttpResponse response;
  const ExpositionFormat format = request.wants_open_metrics ? ExpositionFormat::kOpenMetrics
                                                             : ExpositionFormat::kPrometheusText;
  response.content_type = std::string(content_type(format));
  response.body = request.wants_open_metrics ? page.open_metrics_text : page.prometheus_text;
  response.head_only = request.method == "HEAD";
  return response;
}

HttpResponse refusal(int status, std::string_view why) {
  return text_response(status, std::string(why));
}

std::string serialize(const HttpResponse& response) {
  std::string out = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n"
      "Cache-Control: no-store\r\n",
      response.status, reason_phrase(response.status), response.content_type, response.body.size());
  if (response.allow_header) out += "Allow: GET, HEAD\r\n";
  out += "\r\n";
  if (!response.head_only) out += response.body;
  return out;
}

}  // namespace partrain::metrics
