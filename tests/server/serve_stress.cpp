// The hostile-client suite of `wgrt serve` (ctest label "stress"; tools/test.sh runs it apart
// from the main suite): on loopback, with the tiny byte-vocabulary model, one server takes
//   - bombs: 100k-level JSON in any field, a 50 MB chunked body, a gzip body, a 256 MB header
//     line, 300k header lines;
//   - slowloris: 90 connections dribbling a header line a second while 4 legitimate requests
//     must be served;
//   - a burst of 256 clients connecting at once, twice: nothing lost;
//   - pipelining: requests in one write, each answered;
//   - disconnects: clients hanging up mid-generation (streamed or not) and while queued;
// and is alive and answering correctly after all of it, its memory bounded; then a second
// server is stopped by SIGTERM under load (exit 0, every client answered or closed cleanly).
// Every loop is bounded in count and time. Prints requests sent / answered / lost and the
// server's RSS before and after.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "server/serve_support.h"

namespace wgrt {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test::RawReader;
using test::RawResponse;

struct Tally {
  std::atomic<uint64_t> sent{0}, answered{0}, lost{0}, abandoned{0};  // abandoned: the client hung up on purpose
  void count(const RawResponse& r) {
    ++sent;
    ++(r.status != 0 ? answered : lost);
  }
};
Tally g_tally;

// Sends `total` bytes made by `piece` until the server answers (it may refuse early and close);
// the answer, status 0 when none came.
RawResponse send_until_answered(int port, const std::string& head, const std::string& piece, size_t total,
                                const std::string& tail = "") {
  const int fd = test::connect_to(port);
  RawReader rd{fd};
  RawResponse r;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  bool ok = test::send_bytes(fd, head);
  for (size_t sent = 0; ok && sent < total && std::chrono::steady_clock::now() < deadline; sent += piece.size()) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) break;  // answered (and refused) already
    ok = test::send_bytes(fd, piece);
  }
  if (ok) test::send_bytes(fd, tail);
  r = rd.next(20s);
  ::close(fd);
  g_tally.count(r);
  return r;
}

void bombs(int port) {
  const std::string deep_list = std::string(100000, '[') + std::string(100000, ']');
  std::string deep_object;
  for (int i = 0; i < 100000; ++i) deep_object += "{\"k\":";
  deep_object += "0" + std::string(100000, '}');
  const std::vector<std::string> deep = {
      R"({"messages": [{"role": "user", "content": )" + deep_list + "}]}",
      R"({"messages": [{"role": "user", "content": "x"}], "tools": )" + deep_list + "}",
      R"({"messages": [{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", )"
      R"("arguments": )" + deep_object + "}}]}]}",
      R"({"prompt": "x", "whatever": )" + deep_object + "}",
  };
  for (const std::string& body : deep) {
    const RawResponse r = test::roundtrip(port, test::post("/v1/chat/completions", body));
    g_tally.count(r);
    EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
  }
  // 50 MB chunked against a 1 MiB --max-body: refused once past it.
  const std::string chunk = fmt::format("{:x}\r\n{}\r\n", 65536, std::string(65536, 'a'));
  RawResponse r = send_until_answered(
      port, fmt::format("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n", test::kKey),
      chunk, 50u << 20, "0\r\n\r\n");
  EXPECT_EQ(r.status, 413) << r.head;
  // A gzip body (a bomb would inflate 1000x): refused unread.
  r = send_until_answered(port, test::post("/v1/completions", std::string(204800, '\0'), "Content-Encoding: gzip\r\n"),
                          "", 0);
  EXPECT_EQ(r.status, 415) << r.head;
  // A 256 MB header line, 300k header lines: refused past 32 KiB of head.
  r = send_until_answered(port, "GET /health HTTP/1.1\r\nX-Big: ", std::string(1 << 16, 'h'), 256u << 20, "\r\n\r\n");
  EXPECT_EQ(r.status, 431) << r.head;
  std::string lines;
  for (int i = 0; i < 1000; ++i) lines += "X-L: y\r\n";
  r = send_until_answered(port, "GET /health HTTP/1.1\r\n", lines, 300 * lines.size(), "\r\n");
  EXPECT_EQ(r.status, 431) << r.head;
}

