// The metrics port under whatever a client sends (issue 52): every HTTP method, odd and long
// paths, headers beyond reason, bytes that are no HTTP at all, HTTP/1.0 and pipelined requests,
// each sent to a training task and its answer read by Python's own HTTP parser
// (support/http_requests.py); and a client that sends half a request and stops, while another
// scrapes. The task must answer each, and train on to its end.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "support/metrics_page.h"
#include "support/process.h"
#include "support/ps_cluster.h"
#include "support/raw_client.h"
#include "support/temp_dir.h"

namespace dtrain {
namespace {

using testing::concat;
using testing::DtrainProcess;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Training slow enough (--step_delay_ms) to outlast what the test sends it.
std::vector<std::string> port_training(int steps) {
  return concat(testing::with_flag(testing::softmax_flags(), "--log_every", "50"),
                {"--train_steps", std::to_string(steps), "--step_delay_ms", "4"});
}

// One connection's bytes, the method of each request in them (for the parser: a HEAD's answer
// has no body), and the status of each answer expected, in order; none: the server closes the
// connection without an answer, as it does to bytes that are not HTTP once they have been idle
// for its timeout (they cost a descriptor that long, as a half-sent request does).
struct RequestShape {
  std::string name;
  std::string bytes;
  std::vector<std::string> methods;
  std::vector<int> statuses;
};

std::string http(const std::string& method, const std::string& target,
                 const std::string& version = "HTTP/1.1", const std::string& extra = "") {
  return fmt::format("{} {} {}\r\nHost: t\r\nConnection: close\r\n{}\r\n", method, target, version,
                     extra);
}

// Every path the port serves besides /metrics, and the Content-Type it is served with.
std::vector<std::pair<std::string, std::string>> page_paths() {
  return {{"/", "text/html; charset=utf-8"},
          {"/page.js", "text/javascript; charset=utf-8"},
          {"/page.css", "text/css; charset=utf-8"},
          {"/uplot.js", "text/javascript; charset=utf-8"},
          {"/uplot.css", "text/css; charset=utf-8"},
          {"/uplot-license.txt", "text/plain; charset=utf-8"},
          {"/api/run", "application/json"}};
}

std::vector<RequestShape> request_shapes() {
  std::vector<RequestShape> shapes;
  for (const char* method : {"GET", "HEAD"})
    shapes.push_back(
        {fmt::format("{} /metrics", method), http(method, "/metrics"), {method}, {200}});
  for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "FOO", "get"})
    shapes.push_back(
        {fmt::format("{} /metrics", method), http(method, "/metrics"), {method}, {405}});
  shapes.push_back({"CONNECT",
                    "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
                    {"CONNECT"},
                    {405}});
  shapes.push_back({"POST with a body",
                    http("POST", "/metrics", "HTTP/1.1", "Content-Length: 11\r\n") + "hello=world",
                    {"POST"},
                    {405}});
  shapes.push_back(
      {"PUT of 1 MiB",
       http("PUT", "/", "HTTP/1.1", "Content-Length: 1048576\r\n") + std::string(1 << 20, 'x'),
       {"PUT"},
       {405}});
  shapes.push_back(
      {"POST chunked",
       http("POST", "/", "HTTP/1.1", "Transfer-Encoding: chunked\r\n") + "5\r\nhello\r\n0\r\n\r\n",
       {"POST"},
       {405}});
  shapes.push_back({"a negative Content-Length",
                    http("POST", "/metrics", "HTTP/1.1", "Content-Length: -5\r\n"),
                    {"POST"},
                    {400}});
  shapes.push_back(
      {"a Content-Length of 10^20",
       http("POST", "/metrics", "HTTP/1.1", "Content-Length: 99999999999999999999\r\n"),
       {"POST"},
       {413}});
  shapes.push_back({"GET with a query", http("GET", "/metrics?x=1&y"), {"GET"}, {200}});
  // The live page and its files, /api/run: read by either method, refused by any other.
  for (const auto& [path, type] : page_paths()) {
    for (const char* method : {"GET", "HEAD"})
      shapes.push_back({fmt::format("{} {}", method, path), http(method, path), {method}, {200}});
    for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS"})
      shapes.push_back({fmt::format("{} {}", method, path), http(method, path), {method}, {405}});
  }
  for (const char* path : {"/index.html", "/favicon.ico", "//metrics", "/metrics/../../etc/passwd",
                           "/%00", "/%zz", "*", "/metrics#x", "/\xc3\xa9", "/api/../metrics/"}) {
    shapes.push_back({fmt::format("GET {}", path), http("GET", path), {"GET"}, {404}});
  }
  std::string long_path(1 + (1 << 20), 'a');
  long_path[0] = '/';
  shapes.push_back({"a path of 1 MiB", http("GET", long_path), {"GET"}, {414}});
  shapes.push_back(
      {"a header of 100 KiB",
       http("GET", "/metrics", "HTTP/1.1", fmt::format("X-Big: {}\r\n", std::string(100'000, 'b'))),
       {"GET"},
       {431}});
  std::string many;
  for (int i = 0; i < 5000; ++i) many += fmt::format("X-{}: v\r\n", i);
  shapes.push_back({"5000 headers", http("GET", "/metrics", "HTTP/1.1", many), {"GET"}, {431}});
  shapes.push_back({"HTTP/1.0", "GET /metrics HTTP/1.0\r\n\r\n", {"GET"}, {200}});
  shapes.push_back({"HTTP/1.1 without Host",
                    "GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n",
                    {"GET"},
                    {200}});
  shapes.push_back({"no version (HTTP/0.9)", "GET /metrics\r\n\r\n", {"GET"}, {400}});
  shapes.push_back(
      {"HTTP/2.0 in HTTP/1's words", http("GET", "/metrics", "HTTP/2.0"), {"GET"}, {505}});
  shapes.push_back({"words that are not HTTP", "not http at all\r\n\r\n", {"GET"}, {400}});
  shapes.push_back({"pipelined: GET, HEAD, a 404, GET",
                    "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\nHEAD /metrics HTTP/1.1\r\nHost: "
                    "t\r\n\r\nGET /nope HTTP/1.1\r\nHost: t\r\n\r\n" +
                        http("GET", "/metrics"),
                    {"GET", "HEAD", "GET", "GET"},
                    {200, 200, 404, 200}});
  // Not HTTP: a TLS client hello, and binary bytes with a NUL.
  shapes.push_back({"a TLS client hello",
                    std::string("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", 11),
                    {"GET"},
                    {}});
  shapes.push_back({"binary bytes", std::string("\x00\xff\x13 garbage\r\n\r\n", 16), {"GET"}, {}});
  return shapes;
}

// JSON strings are UTF-8; the script reads each character back as one byte (Latin-1).
std::string as_latin1_text(const std::string& bytes) {
  std::string text;
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x80) {
      text += c;
    } else {
      text += static_cast<char>(0xc0 | (byte >> 6));
      text += static_cast<char>(0x80 | (byte & 0x3f));
    }
  }
  return text;
}

// What http_requests.py read back for each shape, in order.
std::vector<nlohmann::json> send_shapes(uint16_t port, const std::vector<RequestShape>& shapes) {
  nlohmann::json requests = nlohmann::json::array();
  for (const RequestShape& shape : shapes) {
    requests.push_back(
        {{"name", shape.name}, {"send", as_latin1_text(shape.bytes)}, {"methods", shape.methods}});
  }
  testing::TempDir dir;
  testing::write_bytes(dir / "requests.json", requests.dump());
  const testing::ProcessResult r = testing::run_command(
      {"python3", std::string(DTRAIN_SOURCE_DIR) + "/tests/support/http_requests.py", "127.0.0.1",
       std::to_string(port), (dir / "requests.json").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<nlohmann::json> results;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) results.push_back(nlohmann::json::parse(line));
  return results;
}

// The step of a local run's step line ("step 350, loss = ..."), or nullopt.
std::optional<long> step_of_line(const std::string& line) {
  long step = 0;
  if (std::sscanf(line.c_str(), "step %ld, loss", &step) != 1) return std::nullopt;
  return step;
}

TEST(MetricsPort, EveryMethodAndPathIsAnsweredAndTheTaskTrainsOnToItsEnd) {
  constexpr int kSteps = 4000;
  DtrainProcess run(concat({"train", "--metrics_port", "0"}, port_training(kSteps)));
  const std::vector<std::string> urls = testing::metrics_urls(run, 1);
  ASSERT_EQ(urls.size(), 1u);
  ASSERT_THAT(run.wait_for_line("step 100,"), HasSubstr("step 100,"));

  const std::vector<RequestShape> shapes = request_shapes();
  const std::vector<nlohmann::json> results = send_shapes(testing::port_of(urls[0]), shapes);
  ASSERT_EQ(results.size(), shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    const nlohmann::json& got = results[i];
    std::vector<int> statuses;
    for (const nlohmann::json& answer : got["answers"]) statuses.push_back(answer["status"]);
    EXPECT_EQ(statuses, shapes[i].statuses) << shapes[i].name << ": " << got.dump();
    if (shapes[i].statuses.empty()) {
      EXPECT_THAT(got["error"].get<std::string>(), HasSubstr("RemoteDisconnected"))
          << shapes[i].name;
    }
    for (const nlohmann::json& answer : got["answers"]) {
      if (answer["status"] == 405) {
        EXPECT_EQ(answer["allow"], "GET, HEAD") << shapes[i].name;
      }
      // Every answer the server makes (the library's own 4xx aside) is what its type says, and
      // the page it is part of loads nothing from elsewhere.
      if (answer["status"] == 200 || answer["status"] == 404 || answer["status"] == 405) {
        EXPECT_EQ(answer["nosniff"], "nosniff") << shapes[i].name;
        EXPECT_EQ(answer["csp"], "default-src 'self'; frame-ancestors 'none'") << shapes[i].name;
        EXPECT_NE(answer["content_type"], "") << shapes[i].name;
      }
    }
    for (const auto& [path, type] : page_paths()) {
      if (shapes[i].statuses == std::vector<int>{200} && shapes[i].name.ends_with(" " + path)) {
        EXPECT_EQ(got["answers"][0]["content_type"], type) << shapes[i].name;
      }
    }
  }

  // Still serving, and still training: the requests all came while it trained.
  const std::string page = testing::scrape(urls[0]);
  const std::optional<double> local = testing::sample(page, R"(dtrain_local_step{task="local"})");
  ASSERT_TRUE(local) << page;
  ASSERT_LT(*local, kSteps) << "the run ended before the requests did: lengthen it";
  const std::string later = run.wait_for_line_where([&](const std::string& line) {
    const std::optional<long> step = step_of_line(line);
    return step && *step > *local;
  });
  EXPECT_FALSE(later.empty()) << "no step line after the requests";
  const testing::ProcessResult result = run.wait();
  EXPECT_EQ(result.exit_code, 0) << testing::all_output(result);
  EXPECT_THAT(result.out, HasSubstr(fmt::format("Training elapsed time: ")));
  EXPECT_THAT(result.out, HasSubstr(fmt::format("({} steps,", kSteps)));
}

// The issue's 23 bytes: the request line of a scrape, and then nothing.
TEST(MetricsPort, AHalfSentRequestHoldsUpNoScrapeAndIsClosedAfterTheTimeout) {
  DtrainProcess run(concat({"train", "--metrics_port", "0"}, port_training(100'000)));
  const std::vector<std::string> urls = testing::metrics_urls(run, 1);
  ASSERT_EQ(urls.size(), 1u);
  const uint16_t port = testing::port_of(urls[0]);
  ASSERT_THAT(run.wait_for_line("step 100,"), HasSubstr("step 100,"));

  testing::RawClient slow(port);
  ASSERT_TRUE(slow.connected());
  ASSERT_TRUE(slow.send("GET /metrics HTTP/1.1\r\n"));
  testing::RawClient scraper(port);
  ASSERT_TRUE(scraper.connected());
  ASSERT_TRUE(scraper.send(http("GET", "/metrics")));
  const std::string answer = scraper.read_until_closed(DtrainProcess::kPatience);
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(answer, HasSubstr("\ndtrain_local_step{task=\"local\"} "));
  // Answered while the half-sent request was still open: not once the server gave up on it (and
  // answered or closed it).
  EXPECT_FALSE(slow.heard_from_server());

  // And the half-sent request does not hold its connection for ever.
  slow.read_until_closed(DtrainProcess::kPatience);
  EXPECT_TRUE(slow.closed_by_server());
  run.send_signal(SIGTERM);
  EXPECT_EQ(run.wait().exit_code, 128 + SIGTERM);
}

}  // namespace
}  // namespace dtrain
