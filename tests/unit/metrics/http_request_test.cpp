#include "metrics/http_request.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cctype>
#include <clocale>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/support/scratch_dir.h"

namespace partrain::metrics {
namespace {

// The Accept header Prometheus 2.x sends with every scrape.
constexpr char kPrometheusAccept[] =
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

const MetricsPage kPage{"prom 1\n", "open 1\n# EOF\n"};

HttpResponse respond_to(const std::string& head) {
  const ParsedHead parsed = parse_request_head(head);
  return parsed.request ? answer(*parsed.request, kPage) : parsed.error;
}

TEST(HttpRequest, HeadEndsAtTheBlankLine) {
  EXPECT_FALSE(request_head_length("GET /metrics HTTP/1.1\r\nHost: x\r\n"));
  EXPECT_EQ(request_head_length("GET /metrics HTTP/1.1\r\n\r\nextra"), 25u);
  EXPECT_EQ(request_head_length("GET /metrics HTTP/1.0\n\n"), 23u);
}

TEST(HttpRequest, PrometheusScrapeGetsOpenMetrics) {
  const HttpResponse response = respond_to(std::string("GET /metrics HTTP/1.1\r\nHost: h:9400\r\n"
                                                       "Accept: ") +
                                           kPrometheusAccept + "\r\n\r\n");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.content_type, content_type(ExpositionFormat::kOpenMetrics));
  EXPECT_EQ(response.body, kPage.open_metrics_text);
}

TEST(HttpRequest, PlainClientsGetPrometheusText) {
  for (const char* accept : {"", "Accept: */*\r\n", "Accept: text/plain\r\n",
                             "Accept: application/openmetrics-text;q=0\r\n",
                             "Accept: application/openmetrics-text; q=0.0, text/plain\r\n"}) {
    const HttpResponse response =
        respond_to(std::string("GET /metrics?x=1 HTTP/1.1\r\n") + accept + "\r\n");
    EXPECT_EQ(response.status, 200) << accept;
    EXPECT_EQ(response.content_type, content_type(ExpositionFormat::kPrometheusText)) << accept;
    EXPECT_EQ(response.body, kPage.prometheus_text) << accept;
  }
}

TEST(HttpRequest, HeadAnswersHeadersWithTheBodysLength) {
  const HttpResponse response = respond_to("HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(response.status, 200);
  const std::string wire = serialize(response);
  EXPECT_NE(wire.find("Content-Length: 7\r\n"), std::string::npos) << wire;
  EXPECT_EQ(wire.substr(wire.size() - 4), "\r\n\r\n") << wire;  // no body
}

TEST(HttpRequest, OtherPathsAre404AndOtherMethods405WithAllow) {
  EXPECT_EQ(respond_to("GET / HTTP/1.1\r\n\r\n").status, 404);
  EXPECT_EQ(respond_to("GET /metricsx HTTP/1.1\r\n\r\n").status, 404);
  EXPECT_EQ(respond_to("GET /Metrics HTTP/1.1\r\n\r\n").status, 404);
  const HttpResponse post = respond_to("POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(post.status, 405);
  EXPECT_NE(serialize(post).find("Allow: GET, HEAD\r\n"), std::string::npos);
  EXPECT_EQ(respond_to("DELETE /metrics HTTP/1.1\r\n\r\n").status, 405);
}

TEST(HttpRequest, MalformedRequestsAre400) {
  for (const char* head :
       {"\r\n\r\n", "GET\r\n\r\n", "GET /metrics\r\n\r\n", "GET  /metrics HTTP/1.1\r\n\r\n",
        "GET /metrics HTTP/1.1 extra\r\n\r\n", "G(T /metrics HTTP/1.1\r\n\r\n",
        "GET metrics HTTP/1.1\r\n\r\n", "GET ftp://h/metrics HTTP/1.1\r\n\r\n",
        "GET /met\x01rics HTTP/1.1\r\n\r\n", "GET /metrics HTTX/1.1\r\n\r\n",
        "GET /metrics HTTP/1.1\r\nno colon\r\n\r\n", "GET /metrics HTTP/1.1\r\n folded: x\r\n\r\n",
        "GET /metrics HTTP/1.1\r\nBad Name: x\r\n\r\n",
        "GET /metrics HTTP/1.1\r\nAccept: a\x01\r\n\r\n",
        "GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\n",
        "GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"}) {
    EXPECT_EQ(respond_to(head).status, 400) << head;
  }
  EXPECT_EQ(respond_to("GET /metrics HTTP/2.0\r\n\r\n").status, 505);
}

// RFC 9112: the absolute form is accepted (sec. 3.2.2, a MUST), and an empty line before the
// request line ignored (sec. 2.2).
TEST(HttpRequest, AbsoluteFormAndALeadingEmptyLineAreServed) {
  EXPECT_EQ(respond_to("GET http://127.0.0.1:9464/metrics HTTP/1.1\r\n\r\n").status, 200);
  EXPECT_EQ(respond_to("GET HTTPS://node7/metrics?x=1 HTTP/1.1\r\n\r\n").status, 200);
  EXPECT_EQ(respond_to("GET http://node7 HTTP/1.1\r\n\r\n").status, 404);  // the path is /
  EXPECT_EQ(respond_to("GET http://node7/other HTTP/1.1\r\n\r\n").status, 404);
  EXPECT_EQ(respond_to("\r\nGET /metrics HTTP/1.1\r\n\r\n").status, 200);
}

TEST(HttpRequest, OversizedHeadsAre431) {
  std::string many = "GET /metrics HTTP/1.1\r\n";
  for (size_t i = 0; i <= kMaxHeaderLines; ++i) many += "X-A: b\r\n";
  EXPECT_EQ(respond_to(many + "\r\n").status, 431);
  const std::string long_head =
      "GET /metrics HTTP/1.1\r\nX: " + std::string(kMaxRequestHeadBytes, 'a') + "\r\n\r\n";
  EXPECT_EQ(respond_to(long_head).status, 431);
}

TEST(HttpRequest, EveryResponseClosesTheConnection) {
  const std::string wire = serialize(respond_to("GET /nothing HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(wire.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u) << wire;
  EXPECT_NE(wire.find("Connection: close\r\n"), std::string::npos);
  EXPECT_NE(wire.find("/metrics"), std::string::npos);  // the body says where to go
}

TEST(HttpRequest, AcceptParsing) {
  EXPECT_TRUE(accepts_open_metrics(kPrometheusAccept));
  EXPECT_TRUE(accepts_open_metrics("APPLICATION/OpenMetrics-Text"));
  EXPECT_FALSE(accepts_open_metrics("application/openmetrics-text;q=0.000"));
  EXPECT_FALSE(accepts_open_metrics("application/openmetrics-textual"));
  EXPECT_FALSE(accepts_open_metrics(""));
}

// The client's preference by q (RFC 9110 12.5.1): Prometheus configured with
// scrape_protocols: [PrometheusText0.0.4, OpenMetricsText1.0.0] sends text/plain with the higher
// q, and got OpenMetrics because it was named with q > 0. A tie, or wildcards beside it, keeps
// OpenMetrics; a q that does not read as one counts as 1.
TEST(HttpRequest, AcceptPrefersTheHigherQ) {
  EXPECT_FALSE(accepts_open_metrics(
      "application/openmetrics-text; version=1.0.0; q=0.5, text/plain; version=0.0.4; q=1"));
  EXPECT_FALSE(accepts_open_metrics(
      "text/plain;version=0.0.4;q=0.5,application/openmetrics-text;version=1.0.0;q=0.4,*/*;q=0.1"));
  EXPECT_FALSE(accepts_open_metrics("text/plain, application/openmetrics-text; q=0.3"));
  EXPECT_TRUE(accepts_open_metrics("text/plain;q=0.5, application/openmetrics-text;q=0.501"));
  EXPECT_TRUE(accepts_open_metrics("text/plain, application/openmetrics-text"));
  EXPECT_TRUE(accepts_open_metrics("application/openmetrics-text;q=0.2, */*"));
  EXPECT_TRUE(accepts_open_metrics("application/openmetrics-text;q=abc, text/plain;q=0.9"));
  EXPECT_TRUE(accepts_open_metrics("application/openmetrics-text;q=0.001"));
}

// The dashboard sets LC_CTYPE from the user's environment (ncurses' wide characters), and the
// launcher serves the metrics in that process. Under tr_TR.UTF-8, std::tolower('I') is 'I', so
// "ACCEPT: APPLICATION/OPENMETRICS-TEXT" read as another header and a scrape got Prometheus text.
// The locale is built from the `locales` package's sources (the Makefile installs them).
TEST(HttpRequest, HeaderNamesAndMediaTypesAreCaseInsensitiveUnderATurkishLocale) {
  const std::filesystem::path source = "/usr/share/i18n/locales/tr_TR";
  if (!std::filesystem::exists(source)) GTEST_SKIP() << source << " missing (Debian's locales)";
  testing::ScratchDir dir;
  const std::string made = dir.path().string() + "/tr_TR.UTF-8";
  const std::string command = "localedef -i tr_TR -f UTF-8 '" + made + "' >/dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  ::setenv("LOCPATH", dir.path().c_str(), 1);
  ASSERT_NE(std::setlocale(LC_CTYPE, "tr_TR.UTF-8"), nullptr);
  const bool turkish_i = std::tolower('I') != 'i';  // the locale bites, as in the dashboard
  const HttpResponse response = respond_to(
      "GET /metrics HTTP/1.1\r\nHOST: h\r\nACCEPT: APPLICATION/OPENMETRICS-TEXT\r\n\r\n");
  std::setlocale(LC_CTYPE, "C");
  ::unsetenv("LOCPATH");
  EXPECT_TRUE(turkish_i);
  EXPECT_EQ(response.content_type, content_type(ExpositionFormat::kOpenMetrics));
}

}  // namespace
}  // namespace partrain::metrics