// 90 slow connections each send a header line a second; 4 legitimate requests meanwhile.
void slowloris(int port) {
  std::atomic<bool> stop{false};
  std::atomic<int> slow_closed{0};
  std::vector<std::thread> slow;
  for (int i = 0; i < 90; ++i)
    slow.emplace_back([&] {
      const int fd = test::connect_to(port);
      if (fd < 0) return;
      test::send_bytes(fd, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n");
      for (int k = 0; k < 8 && !stop.load(); ++k) {
        std::this_thread::sleep_for(1s);
        if (!test::send_bytes(fd, "X-Slow: y\r\n")) break;
      }
      RawReader rd{fd};
      if (rd.next(1s).status == 408 || rd.eof) ++slow_closed;
      ::close(fd);
    });
  std::this_thread::sleep_for(1500ms);
  const auto t0 = std::chrono::steady_clock::now();
  int served = 0;
  for (int i = 0; i < 4; ++i) {
    const RawResponse r = test::roundtrip(port, test::post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2})"),
                                         20s);
    g_tally.count(r);
    served += r.status == 200;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stop = true;
  for (auto& t : slow) t.join();
  std::fprintf(stderr, "stress: slowloris: 4 legitimate requests, %d served in %.1f s beside 90 slow connections "
               "(%d of them cut at the read deadline)\n", served, secs, slow_closed.load());
  EXPECT_EQ(served, 4);
  EXPECT_LT(secs, 20.0);
  EXPECT_GE(slow_closed.load(), 80) << "slow connections outlived --read-timeout";
}

// `clients` connect at once, each sends one completion; nothing may be lost.
void burst(int port, int clients) {
  std::barrier start(clients);
  std::atomic<int> ok{0}, lost{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < clients; ++i)
    ts.emplace_back([&, i] {
      start.arrive_and_wait();
      const std::string body = json{{"prompt", fmt::format("burst {}", i)}, {"max_tokens", 1}}.dump();
      const RawResponse r = test::roundtrip(port, test::post("/v1/completions", body), 60s);
      g_tally.count(r);
      ++(r.status == 200 ? ok : lost);
    });
  for (auto& t : ts) t.join();
  std::fprintf(stderr, "stress: burst of %d clients: %d answered 200, %d lost\n", clients, ok.load(), lost.load());
  EXPECT_EQ(ok.load(), clients);
}

void pipelining(int port) {
  int answered = 0;
  for (int c = 0; c < 20; ++c) {
    const int fd = test::connect_to(port);
    RawReader rd{fd};
    std::string all;
    for (int k = 0; k < 3; ++k) all += test::post("/tokenize", json{{"content", std::string(k + 1, 'p')}}.dump());
    test::send_bytes(fd, all);
    for (int k = 0; k < 3; ++k) {
      const RawResponse r = rd.next(10s);
      g_tally.count(r);
      if (r.status == 200 && json::parse(r.body)["tokens"].size() == size_t(k + 2)) ++answered;  // BOS + k+1
    }
    ::close(fd);
  }
  EXPECT_EQ(answered, 60);
}

uint64_t metric(int port, const std::string& line_prefix) {
  const std::string m = test::roundtrip(port, test::get("/metrics")).body;
  const size_t at = m.find("\n" + line_prefix);  // the sample, not its # HELP line
  return at == std::string::npos ? 0 : std::stoull(m.substr(at + 1 + line_prefix.size()));
}

