// HTTP framing and the checks on a request's head (server/http_wire.h), on bytes in memory:
// pipelined requests, unread and chunked bodies, the limits on heads and bodies of every
// transfer coding, encodings refused, the read deadline, Host / Origin / key checks, routes.
#include "server/http_wire.h"

#include <gtest/gtest.h>

#include <string>

namespace wgrt::server {
namespace {

// Bytes from memory, `step` at a time; then the end of the stream, or a timeout.
struct MemorySource : ByteSource {
  std::string data;
  size_t at = 0, step = 7;
  bool time_out_at_end = false;
  explicit MemorySource(std::string d, size_t s = 7) : data(std::move(d)), step(s) {}
  size_t read(char* dst, size_t n, std::error_code& ec) override {
    if (at == data.size()) {
      if (time_out_at_end) ec = std::make_error_code(std::errc::timed_out);
      return 0;
    }
    const size_t k = std::min({n, step, data.size() - at});
    data.copy(dst, k, at);
    at += k;
    return k;
  }
};

struct Read {
  ReadStatus status;
  HttpRequest req;
  HttpError error;
};

// One request, head and body.
Read next(RequestReader& r, ByteSource& src) {
  Read out;
  out.status = r.read_head(src, out.req, out.error);
  if (out.status == ReadStatus::Head && !r.read_body(src, out.req, out.error)) out.status = ReadStatus::Error;
  return out;
}

TEST(HttpWire, PipelinedRequestsInOneWriteAreEachRead) {
  MemorySource src(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
      "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
      4096);
  RequestReader r({});
  Read a = next(r, src);
  ASSERT_EQ(a.status, ReadStatus::Head) << a.error.message;
  EXPECT_EQ(a.req.method, "POST");
  EXPECT_EQ(a.req.path, "/v1/completions");
  EXPECT_EQ(a.req.body, "hello");
  EXPECT_TRUE(r.buffered());
  Read b = next(r, src);
  ASSERT_EQ(b.status, ReadStatus::Head) << b.error.message;
  EXPECT_EQ(b.req.method, "GET");
  EXPECT_EQ(b.req.path, "/health");
  Read c = next(r, src);
  ASSERT_EQ(c.status, ReadStatus::Head) << c.error.message;
  EXPECT_EQ(c.req.body, "abcde");
  EXPECT_EQ(next(r, src).status, ReadStatus::Closed);
}

TEST(HttpWire, AGetBodyIsReadAsItsBodyNotAsANextRequest) {
  // The body spells a request: it must never be served as one.
  const std::string smuggled = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  MemorySource src("GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(smuggled.size()) +
                   "\r\n\r\n" + smuggled + "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
  RequestReader r({});
  Read a = next(r, src);
  ASSERT_EQ(a.status, ReadStatus::Head);
  EXPECT_EQ(a.req.body, smuggled);
  Read b = next(r, src);
  ASSERT_EQ(b.status, ReadStatus::Head);
  EXPECT_EQ(b.req.path, "/v1/models");
}

HttpError error_of(const std::string& bytes, HttpLimits lim = {}) {
  MemorySource src(bytes, 1 << 16);
  RequestReader r(lim);
  Read a = next(r, src);
  EXPECT_EQ(a.status, ReadStatus::Error) << bytes.substr(0, 200);
  return a.error;
}

TEST(HttpWire, BodiesOfEveryTransferCodingAreLimited) {
  HttpLimits lim;
  lim.max_body = 1000;
  EXPECT_EQ(error_of("POST /tokenize HTTP/1.1\r\nContent-Length: 1001\r\n\r\n", lim).status, 413);
  // Chunked: counted as it arrives, whatever the chunk sizes say.
  std::string chunked = "POST /tokenize HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 30; ++i) chunked += "40\r\n" + std::string(64, 'a') + "\r\n";
  const HttpError e = error_of(chunked + "0\r\n\r\n", lim);
  EXPECT_EQ(e.status, 413);
  EXPECT_NE(e.message.find("1000 bytes"), std::string::npos) << e.message;
  EXPECT_EQ(error_of("POST /tokenize HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffff\r\n", lim).status,
            413);
}

TEST(HttpWire, CompressedAndUnknownCodingsAreRefused) {
  EXPECT_EQ(error_of("POST /tokenize HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc").status, 415);
  EXPECT_EQ(error_of("POST /tokenize HTTP/1.1\r\nContent-Encoding: deflate\r\nContent-Length: 3\r\n\r\nabc").status,
            415);
  EXPECT_EQ(error_of("POST /tokenize HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n").status, 501);
  EXPECT_EQ(error_of("POST /tokenize HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n").status,
            400);
  EXPECT_EQ(error_of("POST /tokenize HTTP/1.1\r\nExpect: 200-ok\r\nContent-Length: 3\r\n\r\nabc").status, 417);
  EXPECT_EQ(error_of("GET /health HTTP/2.0\r\n\r\n").status, 505);
  EXPECT_EQ(error_of("NOT HTTP AT ALL\r\n\r\n").status, 400);
}

TEST(HttpWire, HeadersAreLimitedInLineLengthCountAndTotal) {
  HttpLimits lim;
  const HttpError line = error_of("GET /health HTTP/1.1\r\nX-Long: " + std::string(9000, 'a') + "\r\n\r\n", lim);
  EXPECT_EQ(line.status, 431);
  EXPECT_NE(line.message.find("X-Long"), std::string::npos) << line.message;
  std::string many = "GET /health HTTP/1.1\r\n";
  for (int i = 0; i < 101; ++i) many += "X-" + std::to_string(i) + ": y\r\n";
  EXPECT_EQ(error_of(many + "\r\n", lim).status, 431);
  // A head that never ends: refused once it passes the total, without reading the rest.
  std::string endless = "GET /health HTTP/1.1\r\n";
  while (endless.size() < (1u << 20)) endless += "X-Filler: " + std::string(100, 'z') + "\r\n";
  MemorySource src(endless, 4096);
  RequestReader r(lim);
  Read a = next(r, src);
  EXPECT_EQ(a.status, ReadStatus::Error);
  EXPECT_EQ(a.error.status, 431);
  EXPECT_LT(src.at, size_t(lim.max_header_bytes) * 3) << "read far past the limit";
  EXPECT_EQ(error_of("GET /" + std::string(9000, 'p') + " HTTP/1.1\r\n\r\n").status, 414);
}

TEST(HttpWire, ADeadlineMidRequestIs408AndIdleIsAQuietClose) {
  MemorySource partial("POST /tokenize HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
  partial.time_out_at_end = true;
  RequestReader r({});
  Read a = next(r, partial);
  EXPECT_EQ(a.status, ReadStatus::Error);
  EXPECT_EQ(a.error.status, 408);
  MemorySource head_only("GET /health HTTP/1.1\r\nHost: x\r\n");
  head_only.time_out_at_end = true;
  RequestReader r2({});
  EXPECT_EQ(next(r2, head_only).error.status, 408);
  MemorySource idle("");
  idle.time_out_at_end = true;
  RequestReader r3({});
  EXPECT_EQ(next(r3, idle).status, ReadStatus::Closed);
}

HttpRequest head(std::string path, std::vector<std::pair<std::string, std::string>> fields,
                 std::string method = "POST") {
  HttpRequest r;
  r.method = std::move(method);
  r.path = r.target = std::move(path);
  r.fields = std::move(fields);
  return r;
}

TEST(HttpWire, HostOriginAndKeyChecks) {
  AccessPolicy p;
  p.api_key = "sekret";
  p.allowed_hosts = default_allowed_hosts("127.0.0.1");
  auto status = [&](const HttpRequest& r) { return check_access(r, p) ? check_access(r, p)->status : 0; };
  EXPECT_EQ(status(head("/v1/completions", {{"Host", "127.0.0.1:8080"}, {"Authorization", "Bearer sekret"}})), 0);
  EXPECT_EQ(status(head("/v1/completions", {{"Host", "localhost"}, {"Authorization", "Bearer sekreT"}})), 401);
  EXPECT_EQ(status(head("/health", {{"Host", "[::1]:80"}})), 0) << "/health needs no key";
  // DNS rebinding: a page of evil.example resolved to 127.0.0.1 sends its own name as Host.
  EXPECT_EQ(status(head("/health", {{"Host", "evil.example:8080"}})), 403);
  // A page of another origin: 403 unless --cors allows it; the server's own origin is fine.
  const auto from = [&](const std::string& origin) {
    return head("/v1/completions", {{"Host", "127.0.0.1:8080"}, {"Origin", origin}, {"Authorization", "Bearer sekret"}});
  };
  EXPECT_EQ(status(from("https://evil.example")), 403);
  EXPECT_EQ(status(from("http://127.0.0.1:8080")), 0);
  EXPECT_EQ(cors_allow_origin(from("https://app.example"), p), "");
  p.cors_origins = {"https://app.example"};
  EXPECT_EQ(status(from("https://app.example")), 0);
  EXPECT_EQ(cors_allow_origin(from("https://app.example"), p), "https://app.example");
  EXPECT_EQ(status(from("https://evil.example")), 403);
  // Bound to all interfaces: any Host.
  EXPECT_TRUE(default_allowed_hosts("0.0.0.0").empty());
}

TEST(HttpWire, Routes) {
  EXPECT_EQ(find_route("GET", "/health"), Route::Health);
  EXPECT_EQ(find_route("POST", "/v1/chat/completions"), Route::ChatCompletions);
  EXPECT_EQ(find_route("POST", "/completions"), Route::Completions);
  EXPECT_EQ(find_route("GET", "/v1/completions"), Route::MethodNotAllowed);
  EXPECT_EQ(find_route("OPTIONS", "/v1/completions"), Route::Preflight);
  EXPECT_EQ(find_route("POST", "/v1/embeddings"), Route::Embeddings);
  EXPECT_EQ(find_route("POST", "/v1/audio/speech"), Route::NotFound);
  EXPECT_EQ(find_route("GET", "/props"), Route::Props);
  EXPECT_EQ(find_route("GET", "/slots"), Route::Slots);
  EXPECT_EQ(find_route("POST", "/slots"), Route::MethodNotAllowed);
  EXPECT_EQ(find_route("GET", "/v1/models/gpt-4o-mini"), Route::Model);
  EXPECT_EQ(find_route("DELETE", "/v1/models/gpt-4o-mini"), Route::MethodNotAllowed);
  EXPECT_EQ(find_route("GET", "/v1/models/"), Route::NotFound);
  EXPECT_EQ(model_path_id("/v1/models/org%2Fmodel.gguf"), "org/model.gguf");
  EXPECT_EQ(model_path_id("/v1/models/a/b"), "a/b");
  EXPECT_EQ(model_path_id("/v1/models/bad%2"), "");
  EXPECT_EQ(model_path_id("/v1/models/bad%zz"), "");
}

}  // namespace
}  // namespace wgrt::server