// Clients that hang up: non-streamed and streamed mid-generation, and queued ones.
void disconnects(int port) {
  const std::string cancelled = "wgrt_requests_total{result=\"cancelled\"} ";
  const std::string done = "wgrt_requests_total{result=\"done\"} ";
  const uint64_t before = metric(port, cancelled), done_before = metric(port, done),
                 gen_before = metric(port, "wgrt_generated_tokens_total ");
  std::vector<int> fds;
  for (int i = 0; i < 12; ++i) {
    const int fd = test::connect_to(port);
    const bool stream = i % 2;
    test::send_bytes(fd, test::post("/v1/completions",
                                    json{{"prompt", "gone"}, {"max_tokens", 800}, {"stream", stream}}.dump()));
    fds.push_back(fd);
    ++g_tally.sent;
    ++g_tally.abandoned;
  }
  std::this_thread::sleep_for(500ms);
  for (int fd : fds) ::close(fd);
  const auto t0 = std::chrono::steady_clock::now();
  // Each ends cancelled, or done if the random model drew its end token first.
  auto ended = [&] { return metric(port, cancelled) - before + metric(port, done) - done_before; };
  while (ended() < 12 && std::chrono::steady_clock::now() - t0 < 20s) std::this_thread::sleep_for(100ms);
  const uint64_t n = metric(port, cancelled) - before, gen = metric(port, "wgrt_generated_tokens_total ") - gen_before;
  std::fprintf(stderr, "stress: 12 clients hung up (6 streamed, 6 not; 8 of them queued): %llu cancelled, %llu ended "
               "by the model first, %llu tokens generated for them (of 9600 asked)\n", (unsigned long long)n,
               (unsigned long long)(ended() - n), (unsigned long long)gen);
  EXPECT_EQ(ended(), 12u) << "requests whose client went away went on";
  EXPECT_GE(n, 8u);
  EXPECT_LT(gen, 9600u / 4);
  // Those requests were not waited for: not lost. A live request now is served at once.
  const auto t1 = std::chrono::steady_clock::now();
  const RawResponse r = test::roundtrip(port, test::post("/v1/completions", R"({"prompt": "live", "max_tokens": 2})"));
  g_tally.count(r);
  EXPECT_EQ(r.status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - t1, 10s);
}

// Memory per request body: 8 bodies of 1 MiB at once (a long message, a large tools list).
void big_bodies(int port) {
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i)
    ts.emplace_back([&, i] {
      json body;
      if (i % 2) {
        body = {{"prompt", std::string(1000000, 'w')}, {"max_tokens", 1}};
      } else {
        json tools = json::array();
        for (int k = 0; k < 30000; ++k) tools.push_back({{"n", k}});
        body = {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"tools", tools}, {"max_tokens", 1}};
      }
      const RawResponse r = test::roundtrip(port, test::post(i % 2 ? "/v1/completions" : "/v1/chat/completions",
                                                            body.dump()));
      g_tally.count(r);
      EXPECT_TRUE(r.status == 200 || r.status == 400) << r.status << " " << r.body.substr(0, 200);
    });
  for (auto& t : ts) t.join();
}

TEST(ServeStress, HostileClientsLoseNothingAndTheServerStaysCorrect) {
  test::ServerProcess s({"--parallel", "4", "--queue-size", "300", "--read-timeout", "2", "--max-body", "1048576"});
  ASSERT_GT(s.port, 0);
  // Warm: one of each kind, so that the figures after compare like with like.
  g_tally.count(test::roundtrip(s.port, test::post("/v1/completions", R"({"prompt": "warm", "max_tokens": 2})")));
  const size_t rss_before = s.rss_kib();
  const auto t0 = std::chrono::steady_clock::now();
  auto phase = [&](const char* name, auto&& run) {
    run();
    std::fprintf(stderr, "stress: after %s: server RSS %zu KiB\n", name, s.rss_kib());
  };
  phase("bombs", [&] { bombs(s.port); });
  phase("slowloris", [&] { slowloris(s.port); });
  phase("two bursts of 256", [&] {
    burst(s.port, 256);
    burst(s.port, 256);
  });
  phase("pipelining", [&] { pipelining(s.port); });
  phase("disconnects", [&] { disconnects(s.port); });
  {
    // The peak while 8 bodies of 1 MiB are parsed at once, sampled every 5 ms.
    const size_t base = s.rss_kib();
    std::atomic<bool> sampling{true};
    std::atomic<size_t> peak{base};
    std::thread sampler([&] {
      while (sampling.load()) {
        peak = std::max(peak.load(), s.rss_kib());
        std::this_thread::sleep_for(5ms);
      }
    });
    phase("8 bodies of 1 MiB at once", [&] { big_bodies(s.port); });
    sampling = false;
    sampler.join();
    std::fprintf(stderr, "stress: 8 bodies of 1 MiB at once: server RSS peak %zu KiB over %zu KiB before (%.1f x the "
                 "8 MiB of bodies)\n", peak.load() - base, base, double(peak.load() - base) / 8192.0);
    EXPECT_LT(peak.load() - base, 8u * 1024 * 12) << "more than 12 x the bodies in flight";
  }
  // Alive and correct: the same greedy text as before everything.
  auto c = s.client();
  auto a = c.Post("/v1/completions", R"({"prompt": "The end", "max_tokens": 8, "temperature": 0})", "application/json");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 200);
  EXPECT_TRUE(test::healthy(s.port));
  const size_t rss_after = s.rss_kib();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr,
               "stress: requests sent %llu, answered %llu, lost %llu (lost: no response to a request the client "
               "waited for; %llu more were hung up on purpose) in %.1f s; server RSS %zu KiB before, %zu KiB after\n",
               (unsigned long long)g_tally.sent.load(), (unsigned long long)g_tally.answered.load(),
               (unsigned long long)g_tally.lost.load(), (unsigned long long)g_tally.abandoned.load(), secs, rss_before,
               rss_after);
  EXPECT_EQ(g_tally.lost.load(), 0u);
  EXPECT_EQ(g_tally.answered.load() + g_tally.abandoned.load(), g_tally.sent.load());
  EXPECT_LT(rss_after, rss_before + 256 * 1024) << "the server kept more than 256 MiB";
  EXPECT_EQ(s.stop(), 0);
}

// SIGTERM while 24 clients stream, wait and tokenize: exit 0 (no crash in a handler still
// tokenizing), every client answered or its connection closed, no hang.
TEST(ServeStress, ShutdownUnderLoadIsOrderly) {
  for (int round = 0; round < 2; ++round) {
    test::ServerProcess s({"--parallel", "2", "--queue-size", "64"});
    ASSERT_GT(s.port, 0);
    std::atomic<bool> stop{false};
    std::atomic<int> hung{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < 24; ++i)
      ts.emplace_back([&, i] {
        for (int k = 0; k < 50 && !stop.load(); ++k) {
          std::string body;
          const char* path = "/tokenize";
          if (i % 3 == 0) {
            body = json{{"content", std::string(20000, 'z')}}.dump();
          } else {
            path = "/v1/chat/completions";
            body = json{{"messages", {{{"role", "user"}, {"content", std::string(200, 'q')}}}}, {"max_tokens", 40},
                        {"stream", i % 3 == 1}}.dump();
          }
          const int fd = test::connect_to(s.port);
          if (fd < 0) return;  // stopped: no more connections
          RawReader rd{fd};
          test::send_bytes(fd, test::post(path, body));
          const RawResponse r = rd.next(30s);
          if (r.status == 0 && !rd.eof) ++hung;  // neither answered nor closed
          ::close(fd);
        }
      });
    std::this_thread::sleep_for(1500ms);
    const int rc = s.stop(SIGTERM, 30s);
    stop = true;
    for (auto& t : ts) t.join();
    EXPECT_EQ(rc, 0) << "round " << round << ":\n" << test::slurp(s.err_path);
    EXPECT_EQ(hung.load(), 0);
  }
}

}  // namespace
}  // namespace wgrt
